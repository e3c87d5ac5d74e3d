// Service -> service ports of one IP family (upstream serviceToServiceMap + newBaseServiceInfo).
// Skipped without complaint, as kube-proxy does: ExternalName and headless Services, Services
// another proxy owns, Services with no cluster IP of this family. Invalid parts (a port, an
// external IP) are dropped with an issue; a Service unusable as a whole (invalid cluster IP,
// unknown type, absurd size) is rejected, and the tracker keeps its last good version.

import { parseCIDR, parseIPText, type IPFamily } from '../base/ip.ts';
import { PROTOCOLS, serviceKey, servicePortId, type Protocol, type ServiceKey } from './ids.ts';
import { arr, isIgnoredByLabel, isObject, isPortNumber, labelsOf, nameOf, str } from './guards.ts';
import { Issues } from './issues.ts';
import type { Limits, ServicePortInfo, ServiceType } from './types.ts';
import { isDNS1035Label, isDNS1123Label, specialEndpointIP } from './validate.ts';

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
  if (!isObject(input)) {
    issues.add('not-an-object', typeof input);
    return { key: undefined, ports: [], rejected: true, issues };
  }
  const { namespace, name } = nameOf(input['metadata']);
  if (!namespace || !name) {
    issues.add('missing-name', `namespace '${namespace}', name '${name}'`);
    return { key: undefined, ports: [], rejected: true, issues };
  }
  // Names become kernel object names and log text: only what the API server would accept.
  if (!isDNS1123Label(namespace) || !isDNS1035Label(name)) {
    issues.add('invalid-name', `namespace ${JSON.stringify(namespace)}, name ${JSON.stringify(name)} (not DNS labels)`);
    return { key: undefined, ports: [], rejected: true, issues };
  }
  const key = serviceKey(namespace, name);
  // Built when returned: most Services are neither skipped nor rejected.
  const none = (): ServiceResult => ({ key, ports: [], rejected: false, issues });
  const rejected = (): ServiceResult => ({ key, ports: [], rejected: true, issues });
  if (isIgnoredByLabel(labelsOf(input['metadata']))) return none();

  if (input['spec'] !== undefined && !isObject(input['spec'])) {
    issues.add('not-an-object', 'spec');
    return rejected();
  }
  const spec = isObject(input['spec']) ? input['spec'] : {};
  const rawType = spec['type'] === undefined ? 'ClusterIP' : str(spec['type']);
  if (!TYPES.has(rawType)) {
    issues.add('unknown-type', `type '${String(spec['type'])}'`);
    return rejected();
  }
  if (rawType === 'ExternalName') return none();
  const type = rawType as ServiceType;

  const clusterIP = clusterIPFor(spec, family, issues);
  if (clusterIP === null) return rejected();
  if (clusterIP === undefined) return none();

  if (spec['ports'] !== undefined && !Array.isArray(spec['ports']))
    issues.add('invalid-port', 'spec.ports is not a list');
  const rawPorts = arr(spec['ports']);
  if (rawPorts.length > limits.maxPorts) {
    issues.add('too-many-ports', `${rawPorts.length} ports, limit ${limits.maxPorts}`);
    return rejected();
  }

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

  const ports: ServicePortInfo[] = [];
  const seenNames = new Set<string>();
  const seenNumbers = new Set<string>();
  for (let i = 0; i < rawPorts.length; i++) {
    const raw = rawPorts[i];
    if (!isObject(raw)) {
      issues.add('invalid-port', `ports[${i}] is not an object`);
      continue;
    }
    const portName = str(raw['name']);
    if (portName !== '' && !isDNS1123Label(portName)) {
      issues.add('invalid-port', `ports[${i}]: name ${JSON.stringify(portName)} is not a DNS label`);
      continue;
    }
    const label = `port '${portName || `#${i}`}'`;
    const protocol = raw['protocol'] === undefined ? 'TCP' : str(raw['protocol']);
    if (!PROTOCOLS.has(protocol)) {
      issues.add('unknown-protocol', `${label}: protocol '${String(raw['protocol'])}'`);
      continue;
    }
    if (!isPortNumber(raw['port'])) {
      issues.add('invalid-port', `${label}: port ${String(raw['port'])}`);
      continue;
    }
    // Names key the join with slices; (port, protocol) keys the rules: both must be unique.
    const number = `${raw['port']}/${protocol}`;
    if (seenNames.has(portName) || seenNumbers.has(number)) {
      issues.add('duplicate-port', `${label} (${number}) repeats a name or port`);
      continue;
    }
    let nodePort = 0;
    // Only NodePort and LoadBalancer Services have node ports; a stray value elsewhere is ignored.
    if (type !== 'ClusterIP' && raw['nodePort'] !== undefined && raw['nodePort'] !== 0) {
      if (!isPortNumber(raw['nodePort'])) {
        issues.add('invalid-node-port', `${label}: nodePort ${String(raw['nodePort'])}`);
        continue;
      }
      nodePort = raw['nodePort'];
    }
    seenNames.add(portName);
    seenNumbers.add(number);
    const externallyAccessible = nodePort !== 0 || loadBalancerVIPs.length > 0 || externalIPs.length > 0;
    ports.push({
      id: servicePortId(key, portName, protocol as Protocol),
      service: key,
      namespace,
      name,
      portName,
      family,
      protocol: protocol as Protocol,
      type,
      clusterIP,
      port: raw['port'],
      nodePort,
      externalIPs,
      loadBalancerVIPs,
      loadBalancerSourceRanges: ranges,
      sessionAffinity,
      stickyMaxAgeSeconds,
      externalPolicyLocal,
      internalPolicyLocal,
      healthCheckNodePort,
      externallyAccessible,
      usesClusterEndpoints: !internalPolicyLocal || externallyAccessible,
      usesLocalEndpoints: internalPolicyLocal || (externalPolicyLocal && externallyAccessible),
    });
  }
  ports.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { key, ports, rejected: false, issues };
}

/**
 * The cluster IP of this family; undefined to skip the Service (headless: "None" or unset, as
 * upstream IsServiceIPSet; or no IP of this family); null when an IP is invalid.
 */
function clusterIPFor(spec: Record<string, unknown>, family: IPFamily, issues: Issues): string | undefined | null {
  const list = arr(spec['clusterIPs']);
  const ips = list.length > 0 ? list : spec['clusterIP'] === undefined ? [] : [spec['clusterIP']];
  const first = ips[0];
  if (first === undefined || first === '' || first === 'None') return undefined;
  let found: string | undefined;
  for (const raw of ips) {
    const ip = parseIPText(str(raw));
    if (!ip) {
      issues.add('invalid-cluster-ip', `cluster IP '${String(raw)}'`);
      return null;
    }
    if (ip.family === family && found === undefined) found = ip.text;
  }
  return found;
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
