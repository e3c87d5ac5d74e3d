// Structural conversion of whatever a source read (JSON from the API server, a parsed YAML
// manifest, or an instance of one of @kubernetes/client-node's model classes) into the plain
// input types of model/k8s.ts.
//
// Only structure is checked here: an object, of the expected kind, with metadata.name (and
// metadata.namespace for namespaced kinds), and containers (spec, status, endpoints, ports,
// labels) of the right JSON type. Whether an IP parses or a port is in range is the model's
// job. Only the parts the model reads are kept: a Service's managedFields or a Node's image
// list would otherwise double the memory of a large cluster for nothing.

import type { EndpointSlice, Node, ObjectMeta, Service, ServiceCIDR } from '../model/k8s.ts';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from '../model/k8s.ts';
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

const MAX_DEPTH = 32;

/** RFC 3339 at second precision, as metav1.Time marshals (2006-01-02T15:04:05Z). */
export function rfc3339(d: Date): string | undefined {
  if (Number.isNaN(d.getTime())) return undefined;
  const iso = d.toISOString();
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}

/**
 * A JSON-shaped deep copy: Dates become RFC 3339 strings; undefined, functions and symbols
 * are dropped (exactOptionalPropertyTypes: absent, never present-and-undefined); class
 * instances become plain objects. Depth is bounded against hostile input.
 */
export function toPlain(v: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return undefined;
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Date) return rfc3339(v);
  if (Array.isArray(v)) {
    const out: unknown[] = [];
    for (const item of v) {
      const p = toPlain(item, depth + 1);
      if (p !== undefined) out.push(p);
    }
    return out;
  }
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(v)) {
      const p = toPlain(val, depth + 1);
      if (p !== undefined) out[k] = p;
    }
    return out;
  }
  return undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

class StructureError extends Error {}

function stringMap(v: unknown, field: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new StructureError(`${field} is not a map`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') throw new StructureError(`${field}.${k} is not a string`);
    out[k] = val;
  }
  return out;
}

function optionalRecord(v: unknown, field: string): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new StructureError(`${field} is not an object`);
  return toPlain(v) as Record<string, unknown>;
}

function optionalArray(v: unknown, field: string): unknown[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new StructureError(`${field} is not a list`);
  return toPlain(v) as unknown[];
}

function pickMeta(raw: unknown, namespaced: boolean): ObjectMeta {
  if (!isRecord(raw)) throw new StructureError('metadata is missing');
  const meta: ObjectMeta = {};
  if (typeof raw['name'] !== 'string' || raw['name'] === '') throw new StructureError('metadata.name is missing');
  meta.name = raw['name'];
  const ns = raw['namespace'];
  if (namespaced) {
    if (typeof ns !== 'string' || ns === '') throw new StructureError('metadata.namespace is missing');
    meta.namespace = ns;
  }
  if (typeof raw['uid'] === 'string') meta.uid = raw['uid'];
  if (typeof raw['resourceVersion'] === 'string') meta.resourceVersion = raw['resourceVersion'];
  if (typeof raw['generation'] === 'number') meta.generation = raw['generation'];
  const labels = stringMap(raw['labels'], 'metadata.labels');
  if (labels) meta.labels = labels;
  const annotations = stringMap(raw['annotations'], 'metadata.annotations');
  if (annotations) meta.annotations = annotations;
  const dt = toPlain(raw['deletionTimestamp']);
  if (typeof dt === 'string') meta.deletionTimestamp = dt;
  return meta;
}

function header(raw: unknown, kind: SourceKind, namespaced: boolean): { src: Record<string, unknown>; meta: ObjectMeta } {
  if (!isRecord(raw)) throw new StructureError('not an object');
  if (raw['kind'] !== undefined && raw['kind'] !== kind) throw new StructureError(`kind is ${String(raw['kind'])}, expected ${kind}`);
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
        ? objectKey({ name: meta['name'], ...(typeof meta['namespace'] === 'string' ? { namespace: meta['namespace'] } : {}) })
        : undefined;
    return { ok: false, key, reason: err.message };
  }
}

export function convertService(raw: unknown): Converted<Service> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'Service', true);
    const out: Service = { kind: 'Service', apiVersion: 'v1', metadata: meta };
    const spec = optionalRecord(src['spec'], 'spec');
    if (spec) {
      if (spec['ports'] !== undefined && !Array.isArray(spec['ports'])) throw new StructureError('spec.ports is not a list');
      out.spec = spec as NonNullable<Service['spec']>;
    }
    const status = optionalRecord(src['status'], 'status');
    const lb = status ? optionalRecord(status['loadBalancer'], 'status.loadBalancer') : undefined;
    if (lb) out.status = { loadBalancer: lb as NonNullable<NonNullable<Service['status']>['loadBalancer']> };
    return out;
  });
}

export function convertEndpointSlice(raw: unknown): Converted<EndpointSlice> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'EndpointSlice', true);
    const out: EndpointSlice = { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: meta };
    if (typeof src['addressType'] === 'string') out.addressType = src['addressType'];
    else if (src['addressType'] !== undefined) throw new StructureError('addressType is not a string');
    const endpoints = optionalArray(src['endpoints'], 'endpoints');
    if (endpoints) out.endpoints = endpoints as NonNullable<EndpointSlice['endpoints']>;
    const ports = optionalArray(src['ports'], 'ports');
    if (ports) out.ports = ports as NonNullable<EndpointSlice['ports']>;
    return out;
  });
}

export function convertNode(raw: unknown): Converted<Node> {
  return guarded(raw, () => {
    const { src, meta } = header(raw, 'Node', false);
    const out: Node = { kind: 'Node', apiVersion: 'v1', metadata: meta };
    const spec = optionalRecord(src['spec'], 'spec');
    if (spec) {
      const keep: NonNullable<Node['spec']> = {};
      if (spec['podCIDR'] !== undefined) keep.podCIDR = spec['podCIDR'] as string;
      if (spec['podCIDRs'] !== undefined) keep.podCIDRs = spec['podCIDRs'] as string[];
      if (spec['unschedulable'] !== undefined) keep.unschedulable = spec['unschedulable'] as boolean;
      if (spec['taints'] !== undefined) keep.taints = spec['taints'] as NonNullable<NonNullable<Node['spec']>['taints']>;
      out.spec = keep;
    }
    const status = optionalRecord(src['status'], 'status');
    if (status) {
      const addresses = optionalArray(status['addresses'], 'status.addresses');
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
