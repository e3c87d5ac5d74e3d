// Masquerade (SNAT) decisions, as upstream's proxiers make them. The model states the policy;
// proxiers turn it into rules, and decideRoute() states the outcome for one packet so tests
// (and the userspace proxier) can check behaviour without rule text.
//
// Traffic to endpoints on other nodes must come back through this node, so it is masqueraded
// unless it already comes from the pod network (the local detector says which sources are
// "local"). External traffic under externalTrafficPolicy=Local is never masqueraded (the
// point is keeping the client IP), except traffic from this node itself.

import { cidrContains, parseCIDR, parseIP, type IPFamily } from '../base/ip.ts';
import { Issues } from './issues.ts';
import type {
  DetectLocalMode,
  LocalDetector,
  MasqueradePolicy,
  ModelOptions,
  NodeInfo,
  ServicePortInfo,
} from './types.ts';

export function buildLocalDetector(opts: ModelOptions, node: NodeInfo, issues: Issues = new Issues()): LocalDetector {
  const mode: DetectLocalMode = opts.detectLocalMode ?? 'ClusterCIDR';
  const none = (m: DetectLocalMode): LocalDetector => ({ mode: m, cidrs: [], interfaceName: '', implemented: false });
  switch (mode) {
    // Upstream's getLocalDetectors builds one detector per family from the first CIDR of that
    // family and ignores the rest, silently (validation allows one per family anyway).
    case 'ClusterCIDR': {
      const cidrs = cidrsOfFamily(opts.clusterCIDRs ?? [], opts.family, 'clusterCIDR', issues).slice(0, 1);
      return { mode, cidrs, interfaceName: '', implemented: cidrs.length > 0 };
    }
    case 'NodeCIDR': {
      // Unimplemented until the Node (and its podCIDR) is known.
      const cidrs = node.podCIDRs.slice(0, 1);
      return { mode, cidrs, interfaceName: '', implemented: cidrs.length > 0 };
    }
    case 'BridgeInterface':
    case 'InterfaceNamePrefix': {
      const name = (mode === 'BridgeInterface' ? opts.bridgeInterface : opts.interfaceNamePrefix) ?? '';
      return { mode, cidrs: [], interfaceName: name, implemented: name !== '' };
    }
    default:
      return none('None');
  }
}

export function buildMasqueradePolicy(opts: ModelOptions, node: NodeInfo, issues?: Issues): MasqueradePolicy {
  return { all: opts.masqueradeAll === true, detectLocal: buildLocalDetector(opts, node, issues) };
}

function cidrsOfFamily(list: readonly string[], family: IPFamily, what: string, issues: Issues): string[] {
  const out: string[] = [];
  for (const s of list) {
    const c = s.includes('/') ? parseCIDR(s.trim()) : undefined;
    if (!c) issues.add('invalid-cidr', `${what} '${s}'`);
    else if (c.family === family && !out.includes(c.text)) out.push(c.text);
  }
  return out;
}

export interface TrafficSource {
  readonly ip: string;
  /** Sent by this node itself (upstream: fib saddr type local). */
  readonly fromThisNode?: boolean;
  /** Interface it arrived on, for the interface-based detect-local modes. */
  readonly inInterface?: string;
}

/** Whether the source is on the pod network; undefined when the detector cannot tell. */
export function isLocalTraffic(d: LocalDetector, src: TrafficSource): boolean | undefined {
  if (!d.implemented) return undefined;
  if (d.mode === 'BridgeInterface') return src.inInterface === d.interfaceName;
  if (d.mode === 'InterfaceNamePrefix') return src.inInterface?.startsWith(d.interfaceName) ?? false;
  const ip = parseIP(src.ip);
  if (!ip) return false;
  return d.cidrs.some((t) => {
    const c = parseCIDR(t);
    return c !== undefined && cidrContains(c, ip);
  });
}

export type TrafficKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

export interface RouteDecision {
  /** Which endpoint set of the selection the packet is balanced over. */
  readonly endpoints: 'cluster' | 'local';
  readonly masquerade: boolean;
}

/**
 * Where a packet to a service port goes and whether it is masqueraded. Hairpin traffic (a pod
 * reaching itself through the Service) is masqueraded as well, which proxiers decide per
 * endpoint; it is not part of this decision.
 */
export function decideRoute(
  policy: MasqueradePolicy,
  info: Pick<ServicePortInfo, 'internalPolicyLocal' | 'externalPolicyLocal'>,
  kind: TrafficKind,
  src: TrafficSource,
): RouteDecision {
  const local = isLocalTraffic(policy.detectLocal, src);
  if (kind === 'cluster-ip') {
    // Off-cluster sources (routed to a service IP through this node) may reach remote endpoints.
    const masquerade = policy.all || local === false;
    return { endpoints: info.internalPolicyLocal ? 'local' : 'cluster', masquerade };
  }
  if (!info.externalPolicyLocal) return { endpoints: 'cluster', masquerade: true };
  // Local policy: pods on this node short-circuit to any endpoint (no SNAT needed, they are
  // on the pod network); this node's own traffic is masqueraded to any endpoint.
  if (local === true) return { endpoints: 'cluster', masquerade: false };
  if (src.fromThisNode === true) return { endpoints: 'cluster', masquerade: true };
  return { endpoints: 'local', masquerade: false };
}

/**
 * The packet mark that asks for masquerade: 1 << masqueradeBit (upstream default bit 14, 0x4000),
 * unsigned so that bit 31 is not a negative number in the kernel's u32.
 */
export function masqueradeMark(bit = 14): number {
  if (!Number.isInteger(bit) || bit < 0 || bit > 31)
    throw new RangeError(`--iptables-masquerade-bit ${bit} is not in 0..31`);
  return (1 << bit) >>> 0;
}
