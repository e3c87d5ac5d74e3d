// EndpointSlice -> the compact form the tracker keeps and compares (upstream endpointSliceInfo).
// Only what kube-proxy reads is kept, sorted, so that a re-delivered or reordered slice
// compares equal. FQDN slices and slices of the other family contribute nothing.

import { parseIPText, type IPFamily } from '../base/ip.ts';
import { LABEL_SERVICE_NAME } from './k8s.ts';
import { endpointKey, PROTOCOLS, serviceKey, type Protocol, type ServiceKey } from './ids.ts';
import { arr, isIgnoredByLabel, isObject, isPortNumber, labelsOf, namedObject, str } from './guards.ts';
import { Issues } from './issues.ts';
import type { EndpointInfo, Limits } from './types.ts';
import { badPortName, isDNS1035Label, isDNS1123Label, isDNS1123Subdomain, specialEndpointIP } from './validate.ts';

export interface SlicePort {
  /** '' for the unnamed port (an absent name is read as ''). */
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
}

/**
 * One endpoint of a slice, already in the form the model publishes for the slice's first
 * port (key, port and isLocal for that port; port 0 when the slice has none). A Service's
 * endpoints usually come from one slice with one port, and then these very objects are
 * published: a large cluster keeps one object per endpoint, not two.
 */
export type SliceEndpoint = EndpointInfo;

export interface SliceInfo {
  readonly ports: readonly SlicePort[];
  /** Sorted by address. */
  readonly endpoints: readonly SliceEndpoint[];
}

/**
 * An endpoint as published for one port (`thisNode` tells local endpoints apart). The one
 * place these objects are made, so that they all share one shape.
 */
export function endpointInfo(
  ip: string,
  port: number,
  ready: boolean,
  serving: boolean,
  terminating: boolean,
  nodeName: string,
  zone: string,
  zoneHints: readonly string[],
  nodeHints: readonly string[],
  thisNode: string,
): EndpointInfo {
  return {
    key: endpointKey(ip, port),
    ip,
    port,
    ready,
    serving,
    terminating,
    nodeName,
    zone,
    isLocal: thisNode !== '' && nodeName === thisNode,
    zoneHints,
    nodeHints,
  };
}

/** The same endpoint for another port of its slice. */
export const forPort = (ep: EndpointInfo, port: number, thisNode: string): EndpointInfo =>
  endpointInfo(
    ep.ip,
    port,
    ep.ready,
    ep.serving,
    ep.terminating,
    ep.nodeName,
    ep.zone,
    ep.zoneHints,
    ep.nodeHints,
    thisNode,
  );

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
  const named = namedObject(input, issues);
  if (!named) return undefined;
  const { obj, namespace, name } = named;
  const svc = str(labelsOf(obj['metadata'])[LABEL_SERVICE_NAME]);
  if (!svc) {
    issues.add('missing-service-name', `no ${LABEL_SERVICE_NAME} label`);
    return undefined;
  }
  if (!isDNS1123Label(namespace) || !isDNS1123Subdomain(name) || !isDNS1035Label(svc)) {
    const what = `namespace ${JSON.stringify(namespace)}, name ${JSON.stringify(name)}, service ${JSON.stringify(svc)}`;
    issues.add('invalid-name', `${what} (not valid Kubernetes names)`);
    return undefined;
  }
  return { key: serviceKey(namespace, svc), name };
}

/** `nodeName`: this node's name, which tells local endpoints apart ('' when unknown). */
export function normalizeSlice(input: unknown, family: IPFamily, limits: Limits, nodeName = ''): SliceResult {
  const issues = new Issues();
  const id = sliceIdentity(input, issues);
  if (!id || !isObject(input)) return { key: undefined, name: '', info: undefined, rejected: true, issues };
  // Built when returned: most slices are neither skipped nor rejected.
  const skip = (): SliceResult => ({ key: id.key, name: id.name, info: undefined, rejected: false, issues });
  const rejected = (): SliceResult => ({ key: id.key, name: id.name, info: undefined, rejected: true, issues });
  if (isIgnoredByLabel(labelsOf(input['metadata']))) return skip();

  const addressType = input['addressType'];
  if (addressType === 'FQDN') return skip(); // never proxied (upstream: unsupported address type)
  if (addressType !== 'IPv4' && addressType !== 'IPv6') {
    issues.add('unknown-address-type', `addressType '${String(addressType)}'`);
    return rejected();
  }
  if (addressType !== family) return skip(); // the other family's tracker takes it

  if (input['ports'] !== undefined && !Array.isArray(input['ports'])) issues.add('invalid-port', 'ports is not a list');
  if (input['endpoints'] !== undefined && !Array.isArray(input['endpoints']))
    issues.add('endpoint-without-address', 'endpoints is not a list');
  const rawPorts = arr(input['ports']);
  if (rawPorts.length > limits.maxPorts) {
    issues.add('too-many-ports', `${rawPorts.length} ports, limit ${limits.maxPorts}`);
    return rejected();
  }
  const rawEndpoints = arr(input['endpoints']);
  if (rawEndpoints.length > limits.maxEndpointsPerSlice) {
    issues.add('too-many-endpoints', `${rawEndpoints.length} endpoints, limit ${limits.maxEndpointsPerSlice}`);
    return rejected();
  }

  const ports = slicePorts(rawPorts, issues);
  const endpoints: SliceEndpoint[] = [];
  // Indexed loops here and below: an iterator per endpoint shows in a large cluster's profile.
  const firstPort = ports[0]?.port ?? 0;
  for (let i = 0; i < rawEndpoints.length; i++) {
    const ep = sliceEndpoint(rawEndpoints[i], i, family, firstPort, nodeName, issues);
    if (ep) endpoints.push(ep);
  }
  if (!isSortedByIP(endpoints)) endpoints.sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0));
  return { key: id.key, name: id.name, info: { ports, endpoints }, rejected: false, issues };
}

/** Slices usually list their endpoints in order already: checking is cheaper than sorting. */
function isSortedByIP(eps: readonly SliceEndpoint[]): boolean {
  for (let i = 1; i < eps.length; i++) if (eps[i - 1]!.ip > eps[i]!.ip) return false;
  return true;
}

function slicePorts(raw: readonly unknown[], issues: Issues): SlicePort[] {
  const ports: SlicePort[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i++) {
    const p = raw[i];
    if (!isObject(p)) {
      issues.add('invalid-port', `ports[${i}] is not an object`);
      continue;
    }
    const badName = badPortName(p['name']);
    if (badName !== undefined) {
      issues.add('invalid-port', `ports[${i}]: ${badName}`);
      continue;
    }
    const name = str(p['name']);
    const label = `port '${name || `#${i}`}'`;
    const protocol = str(p['protocol'] ?? 'TCP');
    if (!PROTOCOLS.has(protocol)) {
      issues.add('unknown-protocol', `${label}: protocol '${String(p['protocol'])}'`);
      continue;
    }
    if (!isPortNumber(p['port'])) {
      issues.add('invalid-port', `${label}: port ${String(p['port'])}`);
      continue;
    }
    // The API server refuses two ports of one name, whatever their protocols.
    if (seen.has(name)) {
      issues.add('duplicate-port', `ports[${i}]: name ${JSON.stringify(name)} appears twice`);
      continue;
    }
    seen.add(name);
    ports.push({ name, protocol: protocol as Protocol, port: p['port'] });
  }
  ports.sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : 0,
  );
  return ports;
}

function sliceEndpoint(
  raw: unknown,
  i: number,
  family: IPFamily,
  port: number,
  nodeName: string,
  issues: Issues,
): SliceEndpoint | undefined {
  if (!isObject(raw)) {
    issues.add('endpoint-without-address', `endpoints[${i}] is not an object`);
    return undefined;
  }
  const first = arr(raw['addresses'])[0];
  if (first === undefined) {
    issues.add('endpoint-without-address', `endpoints[${i}]`);
    return undefined;
  }
  const ip = parseIPText(str(first));
  if (!ip) {
    issues.add('invalid-endpoint-ip', `address '${String(first)}'`);
    return undefined;
  }
  if (ip.family !== family) {
    issues.add('endpoint-family-mismatch', `address ${ip.text} in an ${family} slice`);
    return undefined;
  }
  const special = specialEndpointIP(ip.text, family);
  if (special !== undefined) {
    issues.add(
      'invalid-endpoint-ip',
      `address ${ip.text} is ${special} (the API server refuses it; not a DNAT target)`,
    );
    return undefined;
  }
  const c = isObject(raw['conditions']) ? raw['conditions'] : NOTHING;
  // API semantics, as upstream's EndpointSliceCache reads them: unset ready and unset serving
  // each mean true (serving does not follow ready), unset terminating means false. So
  // {ready: false, terminating: true} is a serving-terminating endpoint, usable as a fallback.
  const ready = c['ready'] !== false;
  const serving = c['serving'] !== false;
  const terminating = c['terminating'] === true;
  const hints = isObject(raw['hints']) ? raw['hints'] : NOTHING;
  return endpointInfo(
    ip.text,
    port,
    ready,
    serving,
    terminating,
    str(raw['nodeName']),
    str(raw['zone']),
    hintNames(hints['forZones']),
    hintNames(hints['forNodes']),
    nodeName,
  );
}

/** An absent conditions or hints object, shared rather than allocated per endpoint. */
const NOTHING: Readonly<Record<string, unknown>> = Object.freeze({});

/** Shared by every endpoint without hints (most of them): nothing is allocated for them. */
const NO_HINTS: readonly string[] = Object.freeze([]);

function hintNames(raw: unknown): readonly string[] {
  const list = arr(raw);
  if (list.length === 0) return NO_HINTS;
  const names = new Set<string>();
  for (const h of list) if (isObject(h) && str(h['name'])) names.add(str(h['name']));
  return names.size === 0 ? NO_HINTS : [...names].sort();
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
