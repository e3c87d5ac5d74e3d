// EndpointSlice -> the compact form the tracker keeps and compares (upstream endpointSliceInfo).
// Only what kube-proxy reads is kept, sorted, so that a re-delivered or reordered slice
// compares equal. FQDN slices and slices of the other family contribute nothing.

import { parseIP, type IPFamily } from '../base/ip.ts';
import { LABEL_SERVICE_NAME } from './k8s.ts';
import { PROTOCOLS, serviceKey, type Protocol, type ServiceKey } from './ids.ts';
import { arr, isIgnoredByLabel, isObject, isPortNumber, labelsOf, nameOf, str } from './guards.ts';
import { Issues } from './issues.ts';
import type { Limits } from './types.ts';

export interface SlicePort {
  /** '' for the unnamed port (an absent name is read as ''). */
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
}

export interface SliceEndpoint {
  /** Canonical text of addresses[0] (upstream uses only the first address). */
  readonly ip: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly nodeName: string;
  readonly zone: string;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
}

export interface SliceInfo {
  readonly ports: readonly SlicePort[];
  readonly endpoints: readonly SliceEndpoint[];
}

export interface SliceResult {
  /** The Service the slice belongs to (its namespace + kubernetes.io/service-name). */
  readonly key: ServiceKey | undefined;
  readonly name: string;
  /** undefined: the slice contributes nothing to this family (same as absent). */
  readonly info: SliceInfo | undefined;
  /** Unusable as a whole: the caller keeps the last good version of the slice. */
  readonly rejected: boolean;
  readonly issues: Issues;
}

export const TRIGGER_TIME_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';

/** Just the identity: enough to forget a deleted slice without validating its contents. */
export function sliceIdentity(input: unknown, issues: Issues): { key: ServiceKey; name: string } | undefined {
  if (!isObject(input)) {
    issues.add('not-an-object', typeof input);
    return undefined;
  }
  const { namespace, name } = nameOf(input['metadata']);
  if (!namespace || !name) {
    issues.add('missing-name', `namespace '${namespace}', name '${name}'`);
    return undefined;
  }
  const svc = str(labelsOf(input['metadata'])[LABEL_SERVICE_NAME]);
  if (!svc) {
    issues.add('missing-service-name', `no ${LABEL_SERVICE_NAME} label`);
    return undefined;
  }
  return { key: serviceKey(namespace, svc), name };
}

export function normalizeSlice(input: unknown, family: IPFamily, limits: Limits): SliceResult {
  const issues = new Issues();
  const id = sliceIdentity(input, issues);
  if (!id || !isObject(input)) return { key: undefined, name: '', info: undefined, rejected: true, issues };
  const skip = { ...id, info: undefined, rejected: false, issues };
  const rejected = { ...id, info: undefined, rejected: true, issues };
  if (isIgnoredByLabel(labelsOf(input['metadata']))) return skip;

  const addressType = input['addressType'];
  if (addressType === 'FQDN') return skip; // never proxied (upstream: unsupported address type)
  if (addressType !== 'IPv4' && addressType !== 'IPv6') {
    issues.add('unknown-address-type', `addressType '${String(addressType)}'`);
    return rejected;
  }
  if (addressType !== family) return skip; // the other family's tracker takes it

  if (input['ports'] !== undefined && !Array.isArray(input['ports'])) issues.add('invalid-port', 'ports is not a list');
  if (input['endpoints'] !== undefined && !Array.isArray(input['endpoints'])) issues.add('endpoint-without-address', 'endpoints is not a list');
  const rawPorts = arr(input['ports']);
  if (rawPorts.length > limits.maxPorts) {
    issues.add('too-many-ports', `${rawPorts.length} ports, limit ${limits.maxPorts}`);
    return rejected;
  }
  const rawEndpoints = arr(input['endpoints']);
  if (rawEndpoints.length > limits.maxEndpointsPerSlice) {
    issues.add('too-many-endpoints', `${rawEndpoints.length} endpoints, limit ${limits.maxEndpointsPerSlice}`);
    return rejected;
  }

  const ports = slicePorts(rawPorts, issues);
  const endpoints: SliceEndpoint[] = [];
  for (const [i, raw] of rawEndpoints.entries()) {
    const ep = sliceEndpoint(raw, i, family, issues);
    if (ep) endpoints.push(ep);
  }
  endpoints.sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
  return { ...id, info: { ports, endpoints }, rejected: false, issues };
}

function slicePorts(raw: readonly unknown[], issues: Issues): SlicePort[] {
  const ports: SlicePort[] = [];
  const seen = new Set<string>();
  for (const [i, p] of raw.entries()) {
    if (!isObject(p)) {
      issues.add('invalid-port', `ports[${i}] is not an object`);
      continue;
    }
    const name = str(p['name']);
    const label = `port '${name || `#${i}`}'`;
    const protocol = p['protocol'] === undefined ? 'TCP' : str(p['protocol']);
    if (!PROTOCOLS.has(protocol)) {
      issues.add('unknown-protocol', `${label}: protocol '${String(p['protocol'])}'`);
      continue;
    }
    if (!isPortNumber(p['port'])) {
      issues.add('invalid-port', `${label}: port ${String(p['port'])}`);
      continue;
    }
    const id = `${name}/${protocol}`;
    if (seen.has(id)) {
      issues.add('duplicate-port', `${label}/${protocol} appears twice`);
      continue;
    }
    seen.add(id);
    ports.push({ name, protocol: protocol as Protocol, port: p['port'] });
  }
  ports.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : 0));
  return ports;
}

function sliceEndpoint(raw: unknown, i: number, family: IPFamily, issues: Issues): SliceEndpoint | undefined {
  if (!isObject(raw)) {
    issues.add('endpoint-without-address', `endpoints[${i}] is not an object`);
    return undefined;
  }
  const first = arr(raw['addresses'])[0];
  if (first === undefined) {
    issues.add('endpoint-without-address', `endpoints[${i}]`);
    return undefined;
  }
  const ip = parseIP(str(first));
  if (!ip) {
    issues.add('invalid-endpoint-ip', `address '${String(first)}'`);
    return undefined;
  }
  if (ip.family !== family) {
    issues.add('endpoint-family-mismatch', `address ${ip.text} in an ${family} slice`);
    return undefined;
  }
  const c = isObject(raw['conditions']) ? raw['conditions'] : {};
  // API semantics: unset ready/serving mean true, unset terminating means false.
  const ready = c['ready'] !== false;
  const serving = c['serving'] === undefined ? ready : c['serving'] !== false;
  const terminating = c['terminating'] === true;
  const hints = isObject(raw['hints']) ? raw['hints'] : {};
  return {
    ip: ip.text,
    ready,
    serving,
    terminating,
    nodeName: str(raw['nodeName']),
    zone: str(raw['zone']),
    zoneHints: hintNames(hints['forZones']),
    nodeHints: hintNames(hints['forNodes']),
  };
}

function hintNames(raw: unknown): string[] {
  const names = new Set<string>();
  for (const h of arr(raw)) if (isObject(h) && str(h['name'])) names.add(str(h['name']));
  return [...names].sort();
}

/** The trigger-time annotation in ms since the epoch, or undefined when absent or unparsable. */
export function triggerTimeOf(input: unknown): number | undefined {
  if (!isObject(input) || !isObject(input['metadata'])) return undefined;
  const ann = input['metadata']['annotations'];
  if (!isObject(ann)) return undefined;
  const v = ann[TRIGGER_TIME_ANNOTATION];
  if (typeof v !== 'string' || v === '') return undefined;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : undefined;
}
