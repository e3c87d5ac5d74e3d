// Builders for model tests: small, readable Kubernetes objects with the defaults the API
// server would fill in, so each table row states only what it is about.

import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger, type LogRecord } from '../../../src/base/logger.ts';
import type { Endpoint, EndpointPort, EndpointSlice, Node, Service, ServicePort } from '../../../src/model/k8s.ts';
import { ChangeTracker } from '../../../src/model/tracker.ts';
import type { EndpointInfo, ModelOptions } from '../../../src/model/types.ts';

export const NODE = 'node-a';

export interface SvcOpts {
  ns?: string;
  type?: string;
  clusterIP?: string;
  clusterIPs?: string[];
  ports?: ServicePort[];
  eTP?: string;
  iTP?: string;
  externalIPs?: string[];
  ingress?: { ip?: string; hostname?: string; ipMode?: string }[];
  sourceRanges?: string[];
  hcPort?: number;
  affinity?: string;
  timeout?: number;
  labels?: Record<string, string>;
  rv?: string;
}

export function svc(name: string, o: SvcOpts = {}): Service {
  const spec: NonNullable<Service['spec']> = {
    type: o.type ?? 'ClusterIP',
    ports: o.ports ?? [{ name: 'p', protocol: 'TCP', port: 80 }],
  };
  if (o.clusterIPs) spec.clusterIPs = o.clusterIPs;
  else spec.clusterIP = o.clusterIP ?? '10.96.0.10';
  if (o.eTP) spec.externalTrafficPolicy = o.eTP;
  if (o.iTP) spec.internalTrafficPolicy = o.iTP;
  if (o.externalIPs) spec.externalIPs = o.externalIPs;
  if (o.sourceRanges) spec.loadBalancerSourceRanges = o.sourceRanges;
  if (o.hcPort !== undefined) spec.healthCheckNodePort = o.hcPort;
  if (o.affinity) spec.sessionAffinity = o.affinity;
  if (o.timeout !== undefined) spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: o.timeout } };
  const s: Service = {
    metadata: { namespace: o.ns ?? 'default', name, labels: o.labels ?? {}, resourceVersion: o.rv ?? '1' },
    spec,
  };
  if (o.ingress) s.status = { loadBalancer: { ingress: o.ingress } };
  return s;
}

export interface EpOpts {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  node?: string;
  zone?: string;
  zones?: string[];
  nodes?: string[];
}

export function ep(ip: string, o: EpOpts = {}): Endpoint {
  const e: Endpoint = { addresses: [ip], conditions: {} };
  if (o.ready !== undefined) e.conditions!.ready = o.ready;
  if (o.serving !== undefined) e.conditions!.serving = o.serving;
  if (o.terminating !== undefined) e.conditions!.terminating = o.terminating;
  if (o.node !== undefined) e.nodeName = o.node;
  if (o.zone !== undefined) e.zone = o.zone;
  if (o.zones || o.nodes) {
    e.hints = {};
    if (o.zones) e.hints.forZones = o.zones.map((name) => ({ name }));
    if (o.nodes) e.hints.forNodes = o.nodes.map((name) => ({ name }));
  }
  return e;
}

export interface SliceOpts {
  ns?: string;
  addressType?: string;
  ports?: EndpointPort[];
  labels?: Record<string, string>;
  trigger?: string;
  rv?: string;
}

export function slice(name: string, service: string, endpoints: Endpoint[], o: SliceOpts = {}): EndpointSlice {
  const s: EndpointSlice = {
    metadata: {
      namespace: o.ns ?? 'default',
      name,
      labels: { 'kubernetes.io/service-name': service, ...o.labels },
      resourceVersion: o.rv ?? '1',
    },
    addressType: o.addressType ?? 'IPv4',
    endpoints,
    ports: o.ports ?? [{ name: 'p', protocol: 'TCP', port: 8080 }],
  };
  if (o.trigger) s.metadata!.annotations = { 'endpoints.kubernetes.io/last-change-trigger-time': o.trigger };
  return s;
}

export function node(
  name: string,
  o: { zone?: string; internal?: string[]; external?: string[]; podCIDRs?: string[] } = {},
): Node {
  const addresses = [
    ...(o.internal ?? []).map((address) => ({ type: 'InternalIP', address })),
    ...(o.external ?? []).map((address) => ({ type: 'ExternalIP', address })),
  ];
  const n: Node = {
    metadata: { name, labels: o.zone ? { 'topology.kubernetes.io/zone': o.zone } : {} },
    status: { addresses },
  };
  if (o.podCIDRs) n.spec = { podCIDRs: o.podCIDRs };
  return n;
}

export function newTracker(o: Partial<ModelOptions> = {}) {
  const records: LogRecord[] = [];
  const logger = memoryLogger(records);
  const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  const rejected: string[] = [];
  const t = new ChangeTracker(
    { nodeName: NODE, family: 'IPv4', ...o },
    { logger, clock, onReject: (kind, reason) => rejected.push(`${kind}/${reason}`) },
  );
  const warnings = () => records.filter((r) => r.level === 'warn' || r.level === 'error');
  return { t, records, warnings, clock, rejected };
}

/** "ip:port" of each endpoint, for compact assertions. */
export const keys = (eps: readonly EndpointInfo[] | undefined): string[] => (eps ?? []).map((e) => e.key);
