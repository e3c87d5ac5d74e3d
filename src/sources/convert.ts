// Structural conversion of whatever a source read (JSON from the API server, a parsed YAML
// manifest, or an instance of one of @kubernetes/client-node's model classes) into the plain
// input types of model/k8s.ts.
//
// Only structure is checked here: an object, of the expected kind, with metadata.name (and
// metadata.namespace for namespaced kinds), and containers (spec, status, endpoints, ports,
// labels) of the right JSON type. Whether an IP parses or a port is in range is the model's
// job. Only the parts the model reads are kept (the shapes below, which follow model/k8s.ts;
// compact.ts copies them): a Service's managedFields, an endpoint's targetRef or a Node's image
// list would otherwise stay in memory for nothing, thousands of times over.

import type { EndpointSlice, Node, ObjectMeta, Service, ServiceCIDR } from '../model/k8s.ts';
import {
  LABEL_HEADLESS,
  LABEL_HOSTNAME,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
  LABEL_TOPOLOGY_ZONE,
} from '../model/k8s.ts';
import { TRIGGER_TIME_ANNOTATION } from '../model/slice.ts';
import { LOAD_BALANCING_ANNOTATION } from '../model/load-balancing.ts';
import type { Shape } from './compact.ts';
import { compact, intern, isRecord, toPlain } from './compact.ts';
import type { SourceKind } from './types.ts';
import { objectKey } from './types.ts';

/**
 * kube-proxy's informer label selector (cmd/kube-proxy/app/server.go): objects labelled for
 * another proxy, and the EndpointSlices of headless Services, are not ours. Upstream applies
 * the same selector to every informer of its factory: Services, EndpointSlices, ServiceCIDRs.
 */
export const PROXY_LABEL_SELECTOR = `!${LABEL_SERVICE_PROXY_NAME},!${LABEL_HEADLESS}`;

/** The same selector, evaluated locally (manifests, and as a guard on what a server sends). */
export function selectedByProxy(labels: Record<string, string> | undefined): boolean {
  if (labels === undefined) return true;
  return !Object.hasOwn(labels, LABEL_SERVICE_PROXY_NAME) && !Object.hasOwn(labels, LABEL_HEADLESS);
}

export type Converted<T> = { ok: true; key: string; obj: T } | { ok: false; key: string | undefined; reason: string };

export { rfc3339, toPlain } from './compact.ts';

class StructureError extends Error {}

/** The labels and annotations the model and the selectors read; the rest is dropped. */
const KEPT_LABELS = [LABEL_SERVICE_PROXY_NAME, LABEL_HEADLESS, LABEL_SERVICE_NAME, LABEL_TOPOLOGY_ZONE, LABEL_HOSTNAME];
const KEPT_ANNOTATIONS = [TRIGGER_TIME_ANNOTATION, LOAD_BALANCING_ANNOTATION];

/** Checks that every value is a string (as the API guarantees); returns the kept ones. */
function stringMap(v: unknown, field: string, keep: readonly string[]): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new StructureError(`${field} is not a map`);
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') throw new StructureError(`${field}.${k} is not a string`);
  }
  let out: Record<string, string> | undefined;
  for (const k of keep) if (Object.hasOwn(v, k)) (out ??= {})[k] = intern(v[k] as string);
  return out;
}

function optionalRecord(v: unknown, field: string, shape: Shape = 'keep'): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new StructureError(`${field} is not an object`);
  return compact(v, shape) as Record<string, unknown>;
}

function optionalArray(v: unknown, field: string, shape: Shape = 'keep'): unknown[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new StructureError(`${field} is not a list`);
  return compact(v, [shape]) as unknown[];
}

// The shapes of model/k8s.ts: what is kept of each object.
const SERVICE_SPEC: Shape = {
  type: 'shared',
  clusterIP: 'keep',
  clusterIPs: ['keep'],
  ipFamilies: ['shared'],
  ipFamilyPolicy: 'shared',
  ports: [
    { name: 'shared', protocol: 'shared', port: 'keep', targetPort: 'shared', nodePort: 'keep', appProtocol: 'shared' },
  ],
  externalIPs: ['keep'],
  loadBalancerIP: 'keep',
  loadBalancerSourceRanges: ['keep'],
  externalTrafficPolicy: 'shared',
  internalTrafficPolicy: 'shared',
  healthCheckNodePort: 'keep',
  sessionAffinity: 'shared',
  sessionAffinityConfig: { clientIP: { timeoutSeconds: 'keep' } },
  trafficDistribution: 'shared',
  externalName: 'keep',
};
const LOAD_BALANCER: Shape = { ingress: [{ ip: 'keep', hostname: 'keep', ipMode: 'shared' }] };
const ENDPOINT: Shape = {
  addresses: ['keep'],
  conditions: 'conditions',
  hostname: 'keep',
  nodeName: 'shared',
  zone: 'shared',
  hints: { forZones: [{ name: 'shared' }], forNodes: [{ name: 'shared' }] },
};
const ENDPOINT_PORT: Shape = { name: 'shared', protocol: 'shared', port: 'keep', appProtocol: 'shared' };
const NODE_SPEC: Shape = { podCIDR: 'keep', podCIDRs: ['keep'], unschedulable: 'keep', taints: 'keep' };
const NODE_ADDRESS: Shape = { type: 'shared', address: 'keep' };

function pickMeta(raw: unknown, namespaced: boolean): ObjectMeta {
  if (!isRecord(raw)) throw new StructureError('metadata is missing');
  const meta: ObjectMeta = {};
  if (typeof raw['name'] !== 'string' || raw['name'] === '') throw new StructureError('metadata.name is missing');
  meta.name = raw['name'];
  const ns = raw['namespace'];
  if (namespaced) {
    if (typeof ns !== 'string' || ns === '') throw new StructureError('metadata.namespace is missing');
    meta.namespace = intern(ns);
  }
  if (typeof raw['uid'] === 'string') meta.uid = raw['uid'];
  if (typeof raw['resourceVersion'] === 'string') meta.resourceVersion = raw['resourceVersion'];
  if (typeof raw['generation'] === 'number') meta.generation = raw['generation'];
  const labels = stringMap(raw['labels'], 'metadata.labels', KEPT_LABELS);
  if (labels) meta.labels = labels;
  const annotations = stringMap(raw['annotations'], 'metadata.annotations', KEPT_ANNOTATIONS);
  if (annotations) meta.annotations = annotations;
  const dt = toPlain(raw['deletionTimestamp']);
  if (typeof dt === 'string') meta.deletionTimestamp = dt;
  return meta;
}

function header(
  raw: unknown,
  kind: SourceKind,
  namespaced: boolean,
): { src: Record<string, unknown>; meta: ObjectMeta } {
  if (!isRecord(raw)) throw new StructureError('not an object');
  if (raw['kind'] !== undefined && raw['kind'] !== kind)
    throw new StructureError(`kind is ${String(raw['kind'])}, expected ${kind}`);
  return { src: raw, meta: pickMeta(raw['metadata'], namespaced) };
}

function guarded<T>(raw: unknown, build: () => T & { metadata?: ObjectMeta }): Converted<T> {
  try {
    const obj = build();
    return { ok: true, key: objectKey(obj.metadata), obj };
  } catch (err) {
    if (!(err instanceof StructureError)) throw err;
    const meta = isRecord(raw) && isRecord(raw['metadata']) ? raw['metadata'] : undefined;
    const key =
      meta && typeof meta['name'] === 'string'
        ? objectKey({
            name: meta['name'],
            ...(typeof meta['namespace'] === 'string' ? { namespace: meta['namespace'] } : {}),
          })
        : undefined;
    return { ok: false, key, reason: err.message };
  }
}

export function convertService(raw: unknown): Converted<Service> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'Service', true);
    const out: Service = { kind: 'Service', apiVersion: 'v1', metadata: meta };
    const rawSpec = src['spec'];
    if (isRecord(rawSpec) && rawSpec['ports'] !== undefined && !Array.isArray(rawSpec['ports']))
      throw new StructureError('spec.ports is not a list');
    const spec = optionalRecord(rawSpec, 'spec', SERVICE_SPEC);
    if (spec) out.spec = spec as NonNullable<Service['spec']>;
    const status = optionalRecord(src['status'], 'status', { loadBalancer: 'keep' });
    const lb = status ? optionalRecord(status['loadBalancer'], 'status.loadBalancer', LOAD_BALANCER) : undefined;
    if (lb) out.status = { loadBalancer: lb as NonNullable<NonNullable<Service['status']>['loadBalancer']> };
    return out;
  });
}

export function convertEndpointSlice(raw: unknown): Converted<EndpointSlice> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'EndpointSlice', true);
    const out: EndpointSlice = { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: meta };
    if (typeof src['addressType'] === 'string') out.addressType = intern(src['addressType']);
    else if (src['addressType'] !== undefined) throw new StructureError('addressType is not a string');
    const endpoints = optionalArray(src['endpoints'], 'endpoints', ENDPOINT);
    if (endpoints) out.endpoints = endpoints as NonNullable<EndpointSlice['endpoints']>;
    const ports = optionalArray(src['ports'], 'ports', ENDPOINT_PORT);
    if (ports) out.ports = ports as NonNullable<EndpointSlice['ports']>;
    return out;
  });
}

export function convertNode(raw: unknown): Converted<Node> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'Node', false);
    const out: Node = { kind: 'Node', apiVersion: 'v1', metadata: meta };
    const spec = optionalRecord(src['spec'], 'spec', NODE_SPEC);
    if (spec) out.spec = spec as NonNullable<Node['spec']>;
    const status = optionalRecord(src['status'], 'status', { addresses: 'keep' });
    if (status) {
      const addresses = optionalArray(status['addresses'], 'status.addresses', NODE_ADDRESS);
      out.status = addresses ? { addresses: addresses as NonNullable<NonNullable<Node['status']>['addresses']> } : {};
    }
    return out;
  });
}

export function convertServiceCIDR(raw: unknown): Converted<ServiceCIDR> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'ServiceCIDR', false);
    const out: ServiceCIDR = { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', metadata: meta };
    const spec = optionalRecord(src['spec'], 'spec');
    if (spec) {
      const cidrs = optionalArray(spec['cidrs'], 'spec.cidrs');
      out.spec = cidrs ? { cidrs: cidrs as string[] } : {};
    }
    return out;
  });
}

export type KindObject = { Service: Service; EndpointSlice: EndpointSlice; Node: Node; ServiceCIDR: ServiceCIDR };

export const CONVERTERS: { [K in SourceKind]: (raw: unknown) => Converted<KindObject[K]> } = {
  Service: convertService,
  EndpointSlice: convertEndpointSlice,
  Node: convertNode,
  ServiceCIDR: convertServiceCIDR,
};

export const NAMESPACED: Readonly<Record<SourceKind, boolean>> = {
  Service: true,
  EndpointSlice: true,
  Node: false,
  ServiceCIDR: false,
};
