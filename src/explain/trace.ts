// `kube-proxy-ts trace`: what one packet would meet, computed from the model the proxier
// programs, in the order the running mode applies it. Where the modes differ (a port no
// Service exposes, an unallocated service IP, no endpoints, source ranges, a Local policy
// without a local endpoint, how an endpoint is reached) the mode's traits decide (modes.ts).
// In the nftables mode (docs/nftables-ruleset.md):
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
import type { DesiredState, EndpointInfo, EndpointSelection, Protocol, ServicePortInfo } from '../model/index.ts';
import { balancingOf, sharesOf, type BalancingContext } from './balancing.ts';
import type { FrontendKind } from './explain.ts';
import { traceTraits } from './modes.ts';
import type { TraceTraits } from './modes.ts';

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
  /** The node's load-balancing flags (--load-balancing, --ipvs-scheduler); default none. */
  readonly balancing?: BalancingContext;
}

/** dnat: to an endpoint in the kernel; proxy: to the daemon's proxy socket, which connects to one (userspace). */
export type TraceVerdict = 'dnat' | 'proxy' | 'drop' | 'reject' | 'untouched';

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
  const traits = traceTraits(ctx.mode);
  if (traits.unhandledProtocols.includes(q.protocol))
    return { ...base, family, verdict: 'untouched', reason: `${ctx.mode} mode does not handle ${q.protocol}` };
  const m = matchFrontend(state, q, ctx.localAddresses);
  if (!m) return { ...base, family, ...noFrontend(state, q, traits) };
  const { info, kind } = m;
  const frontend = { id: info.id, service: info.service, kind };
  const fromThisNode = ctx.localAddresses.includes(src.text);
  const blocked = kind === 'load-balancer' ? sourceRangeDrop(state, info, q, fromThisNode, traits) : undefined;
  if (blocked) return { ...base, family, frontend, ...blocked };

  const source = { ip: q.from, fromThisNode, ...(q.inInterface !== undefined ? { inInterface: q.inInterface } : {}) };
  const route = decideRoute(state.masquerade, info, kind, source);
  const sel = state.selections.get(info.id);
  const picked = pickEndpoints(info, kind, sel, route.endpoints, traits);
  const notes = picked.note !== undefined ? [picked.note] : [];
  const eps = picked.endpoints;
  if (eps.length === 0) return { ...base, family, frontend, ...noEndpoints(info, route.endpoints, sel, traits), notes };

  const proxied = traits.forward === 'proxy';
  const masquerade = proxied
    ? { yes: true, why: "the daemon's proxy socket connects to the endpoint: it sees this node's address" }
    : masqueradeWhy(state, info, kind, route, source);
  const shares = sharesOf(balancingOf(ctx.mode, info, ctx.balancing), eps);
  const endpoints = eps.map((e, i) => ({
    endpoint: e.key,
    probability: shares[i]!,
    nodeName: e.nodeName,
    hairpin:
      e.ip === src.text && (traits.hairpin === 'every endpoint' || (traits.hairpin === 'local endpoints' && e.isLocal)),
  }));
  if (endpoints.some((e) => e.hairpin))
    notes.push('hairpin: to the endpoint that is the source itself, the packet is masqueraded (hairpin set)');
  notes.push(...balancingNotes(ctx, info));
  if (info.sessionAffinity === 'ClientIP') {
    notes.push(
      `sessionAffinity ClientIP: a client seen within ${info.stickyMaxAgeSeconds}s goes back to its endpoint; a new one gets each with the probability shown`,
    );
  }
  const to = proxied ? "redirected to the daemon's proxy socket, which connects to" : 'to';
  const why = `${kind} ${q.to}:${q.port}/${q.protocol} of ${info.id}: ${to} one of ${eps.length} ${picked.set} endpoint(s)`;
  return { query: q, family, frontend, verdict: traits.forward, reason: why, masquerade, endpoints, notes };
}

/** The mode's picking rule for the port, and what the shares shown mean. */
function balancingNotes(ctx: TraceContext, info: ServicePortInfo): string[] {
  const b = balancingOf(ctx.mode, info, ctx.balancing);
  if (!b) return [];
  const notes = [`load balancing ${b.algorithm} (${b.source}): ${b.picking}`];
  if (b.share === 'by-connections')
    notes.push('the shares shown are nominal: the scheduler picks by the connections each endpoint has open');
  if (b.refused) notes.push(`load balancing: refused ${b.refused}`);
  return notes;
}

/** loadBalancerSourceRanges (filter, before any DNAT): the drop of a source outside them, if the mode enforces them. */
function sourceRangeDrop(
  state: DesiredState,
  info: ServicePortInfo,
  q: TraceQuery,
  fromThisNode: boolean,
  traits: TraceTraits,
): Pick<TraceResult, 'verdict' | 'reason'> | undefined {
  const ranges = info.loadBalancerSourceRanges;
  if (ranges.length === 0 || !traits.sourceRanges) return undefined;
  if (ranges.some((r) => contains(r, q.from))) return undefined;
  // The node's own requests to a VIP (often a local address) pass when a range covers its primary IP.
  if (fromThisNode && state.node.primaryIP !== '' && ranges.some((r) => contains(r, state.node.primaryIP)))
    return undefined;
  return {
    verdict: traits.sourceRanges.verdict,
    reason: `source ${q.from} is outside loadBalancerSourceRanges ${ranges.join(',')} (${traits.sourceRanges.rule})`,
  };
}

/** The endpoints the mode sends this traffic to: the set the policy chose, or what the mode does instead. */
function pickEndpoints(
  info: ServicePortInfo,
  kind: FrontendKind,
  sel: EndpointSelection | undefined,
  set: 'cluster' | 'local',
  traits: TraceTraits,
): { endpoints: readonly EndpointInfo[]; set: 'cluster' | 'local'; note?: string } {
  const cluster = sel?.cluster ?? [];
  const fate = traits.noLocalEndpoints.fate;
  // The userspace proxy socket balances over the cluster set whatever the policy (and the model
  // has none for internalTrafficPolicy=Local on a Service not reachable from outside).
  if (fate === 'ignored') {
    const note = info.internalPolicyLocal || info.externalPolicyLocal ? traits.noLocalEndpoints.rule : undefined;
    return { endpoints: cluster, set: 'cluster', ...(note !== undefined ? { note } : {}) };
  }
  if (set === 'cluster') return { endpoints: cluster, set };
  const local = sel?.local ?? [];
  if (local.length === 0 && fate === 'cluster-fallback' && cluster.length > 0) {
    // The local set reaches an external frontend only from sources that are neither this node's
    // pods nor the node (decideRoute): those the mode may drop instead of falling back.
    if (kind !== 'cluster-ip' && traits.noLocalEndpoints.externalSources !== undefined) return { endpoints: [], set };
    return { endpoints: cluster, set: 'cluster', note: traits.noLocalEndpoints.rule };
  }
  return { endpoints: local, set };
}

function noFrontend(state: DesiredState, q: TraceQuery, traits: TraceTraits): Pick<TraceResult, 'verdict' | 'reason'> {
  const clusterIP = [...state.services.values()].find((p) => p.clusterIP === q.to);
  if (clusterIP) {
    return {
      verdict: traits.unexposedPort.verdict,
      reason: `${q.to} is the cluster IP of ${clusterIP.service}, which exposes no ${q.protocol} port ${q.port} (${traits.unexposedPort.rule})`,
    };
  }
  const cidr = state.serviceCIDRs.find((c) => contains(c, q.to));
  if (cidr)
    return {
      verdict: traits.unallocatedIP.verdict,
      reason: `${q.to} is inside the service CIDR ${cidr} but no Service has it (unallocated service IP; ${traits.unallocatedIP.rule})`,
    };
  return {
    verdict: 'untouched',
    reason: `no Service frontend is ${q.to}:${q.port}/${q.protocol}: kube-proxy-ts does not touch the packet`,
  };
}

function noEndpoints(
  info: ServicePortInfo,
  set: 'cluster' | 'local',
  sel: EndpointSelection | undefined,
  traits: TraceTraits,
): Pick<TraceResult, 'verdict' | 'reason'> {
  // As the rules: reject when the Service has no usable endpoint anywhere, drop when it has some this traffic may
  // not use.
  if (!(sel?.hasAnyEndpoints ?? false) && (sel?.allReachable.length ?? 0) === 0)
    return {
      verdict: traits.noEndpoints.verdict,
      reason: `${info.service} has no ready (or serving, terminating) endpoint: rejected (${traits.noEndpoints.rule})`,
    };
  if (traits.noLocalEndpoints.fate === 'ignored')
    return {
      verdict: traits.noEndpoints.verdict,
      reason: `${info.service} has no endpoint in the cluster set (internalTrafficPolicy=Local: the model keeps only local ones, which this mode does not use): rejected (${traits.noEndpoints.rule})`,
    };
  if (set === 'local') {
    const policy =
      info.internalPolicyLocal && !info.externalPolicyLocal ? 'internalTrafficPolicy' : 'externalTrafficPolicy';
    const external = traits.noLocalEndpoints.externalSources;
    if (external !== undefined && info.externalPolicyLocal && (sel?.cluster.length ?? 0) > 0)
      return {
        verdict: 'drop',
        reason: `externalTrafficPolicy=Local and no endpoint on this node: an external source is dropped (this node's pods and the node fall back to the cluster endpoints; ${external})`,
      };
    // IPVS: nothing to fall back to either (the model has no cluster set), so the virtual server is empty.
    if (traits.noLocalEndpoints.fate === 'cluster-fallback')
      return {
        verdict: traits.noEndpoints.verdict,
        reason: `${policy}=Local, no endpoint on this node and no cluster endpoint to fall back to: rejected (${traits.noEndpoints.rule})`,
      };
    return {
      verdict: 'drop',
      reason: `${policy}=Local and no endpoint on this node: dropped (endpoints exist elsewhere; ${traits.noLocalEndpoints.rule})`,
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
