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

import { systemClock } from '../base/clock.ts';
import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import { EventRecorder } from './events.ts';
import { limitedApi, TokenBucket } from './client-limits.ts';
import type { RequestObservation } from './client-limits.ts';
import type { ConnectionOptions, KubeApi } from './kube-api.ts';
import { ClientNodeApi, loadKubeConfig } from './kube-api.ts';
import type { KubernetesSourceOptions } from './kubernetes.ts';
import { KubernetesSource } from './kubernetes.ts';

export type { EventRef, EventSink, EventType, KubeWriter } from './events.ts';
export { EventRecorder, microTime, nodeRef } from './events.ts';
export type { ClientLimits, RequestObservation } from './client-limits.ts';
export { limitedApi, TokenBucket } from './client-limits.ts';

/** clientConnection settings beyond where the server is: --kube-api-qps/-burst/-content-type. */
export interface ClientSettings {
  qps: number;
  burst: number;
  contentType: string;
  observe?: (o: RequestObservation) => void;
}

/**
 * A KubernetesSource configured as kube-proxy's flags say (--kubeconfig, --master, in-cluster),
 * rate-limited by --kube-api-qps/--kube-api-burst. We speak JSON only: a protobuf
 * --kube-api-content-type (upstream's default) falls back to JSON, said once at start.
 */
export function kubernetesSourceFromFlags(
  conn: ConnectionOptions,
  opts: Omit<KubernetesSourceOptions, 'api'>,
  client?: ClientSettings,
): KubernetesSource {
  let api: KubeApi = new ClientNodeApi(loadKubeConfig(conn));
  if (client !== undefined) {
    if (client.contentType !== '' && client.contentType !== 'application/json') {
      opts.logger.info('kube-api-content-type is not supported by kube-proxy-ts; using application/json', {
        contentType: client.contentType,
      });
    }
    const clock = opts.clock ?? systemClock;
    api = limitedApi(api, {
      limiter: new TokenBucket({ qps: client.qps, burst: client.burst, clock }),
      clock,
      ...(client.observe ? { observe: client.observe } : {}),
    });
  }
  return new KubernetesSource({ ...opts, api });
}

/** The Event recorder for the same API server as the source (--kubeconfig, --master, in-cluster). */
export function eventRecorderFromFlags(
  conn: ConnectionOptions,
  deps: { logger: Logger; clock: Clock; hostname: string },
): EventRecorder {
  return new EventRecorder({ writer: new ClientNodeApi(loadKubeConfig(conn)), ...deps });
}
