// Sources: where Services, EndpointSlices, this node's Node and ServiceCIDRs come from.
//
//   KubernetesSource   list+watch against the API server (reflector.ts over kube-api.ts)
//   ManifestDirSource  a directory of YAML/JSON manifests (standalone mode)
//
// Both implement Source and feed a SourceHandler with prev/cur pairs keyed by namespace/name.

export type { Reject, RejectCounter, Source, SourceHandler, SourceKind } from './types.ts';
export { objectKey, SOURCE_KINDS } from './types.ts';
export type { Converted, KindObject } from './convert.ts';
export {
  convertEndpointSlice,
  convertNode,
  convertService,
  convertServiceCIDR,
  PROXY_LABEL_SELECTOR,
  rfc3339,
  selectedByProxy,
  toPlain,
} from './convert.ts';
export type { ConnectionOptions, KubeApi, Query, WatchEvent, WatchEventType } from './kube-api.ts';
export {
  ApiError,
  ClientNodeApi,
  isGone,
  isNotFound,
  isTooLargeResourceVersion,
  KubeConfigError,
  loadKubeConfig,
  WatchDecodeError,
} from './kube-api.ts';
export type { BackoffOptions, ReflectorEvents, ReflectorOptions } from './reflector.ts';
export { backoffDelay, DEFAULT_BACKOFF, Reflector } from './reflector.ts';
export type { KubernetesSourceOptions } from './kubernetes.ts';
export { KubernetesSource, PATHS } from './kubernetes.ts';
export type { ManifestDirSourceOptions, ParseResult } from './manifest-dir.ts';
export { ManifestDirSource, parseManifest } from './manifest-dir.ts';

import type { ConnectionOptions } from './kube-api.ts';
import { ClientNodeApi, loadKubeConfig } from './kube-api.ts';
import type { KubernetesSourceOptions } from './kubernetes.ts';
import { KubernetesSource } from './kubernetes.ts';

/** A KubernetesSource configured as kube-proxy's flags say (--kubeconfig, --master, in-cluster). */
export function kubernetesSourceFromFlags(
  conn: ConnectionOptions,
  opts: Omit<KubernetesSourceOptions, 'api'>,
): KubernetesSource {
  return new KubernetesSource({ ...opts, api: new ClientNodeApi(loadKubeConfig(conn)) });
}
