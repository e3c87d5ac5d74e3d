// Service -> service ports of one IP family (upstream serviceToServiceMap + newBaseServiceInfo).
// Skipped without complaint, as kube-proxy does: ExternalName and headless Services, Services
// another proxy owns, Services with no cluster IP of this family. Invalid parts (a port, an
// external IP) are dropped with an issue; a Service unusable as a whole (invalid cluster IP,
// unknown type, absurd size) is rejected, and the tracker keeps its last good version.

import { parseCIDR, parseIPText, type IPFamily } from '../base/ip.ts';
import { PROTOCOLS, serviceKey, servicePortId, type Protocol, type ServiceKey } from './ids.ts';
import { arr, isIgnoredByLabel, isObject, isPortNumber, labelsOf, namedObject, str } from './guards.ts';
import { Issues } from './issues.ts';
import { loadBalancingAnnotation } from './load-balancing.ts';
import type { Limits, ServicePortInfo, ServiceType } from './types.ts';
import { badPortName, isDNS1035Label, isDNS1123Label, specialEndpointIP } from './validate.ts';

/** Upstream's default ClientIP affinity timeout (3 hours) and the API's maximum (1 day). */
export const DEFAULT_AFFINITY_TIMEOUT_SECONDS = 10800;
const MAX_AFFINITY_TIMEOUT_SECONDS = 86400;

export interface ServiceResult {
  /** undefined when the object has no namespace/name (it cannot be tracked at all). */
  readonly key: ServiceKey | undefined;
  /** Sorted by id; empty when the Service yields nothing for this family. */
  readonly ports: readonly ServicePortInfo[];
  /**
   * The object as a whole is unusable (not merely some part): the caller keeps the last good
   * version rather than withdrawing a working Service because of one bad update.
   */
  readonly rejected: boolean;
  readonly issues: Issues;
}

const TYPES: ReadonlySet<string> = new Set(['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName']);

export function normalizeService(input: unknown, family: IPFamily, limits: Limits): ServiceResult {
  const issues = new Issues();
  const named = serviceName(input, issues);
  if (named === undefined) return { key: undefined, ports: [], rejected: true, issues };
  const { key, namespace, name, obj } = named;
  // Built when returned: most Services are neither skipped nor rejected.
  const none = (): ServiceResult => ({ key, ports: [], rejected: false, issues });
  const rejected = (): ServiceResult => ({ key, ports: [], rejected: true, issues });
  if (isIgnoredByLabel(labelsOf(obj['metadata']))) return none();

  if (obj['spec'] !== undefined && !isObject(obj['spec'])) {
    issues.add('not-an-object', 'spec');
    return rejected();
  }
  const spec = isObject(obj['spec']) ? obj['spec'] : {};
  const rawType = spec['type'] === undefined ? 'ClusterIP' : str(spec['type']);
  if (!TYPES.has(rawType)) {
    issues.add('unknown-type', `type '${String(spec['type'])}'`);
    return rejected();
  }
  if (rawType === 'ExternalName') return none();
  const type = rawType as ServiceType;

  const clusterIP = clusterIPFor(spec, family, issues);
  if (clusterIP.kind === 'invalid') return rejected();
  if (clusterIP.kind === 'skip') return none();

  if (spec['ports'] !== undefined && !Array.isArray(spec['ports']))
    issues.add('invalid-port', 'spec.ports is not a list');
  const rawPorts = arr(spec['ports']);
  if (rawPorts.length > limits.maxPorts) {
    issues.add('too-many-ports', `${rawPorts.length} ports, limit ${limits.maxPorts}`);
    return rejected();
  }

  const shared = sharedFields(obj, spec, { key, namespace, name, family, type, clusterIP: clusterIP.ip }, issues);
  const ports: ServicePortInfo[] = [];
  const seen = { count: rawPorts.length, names: new Set<string>(), numbers: new Set<string>() };
  for (let i = 0; i < rawPorts.length; i++) {
    const port = normalizePort(rawPorts[i], i, type, seen, issues);
    if (port) ports.push(portInfo(shared, port));
  }
  ports.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { key, ports, rejected: false, issues };
}

/** The Service's key, or undefined (with an issue) when it has no usable namespace/name. */
interface Named {
  readonly key: ServiceKey;
  readonly namespace: string;
  readonly name: string;
  readonly obj: Record<string, unknown>;
}

function serviceName(input: unknown, issues: Issues): Named | undefined {
  const named = namedObject(input, issues);
  if (!named) return undefined;
  const { obj, namespace, name } = named;
  // Names become kernel object names and log text: only what the API server would accept.
  if (!isDNS1123Label(namespace) || !isDNS1035Label(name)) {
    issues.add('invalid-name', `namespace ${JSON.stringify(namespace)}, name ${JSON.stringify(name)} (not DNS labels)`);
    return undefined;
  }
  return { key: serviceKey(namespace, name), namespace, name, obj };
}

/** What every port of a Service shares. */
interface Shared {
  readonly key: ServiceKey;
  readonly namespace: string;
  readonly name: string;
  readonly family: IPFamily;
  readonly type: ServiceType;
  readonly clusterIP: string;
  readonly externalIPs: string[];
  readonly loadBalancerVIPs: string[];
  readonly ranges: string[];
  readonly sessionAffinity: 'None' | 'ClientIP';
  readonly stickyMaxAgeSeconds: number;
  readonly loadBalancingAsked: string | undefined;
  readonly externalPolicyLocal: boolean;
  readonly internalPolicyLocal: boolean;
  readonly healthCheckNodePort: number;
}

function sharedFields(
  input: Record<string, unknown>,
  spec: Record<string, unknown>,
  base: Pick<Shared, 'key' | 'namespace' | 'name' | 'family' | 'type' | 'clusterIP'>,
  issues: Issues,
): Shared {
  const { family, type } = base;
  const externalIPs = ipsOfFamily(arr(spec['externalIPs']), family, 'invalid-external-ip', issues);
  const { ranges, valid: rangesValid } = sourceRanges(arr(spec['loadBalancerSourceRanges']), family, issues);
  // Fail closed: dropping a bad range would widen who may reach the load balancer (an empty
  // list means everyone), so a Service with a bad range gets no load-balancer VIPs at all.
  const loadBalancerVIPs = rangesValid ? ingressVIPs(input['status'], family, issues) : [];

  const eTPLocal = spec['externalTrafficPolicy'] === 'Local';
  // Upstream apiservice.ExternallyAccessible: node ports, load balancers, or external IPs.
  const serviceExternal = type !== 'ClusterIP' || arr(spec['externalIPs']).length > 0;
  const externalPolicyLocal = eTPLocal && serviceExternal;
  const internalPolicyLocal = spec['internalTrafficPolicy'] === 'Local';

  let healthCheckNodePort = 0;
  if (type === 'LoadBalancer' && externalPolicyLocal) {
    const p = spec['healthCheckNodePort'];
    if (isPortNumber(p)) healthCheckNodePort = p;
    else issues.add('invalid-health-check-node-port', `healthCheckNodePort ${String(p)}`);
  }
  const { sessionAffinity, stickyMaxAgeSeconds } = affinity(spec, issues);
  return {
    ...base,
    externalIPs,
    loadBalancerVIPs,
    ranges,
    sessionAffinity,
    stickyMaxAgeSeconds,
    loadBalancingAsked: loadBalancingAnnotation(input['metadata']),
    externalPolicyLocal,
    internalPolicyLocal,
    healthCheckNodePort,
  };
}

interface PortSpec {
  readonly portName: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly nodePort: number;
}

/** One entry of spec.ports, or undefined (with an issue) when it is invalid or repeats another. */
function normalizePort(
  raw: unknown,
  i: number,
  type: ServiceType,
  seen: { readonly count: number; names: Set<string>; numbers: Set<string> },
  issues: Issues,
): PortSpec | undefined {
  if (!isObject(raw)) {
    issues.add('invalid-port', `ports[${i}] is not an object`);
    return undefined;
  }
  const badName = badPortName(raw['name']);
  if (badName !== undefined) {
    issues.add('invalid-port', `ports[${i}]: ${badName}`);
    return undefined;
  }
  const portName = str(raw['name']);
  // As the API server: only a Service's single port may go without a name.
  if (portName === '' && seen.count > 1) {
    issues.add('invalid-port', `ports[${i}]: a name is required when a Service has more than one port`);
    return undefined;
  }
  const label = `port '${portName || `#${i}`}'`;
  const protocol = str(raw['protocol'] ?? 'TCP');
  if (!PROTOCOLS.has(protocol)) {
    issues.add('unknown-protocol', `${label}: protocol '${String(raw['protocol'])}'`);
    return undefined;
  }
  const port = raw['port'];
  if (!isPortNumber(port)) {
    issues.add('invalid-port', `${label}: port ${String(port)}`);
    return undefined;
  }
  // Names key the join with slices; (port, protocol) keys the rules: both must be unique.
  const number = `${port}/${protocol}`;
  if (seen.names.has(portName) || seen.numbers.has(number)) {
    issues.add('duplicate-port', `${label} (${number}) repeats a name or port`);
    return undefined;
  }
  let nodePort = 0;
  // Only NodePort and LoadBalancer Services have node ports; a stray value elsewhere is ignored.
  if (type !== 'ClusterIP' && raw['nodePort'] !== undefined && raw['nodePort'] !== 0) {
    if (!isPortNumber(raw['nodePort'])) {
      issues.add('invalid-node-port', `${label}: nodePort ${String(raw['nodePort'])}`);
      return undefined;
    }
    nodePort = raw['nodePort'];
  }
  seen.names.add(portName);
  seen.numbers.add(number);
  return { portName, protocol: protocol as Protocol, port, nodePort };
}

function portInfo(s: Shared, { portName, protocol, port, nodePort }: PortSpec): ServicePortInfo {
  const externallyAccessible = nodePort !== 0 || s.loadBalancerVIPs.length > 0 || s.externalIPs.length > 0;
  return {
    id: servicePortId(s.key, portName, protocol),
    service: s.key,
    namespace: s.namespace,
    name: s.name,
    portName,
    family: s.family,
    protocol,
    type: s.type,
    clusterIP: s.clusterIP,
    port,
    nodePort,
    externalIPs: s.externalIPs,
    loadBalancerVIPs: s.loadBalancerVIPs,
    loadBalancerSourceRanges: s.ranges,
    sessionAffinity: s.sessionAffinity,
    stickyMaxAgeSeconds: s.stickyMaxAgeSeconds,
    loadBalancingAsked: s.loadBalancingAsked,
    externalPolicyLocal: s.externalPolicyLocal,
    internalPolicyLocal: s.internalPolicyLocal,
    healthCheckNodePort: s.healthCheckNodePort,
    externallyAccessible,
    usesClusterEndpoints: !s.internalPolicyLocal || externallyAccessible,
    usesLocalEndpoints: s.internalPolicyLocal || (s.externalPolicyLocal && externallyAccessible),
  };
}

/**
 * The cluster IP of this family; skip: headless ("None" or unset, as upstream IsServiceIPSet) or
 * no IP of this family.
 */
type ClusterIP = { kind: 'ip'; ip: string } | { kind: 'skip' } | { kind: 'invalid' };

/** Any invalid IP in the list (with an issue) makes the Service's cluster IP invalid. */
function clusterIPFor(spec: Record<string, unknown>, family: IPFamily, issues: Issues): ClusterIP {
  const list = arr(spec['clusterIPs']);
  const ips = list.length > 0 ? list : spec['clusterIP'] === undefined ? [] : [spec['clusterIP']];
  const first = ips[0];
  if (first === undefined || first === '' || first === 'None') return { kind: 'skip' };
  let found: string | undefined;
  for (const raw of ips) {
    const ip = parseIPText(str(raw));
    if (!ip) {
      issues.add('invalid-cluster-ip', `cluster IP '${String(raw)}'`);
      return { kind: 'invalid' };
    }
    if (ip.family === family && found === undefined) found = ip.text;
  }
  return found === undefined ? { kind: 'skip' } : { kind: 'ip', ip: found };
}

function ipsOfFamily(
  raw: readonly unknown[],
  family: IPFamily,
  reason: 'invalid-external-ip',
  issues: Issues,
): string[] {
  const out: string[] = [];
  for (const r of raw) {
    const ip = parseIPText(str(r).trim());
    const special = ip && specialEndpointIP(ip.text, ip.family);
    if (!ip) issues.add(reason, `'${String(r)}'`);
    // The API server refuses these (ValidateNonSpecialIP): never a frontend of ours either.
    else if (special) issues.add(reason, `${ip.text} is ${special}`);
    else if (ip.family === family && !out.includes(ip.text)) out.push(ip.text);
  }
  return out;
}

function sourceRanges(raw: readonly unknown[], family: IPFamily, issues: Issues): { ranges: string[]; valid: boolean } {
  const ranges: string[] = [];
  let valid = true;
  for (const r of raw) {
    // Upstream trims: API validation once let whitespace through.
    const text = str(r).trim();
    const cidr = text.includes('/') ? parseCIDR(text) : undefined;
    if (!cidr) {
      issues.add('invalid-source-range', `'${String(r)}' (load-balancer IPs not programmed)`);
      valid = false;
    } else if (cidr.family === family && !ranges.includes(cidr.text)) ranges.push(cidr.text);
  }
  return { ranges, valid };
}

function ingressVIPs(status: unknown, family: IPFamily, issues: Issues): string[] {
  const lb = isObject(status) && isObject(status['loadBalancer']) ? status['loadBalancer'] : {};
  const out: string[] = [];
  for (const ing of arr(lb['ingress'])) {
    if (!isObject(ing) || !ing['ip']) continue; // hostname-only ingress: nothing to program
    // ipMode Proxy: the load balancer delivers to the node, not to the VIP; unset means VIP.
    if (ing['ipMode'] !== undefined && ing['ipMode'] !== 'VIP') continue;
    const ip = parseIPText(str(ing['ip']));
    if (!ip) issues.add('invalid-load-balancer-ip', `ingress ip '${String(ing['ip'])}'`);
    else if (ip.family === family && !out.includes(ip.text)) out.push(ip.text);
  }
  return out;
}

function affinity(
  spec: Record<string, unknown>,
  issues: Issues,
): { sessionAffinity: 'None' | 'ClientIP'; stickyMaxAgeSeconds: number } {
  const raw = spec['sessionAffinity'];
  if (raw === undefined || raw === 'None') return { sessionAffinity: 'None', stickyMaxAgeSeconds: 0 };
  if (raw !== 'ClientIP') {
    issues.add('invalid-session-affinity', `sessionAffinity '${String(raw)}' (treated as None)`);
    return { sessionAffinity: 'None', stickyMaxAgeSeconds: 0 };
  }
  const cfg = spec['sessionAffinityConfig'];
  const clientIP = isObject(cfg) && isObject(cfg['clientIP']) ? cfg['clientIP'] : {};
  const t = clientIP['timeoutSeconds'];
  if (t === undefined) return { sessionAffinity: 'ClientIP', stickyMaxAgeSeconds: DEFAULT_AFFINITY_TIMEOUT_SECONDS };
  if (!Number.isInteger(t) || (t as number) < 1 || (t as number) > MAX_AFFINITY_TIMEOUT_SECONDS) {
    issues.add(
      'invalid-session-affinity',
      `timeoutSeconds ${String(t)} (default ${DEFAULT_AFFINITY_TIMEOUT_SECONDS} used)`,
    );
    return { sessionAffinity: 'ClientIP', stickyMaxAgeSeconds: DEFAULT_AFFINITY_TIMEOUT_SECONDS };
  }
  return { sessionAffinity: 'ClientIP', stickyMaxAgeSeconds: t as number };
}
