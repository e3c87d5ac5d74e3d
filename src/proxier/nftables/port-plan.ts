// What one service port needs in the kernel: the elements it adds to the shared sets and
// maps, the pickers (pickers.ts) its frontends go to, and, for ClientIP session affinity
// only, chains and sets of its own. Pure: the same inputs give the same plan, which is what
// the proxier diffs against the plan it programmed last time.
//
//   service-ips        clusterIP . proto . port         -> goto pick-internal-N
//                      externalIP/LB IP . proto . port  -> goto pick-external-N (or -local-L-C)
//   service-nodeports  proto . nodePort                 -> goto pick-nodeport-N (or -local-L-C)
//   endpoints-N        frontend . i -> endpoint i, for i < N (nodeport-…, short-circuit-… alike)
//   no-endpoint-*      the frontends with no usable endpoint -> reject (none anywhere) or drop
//   hairpin, cluster-ips, firewall-*: see the skeleton's rules
//
// A Service with session affinity sends its frontends to its own chains instead
// (`service-…`, `external-…`), which remember each client in a set per endpoint; so does a
// Service that asks for round-robin or consistent-hash, whose chains pick from a map of its
// own (balancing.ts).

import { LOAD_BALANCING_SUPPORT } from '../types.ts';
import type { EndpointInfo, EndpointSelection, LoadBalancing, ServicePortInfo } from '../../model/index.ts';
import { resolveLoadBalancing } from '../../model/index.ts';
import type { OwnAlgorithm } from './balancing.ts';
import { balancingObjects, isOwnAlgorithm } from './balancing.ts';
import type { NftRule, NftSetLike, RuleBuilder, Verdict } from '../../netlink/nftables/index.ts';
import { rule } from '../../netlink/nftables/index.ts';
import type { Contribution, PortElements } from './elements.ts';
import { keyText, mapElement, setElement, slots } from './elements.ts';
import { firewallSources } from './firewall.ts';
import { affinitySet, CHAIN, externalChain, serviceChain, SET } from './names.ts';
import type { PickerContext, PickerSpec } from './pickers.ts';
import { endpointsMapName, internalMarkRules, localTraffic, pickerName } from './pickers.ts';
import { trafficPlan } from './traffic.ts';

export interface PortChain {
  readonly name: string;
  readonly rules: readonly NftRule[];
  /** The rules as nft text: two chains with equal signatures need no rewrite. */
  readonly signature: string;
  /** Left alone when it exists (a traffic chain: its rules never change, its counts must survive syncs). */
  readonly keep?: boolean;
}

export interface PortPlan extends PortElements {
  /** Session affinity, round-robin and consistent-hash only: the port's own chains. */
  readonly chains: readonly PortChain[];
  /** Session affinity: per-endpoint sets of recent clients; balancing: its slot maps. */
  readonly sets: readonly NftSetLike[];
  /** The shared pickers this port's frontends go to. */
  readonly pickers: readonly PickerSpec[];
}

export interface PlanContext extends PickerContext {
  /** The node's IP of this family ('' when unknown): a source range holding it admits the node (firewall.ts). */
  readonly nodeIP: string;
  /** --service-traffic-metrics: each port gets its traffic chains and map elements (traffic.ts). */
  readonly serviceTraffic?: boolean;
  /** Loopback node ports (KubeProxyNFTablesLocalhostNodePorts): each node port goes in @localhost-nodeports. */
  readonly localhostNodePorts?: boolean;
  /** --load-balancing: the node default for Services without the annotation. */
  readonly loadBalancing?: LoadBalancing;
}

/** The algorithm a port is programmed with (undefined: the shared pickers' numgen random). */
export function portAlgorithm(ctx: PlanContext, p: ServicePortInfo): OwnAlgorithm | undefined {
  // ClientIP affinity wins, as upstream; a port that asks nothing costs one comparison.
  if (p.sessionAffinity === 'ClientIP' || (p.loadBalancingAsked === undefined && ctx.loadBalancing === undefined))
    return undefined;
  const a = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, p.loadBalancingAsked, ctx.loadBalancing).algorithm;
  return isOwnAlgorithm(a) ? a : undefined;
}

/** Endpoints used by traffic to the cluster IP, and by traffic from outside. */
export function endpointSets(
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
): { internal: readonly EndpointInfo[]; external: readonly EndpointInfo[] } {
  const cluster = s?.cluster ?? [];
  const local = s?.local ?? [];
  return { internal: p.internalPolicyLocal ? local : cluster, external: p.externalPolicyLocal ? local : cluster };
}

const proto = (p: ServicePortInfo): string => p.protocol.toLowerCase();

type Guard = (r: RuleBuilder) => RuleBuilder;
const unguarded: Guard = (r) => r;

/**
 * Session affinity (ClientIP), as upstream does it: a client seen recently by an endpoint
 * (in that endpoint's set, with the Service's timeout) goes back there; a new one picks an
 * endpoint at random (rule i matches with probability 1/(N-i), so each is chosen with 1/N)
 * and is recorded in its set. The sets grow with the endpoints of affinity Services only.
 */
function affinityRules(
  ctx: PlanContext,
  chain: string,
  p: ServicePortInfo,
  eps: readonly EndpointInfo[],
  guard: Guard = unguarded,
): NftRule[] {
  const t = ctx.traits;
  const r = (): RuleBuilder => guard(rule(t.nft, chain));
  const pr = proto(p);
  const rules = eps.map((e) =>
    r().inSet([t.saddr], affinitySet(p, e)).match('meta l4proto', pr).dnat(e.ip, e.port).build(),
  );
  eps.forEach((e, i) => {
    const b = i < eps.length - 1 ? r().match(`numgen random mod ${eps.length - i}`, 0) : r();
    rules.push(b.update(affinitySet(p, e), [t.saddr]).match('meta l4proto', pr).dnat(e.ip, e.port).build());
  });
  return rules;
}

/** The chains and sets of a Service with session affinity. */
function affinityObjects(
  ctx: PlanContext,
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
): { chains: PortChain[]; sets: NftSetLike[] } {
  const t = ctx.traits;
  const cluster = s?.cluster ?? [];
  const local = s?.local ?? [];
  const { internal } = endpointSets(p, s);
  const svc = serviceChain(p);
  const chains = [portChain(svc, [...internalMarkRules(ctx, svc), ...affinityRules(ctx, svc, p, internal)])];
  if (p.externallyAccessible) {
    const ext = externalChain(p);
    const mark = (b: RuleBuilder): NftRule => b.setMarkOr(ctx.masqueradeMark).build();
    const rules: NftRule[] = [];
    if (!p.externalPolicyLocal) rules.push(mark(rule(t.nft, ext)), ...affinityRules(ctx, ext, p, cluster));
    else {
      // externalTrafficPolicy=Local: upstream's short-circuit for local pods and the node.
      if (cluster.length > 0) {
        if (ctx.detectLocal) rules.push(...affinityRules(ctx, ext, p, cluster, (b) => localTraffic(ctx, b)));
        rules.push(mark(rule(t.nft, ext).fibSaddrLocal()));
        rules.push(...affinityRules(ctx, ext, p, cluster, (b) => b.fibSaddrLocal()));
      }
      rules.push(...affinityRules(ctx, ext, p, local));
    }
    chains.push(portChain(ext, rules));
  }
  const seen = new Set<string>();
  const sets: NftSetLike[] = [];
  for (const e of [...cluster, ...local]) {
    if (seen.has(e.key)) continue;
    seen.add(e.key);
    sets.push({
      kind: 'set',
      name: affinitySet(p, e),
      key: [t.addrType],
      flags: ['dynamic', 'timeout'],
      timeoutMs: p.stickyMaxAgeSeconds * 1000,
    });
  }
  return { chains, sets };
}

export function planPort(ctx: PlanContext, p: ServicePortInfo, s: EndpointSelection | undefined): PortPlan {
  const cluster = s?.cluster ?? [];
  const local = s?.local ?? [];
  const { internal, external } = endpointSets(p, s);
  const pr = proto(p);
  const out: Contribution[] = [];
  const pickers: PickerSpec[] = [];
  const algorithm = portAlgorithm(ctx, p);
  // Session affinity and round-robin/consistent-hash: the port's own chains instead of the pickers.
  const ownChains = p.sessionAffinity === 'ClientIP' || algorithm !== undefined;
  const frontends = [...p.externalIPs, ...p.loadBalancerVIPs];

  out.push(setElement(SET.clusterIPs, [p.clusterIP]));

  // Frontend -> picker (or the port's own chain), and the frontend's endpoints in the picker's maps.
  const route = (vmap: string, keys: readonly (string | number)[][], spec: PickerSpec, ownChain: string): void => {
    if (keys.length === 0) return;
    if (!ownChains) pickers.push(spec);
    const nodePort = spec.kind === 'nodeport' || spec.kind === 'nodeport-local';
    const verdict: Verdict = { verdict: 'goto', chain: ownChains ? ownChain : pickerName(spec) };
    for (const key of keys) {
      const text = keyText(key);
      out.push(mapElement(vmap, key, verdict, text));
      if (ownChains) continue;
      if ('count' in spec)
        frontendSlots(
          out,
          endpointsMapName(nodePort, false, spec.count),
          key,
          text,
          spec.kind === 'internal' ? internal : external,
        );
      else {
        frontendSlots(out, endpointsMapName(nodePort, false, spec.local), key, text, local);
        frontendSlots(out, endpointsMapName(nodePort, true, spec.cluster), key, text, cluster);
      }
    }
  };
  // The names of a Service's own chains cost a hash: only affinity and balancing Services have them.
  if (internal.length > 0)
    route(
      SET.serviceIPs,
      [[p.clusterIP, pr, p.port]],
      { kind: 'internal', count: internal.length },
      ownChains ? serviceChain(p) : '',
    );
  if (p.externallyAccessible) {
    const ext = ownChains ? externalChain(p) : '';
    const nodePorts = p.nodePort > 0 ? [[pr, p.nodePort]] : [];
    const addrs = frontends.map((ip) => [ip, pr, p.port]);
    if (!p.externalPolicyLocal) {
      if (cluster.length > 0) {
        route(SET.serviceIPs, addrs, { kind: 'external', count: cluster.length }, ext);
        route(SET.serviceNodePorts, nodePorts, { kind: 'nodeport', count: cluster.length }, ext);
      }
    } else if (local.length > 0 || cluster.length > 0) {
      route(SET.serviceIPs, addrs, { kind: 'external-local', local: local.length, cluster: cluster.length }, ext);
      route(
        SET.serviceNodePorts,
        nodePorts,
        { kind: 'nodeport-local', local: local.length, cluster: cluster.length },
        ext,
      );
    }
  }

  noEndpointAndFirewall(ctx, p, s, out);

  const own: { chains: PortChain[]; sets: NftSetLike[] } =
    algorithm !== undefined
      ? balancedObjects(ctx, p, s, algorithm, out)
      : ownChains
        ? affinityObjects(ctx, p, s)
        : { chains: [], sets: [] };
  if (ctx.serviceTraffic) {
    const traffic = trafficPlan(ctx.traits, p);
    own.chains.push(...traffic.chains);
    out.push(...traffic.contributions);
  }
  // hairpin: ip . ip for every endpoint this node may send to (the model's list, not a copy).
  return { chains: own.chains, sets: own.sets, pickers, contributions: out, hairpin: s?.allReachable ?? [] };
}

/** The no-endpoint verdicts, loopback node ports and firewall elements of a port. */
function noEndpointAndFirewall(
  ctx: PlanContext,
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
  out: Contribution[],
): void {
  const { internal, external } = endpointSets(p, s);
  const pr = proto(p);
  const frontends = [...p.externalIPs, ...p.loadBalancerVIPs];
  // Frontends with nothing to send to: reject when the Service has no endpoint at all,
  // drop when it has some but none this traffic may use (upstream's choice).
  const hasEndpoints = (s?.allReachable.length ?? 0) > 0 || (s?.hasAnyEndpoints ?? false);
  const none: Verdict = hasEndpoints ? { verdict: 'drop' } : { verdict: 'goto', chain: CHAIN.reject };
  if (internal.length === 0) out.push(mapElement(SET.noEndpointServices, [p.clusterIP, pr, p.port], none));
  if (p.externallyAccessible && external.length === 0) {
    for (const ip of frontends) out.push(mapElement(SET.noEndpointServices, [ip, pr, p.port], none));
    if (p.nodePort > 0) out.push(mapElement(SET.noEndpointNodePorts, [pr, p.nodePort], none));
  }

  if (ctx.localhostNodePorts && p.nodePort > 0 && p.protocol !== 'TCP')
    out.push(setElement(SET.localhostNodePorts, [pr, p.nodePort]));

  if (p.loadBalancerSourceRanges.length > 0 && p.loadBalancerVIPs.length > 0) {
    const sources = firewallSources(p.loadBalancerSourceRanges, p.loadBalancerVIPs, ctx.nodeIP);
    for (const vip of p.loadBalancerVIPs) {
      out.push(setElement(SET.firewallProtected, [vip, pr, p.port]));
      for (const range of sources) out.push(setElement(SET.firewallAllow, [vip, pr, p.port, range]));
    }
  }
}

/** A balancing port's chains and maps (balancing.ts); its map elements go to `out`. */
function balancedObjects(
  ctx: PlanContext,
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
  algorithm: OwnAlgorithm,
  out: Contribution[],
): { chains: PortChain[]; sets: NftSetLike[] } {
  const b = balancingObjects(ctx, p, s, algorithm);
  out.push(...b.contributions);
  return { chains: b.chains.map((c) => portChain(c.name, c.rules)), sets: b.maps };
}

/** `map frontend . i : endpoint i` for each endpoint: one contribution for all of them (none when there are none). */
function frontendSlots(
  out: Contribution[],
  map: string,
  frontend: readonly (string | number)[],
  frontendText: string,
  eps: readonly EndpointInfo[],
): void {
  if (eps.length > 0) out.push(slots(map, frontend, frontendText, eps));
}

function portChain(name: string, rules: NftRule[]): PortChain {
  return { name, rules, signature: rules.map((r) => r.text ?? '').join('\n') };
}
