// `kube-proxy-ts trace`: what one packet would meet, computed from the model the proxier
// programs, in the order the nftables ruleset applies it (docs/nftables-ruleset.md):
//
//   filter  firewall-check       a load-balancer frontend with source ranges drops other sources
//   nat     services             frontend -> picker: one of the endpoints, each 1/N; masquerade mark
//   filter  *-endpoints-check    a frontend with no usable endpoint: reject (none anywhere) or drop
//   filter  cluster-ips-check    a cluster IP on a port no Service exposes: reject;
//                                an unallocated address inside the service CIDRs: drop
//
// Pure: the daemon passes the model's state, this node's addresses and the proxy mode.

import { cidrContains, parseCIDR, parseIP } from '../base/ip.ts';
import type { IPFamily } from '../base/ip.ts';
import { decideRoute, isLocalTraffic, nodePortAddressMatches } from '../model/index.ts';
import type { DesiredState, EndpointInfo, Protocol, ServicePortInfo } from '../model/index.ts';
import type { FrontendKind } from './explain.ts';

export interface TraceQuery {
  readonly from: string;
  readonly fromPort?: number;
  readonly to: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly inInterface?: string;
}

export interface TraceContext {
  readonly states: ReadonlyMap<IPFamily, DesiredState>;
  /** This node's addresses (all families): node ports answer on some, and traffic from one is the node's own. */
  readonly localAddresses: readonly string[];
  readonly mode: string;
}

export type TraceVerdict = 'dnat' | 'drop' | 'reject' | 'untouched';

export interface TraceEndpoint {
  readonly endpoint: string;
  readonly probability: number;
  readonly nodeName: string;
  /** The source is the endpoint itself: masqueraded so the reply comes back through the Service. */
  readonly hairpin: boolean;
}

export interface TraceResult {
  readonly query: TraceQuery;
  readonly family?: IPFamily;
  readonly frontend?: { readonly id: string; readonly service: string; readonly kind: FrontendKind };
  readonly verdict: TraceVerdict;
  /** Why: for a drop or reject, exactly which rule and what in the model made it. */
  readonly reason: string;
  readonly masquerade?: { readonly yes: boolean; readonly why: string };
  readonly endpoints: readonly TraceEndpoint[];
  readonly notes: readonly string[];
}

const contains = (cidr: string, ip: string): boolean => {
  const c = parseCIDR(cidr);
  const a = parseIP(ip);
  return c !== undefined && a !== undefined && cidrContains(c, a);
};

/** The frontend a packet to `to:port/protocol` hits, as the services vmap would find it. */
export function matchFrontend(
  state: DesiredState,
  q: TraceQuery,
  localAddresses: readonly string[],
): { info: ServicePortInfo; kind: FrontendKind } | undefined {
  const ports = [...state.services.values()].filter((p) => p.protocol === q.protocol);
  for (const p of ports) if (p.clusterIP === q.to && p.port === q.port) return { info: p, kind: 'cluster-ip' };
  for (const p of ports) {
    if (!p.externallyAccessible || p.port !== q.port) continue;
    if (p.externalIPs.includes(q.to)) return { info: p, kind: 'external-ip' };
    if (p.loadBalancerVIPs.includes(q.to)) return { info: p, kind: 'load-balancer' };
  }
  if (!answersNodePorts(state, q.to, localAddresses)) return undefined;
  for (const p of ports)
    if (p.externallyAccessible && p.nodePort > 0 && p.nodePort === q.port) return { info: p, kind: 'node-port' };
  return undefined;
}

/** A node address that node ports answer on (nodePortAddresses; never loopback in the nftables mode). */
function answersNodePorts(state: DesiredState, ip: string, localAddresses: readonly string[]): boolean {
  const a = parseIP(ip);
  if (!a || !localAddresses.includes(a.text)) return false;
  if (state.nodePortAddresses.matchAll) return !(a.family === 'IPv4' ? ip.startsWith('127.') : ip === '::1');
  return nodePortAddressMatches(state.nodePortAddresses, ip);
}

function detectLocalText(state: DesiredState): string {
  const d = state.masquerade.detectLocal;
  if (!d.implemented) return `detect-local ${d.mode} has nothing to match on`;
  return d.cidrs.length > 0
    ? `detect-local ${d.mode} ${d.cidrs.join(',')}`
    : `detect-local ${d.mode} ${d.interfaceName}`;
}

export function trace(ctx: TraceContext, q: TraceQuery): TraceResult {
  const dst = parseIP(q.to);
  const src = parseIP(q.from);
  const base = { query: q, endpoints: [] as TraceEndpoint[], notes: [] as string[] };
  if (!dst || !src) return { ...base, verdict: 'untouched', reason: `not an IP address: ${!dst ? q.to : q.from}` };
  if (dst.family !== src.family)
    return { ...base, verdict: 'untouched', reason: `${q.from} and ${q.to} are of different families` };
  const family = dst.family;
  const state = ctx.states.get(family);
  if (!state) return { ...base, family, verdict: 'untouched', reason: `this proxy does not serve ${family}` };
  const m = matchFrontend(state, q, ctx.localAddresses);
  if (!m) return { ...base, family, ...noFrontend(state, q) };
  const { info, kind } = m;
  const frontend = { id: info.id, service: info.service, kind };
  const fromThisNode = ctx.localAddresses.includes(src.text);

  // filter: firewall-check (loadBalancerSourceRanges), before any DNAT.
  if (kind === 'load-balancer' && info.loadBalancerSourceRanges.length > 0) {
    const allowed = info.loadBalancerSourceRanges.some((r) => contains(r, q.from));
    const nodeAllowed =
      fromThisNode &&
      state.node.primaryIP !== '' &&
      info.loadBalancerSourceRanges.some((r) => contains(r, state.node.primaryIP));
    if (!allowed && !nodeAllowed) {
      return {
        ...base,
        family,
        frontend,
        verdict: 'drop',
        reason: `source ${q.from} is outside loadBalancerSourceRanges ${info.loadBalancerSourceRanges.join(',')} (firewall-check)`,
      };
    }
  }

  const source = { ip: q.from, fromThisNode, ...(q.inInterface !== undefined ? { inInterface: q.inInterface } : {}) };
  const route = decideRoute(
    state.masquerade,
    info,
    kind === 'cluster-ip'
      ? 'cluster-ip'
      : kind === 'node-port'
        ? 'node-port'
        : kind === 'external-ip'
          ? 'external-ip'
          : 'load-balancer',
    source,
  );
  const sel = state.selections.get(info.id);
  let eps: readonly EndpointInfo[] = route.endpoints === 'local' ? (sel?.local ?? []) : (sel?.cluster ?? []);
  const notes: string[] = [];
  if (eps.length === 0 && route.endpoints === 'local' && ctx.mode === 'ipvs' && (sel?.cluster.length ?? 0) > 0) {
    if (kind === 'cluster-ip') {
      // IPVS cannot tell pod traffic from other traffic: iTP=Local without local endpoints falls back.
      eps = sel!.cluster;
      notes.push(
        'IPVS mode: Local policy with no local endpoint falls back to the cluster endpoints (upstream PR 97081)',
      );
    } else
      notes.push(
        "IPVS mode: the virtual server falls back to the cluster endpoints for this node's pods and the node (upstream PR 97081); other sources are dropped in KUBE-PROXY-FIREWALL (set KUBE-NO-LOCAL-ENDPOINTS)",
      );
  }
  if (eps.length === 0)
    return {
      ...base,
      family,
      frontend,
      ...noEndpoints(info, route.endpoints, sel?.hasAnyEndpoints ?? false, sel?.allReachable.length ?? 0),
      notes,
    };

  const masquerade = masqueradeWhy(state, info, kind, route, source);
  const endpoints = eps.map((e) => ({
    endpoint: e.key,
    probability: 1 / eps.length,
    nodeName: e.nodeName,
    hairpin: e.ip === src.text,
  }));
  if (endpoints.some((e) => e.hairpin))
    notes.push('hairpin: to the endpoint that is the source itself, the packet is masqueraded (hairpin set)');
  if (info.sessionAffinity === 'ClientIP') {
    notes.push(
      `sessionAffinity ClientIP: a client seen within ${info.stickyMaxAgeSeconds}s goes back to its endpoint; a new one gets each with the probability shown`,
    );
  }
  const why = `${kind} ${q.to}:${q.port}/${q.protocol} of ${info.id}: to one of ${eps.length} ${route.endpoints} endpoint(s)`;
  return { query: q, family, frontend, verdict: 'dnat', reason: why, masquerade, endpoints, notes };
}

function noFrontend(state: DesiredState, q: TraceQuery): Pick<TraceResult, 'verdict' | 'reason'> {
  const clusterIP = [...state.services.values()].find((p) => p.clusterIP === q.to);
  if (clusterIP) {
    return {
      verdict: 'reject',
      reason: `${q.to} is the cluster IP of ${clusterIP.service}, which exposes no ${q.protocol} port ${q.port} (cluster-ips-check)`,
    };
  }
  const cidr = state.serviceCIDRs.find((c) => contains(c, q.to));
  if (cidr)
    return {
      verdict: 'drop',
      reason: `${q.to} is inside the service CIDR ${cidr} but no Service has it (unallocated service IP, cluster-ips-check)`,
    };
  return {
    verdict: 'untouched',
    reason: `no Service frontend is ${q.to}:${q.port}/${q.protocol}: kube-proxy-ts does not touch the packet`,
  };
}

function noEndpoints(
  info: ServicePortInfo,
  set: 'cluster' | 'local',
  hasAny: boolean,
  reachable: number,
): Pick<TraceResult, 'verdict' | 'reason'> {
  // As port-plan.ts: reject when the Service has no usable endpoint anywhere, drop when it has some this traffic may
  // not use.
  if (!hasAny && reachable === 0)
    return {
      verdict: 'reject',
      reason: `${info.service} has no ready (or serving, terminating) endpoint: rejected (no-endpoint, reject-chain)`,
    };
  if (set === 'local') {
    const policy =
      info.internalPolicyLocal && !info.externalPolicyLocal ? 'internalTrafficPolicy' : 'externalTrafficPolicy';
    return {
      verdict: 'drop',
      reason: `${policy}=Local and no endpoint on this node: dropped (endpoints exist elsewhere)`,
    };
  }
  return { verdict: 'drop', reason: 'no endpoint this traffic may use: dropped' };
}

function masqueradeWhy(
  state: DesiredState,
  info: ServicePortInfo,
  kind: FrontendKind,
  route: { endpoints: 'cluster' | 'local'; masquerade: boolean },
  src: { ip: string; fromThisNode: boolean; inInterface?: string },
): { yes: boolean; why: string } {
  const local = isLocalTraffic(state.masquerade.detectLocal, src);
  const dl = detectLocalText(state);
  if (kind === 'cluster-ip') {
    if (state.masquerade.all) return { yes: true, why: 'masqueradeAll' };
    if (local === undefined) return { yes: false, why: `${dl}: cluster-IP traffic is not masqueraded` };
    return local
      ? { yes: false, why: `the source is on the pod network (${dl})` }
      : {
          yes: true,
          why: `the source is not on the pod network (${dl}), so replies from another node must come back here`,
        };
  }
  if (!info.externalPolicyLocal)
    return { yes: true, why: 'external traffic with externalTrafficPolicy=Cluster is always masqueraded' };
  if (local === true)
    return {
      yes: false,
      why: `externalTrafficPolicy=Local, but the source is a pod (${dl}): short-circuit to any endpoint`,
    };
  if (src.fromThisNode)
    return { yes: true, why: 'externalTrafficPolicy=Local, but the source is this node: masqueraded to any endpoint' };
  return { yes: route.masquerade, why: 'externalTrafficPolicy=Local keeps the client address' };
}
