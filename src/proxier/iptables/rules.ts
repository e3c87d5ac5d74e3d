// One service port's rules, as upstream's syncProxyRules writes them inside its loop over
// service ports (pkg/proxy/iptables/proxier.go): the captures in the shared chains
// (KUBE-SERVICES, KUBE-NODEPORTS, the filter chains' REJECT/DROP and firewall rules), and the
// port's own chains KUBE-SVC/SVL (pick an endpoint), KUBE-EXT (external traffic, with the
// short-circuit for eTP=Local), KUBE-FW (loadBalancerSourceRanges) and KUBE-SEP (hairpin
// masquerade and DNAT). Pure, and independent of every other Service.

import { LOAD_BALANCING_SUPPORT } from '../types.ts';
import {
  resolveLoadBalancing,
  type EndpointInfo,
  type EndpointSelection,
  type ServicePortInfo,
} from '../../model/index.ts';
import type { IptRule, IptTable, Match, Target } from '../../netlink/nftables/iptables/rule.ts';
import { cidrContains, parseCIDR, parseIP } from '../../base/ip.ts';
import { ifLocal, ifNotLocal } from './detect-local.ts';
import {
  Chain,
  NfacctCounter,
  endpointChainName,
  isServicePortChain,
  portChainNames,
  type PortChainNames,
} from './names.ts';
import { endpointPick } from './probability.ts';
import type { IptChain, IptContext, ServicePortFragment } from './types.ts';

const MARK_MASQ: Target = { t: 'jump', chain: Chain.MARK_MASQ };
const jump = (chain: string): Target => ({ t: 'jump', chain });
const comment = (text: string): Match => ({ m: 'comment', text });

/** What upstream decides per service port before writing (its local variables, named the same). */
interface Plan {
  readonly n: PortChainNames;
  readonly cluster: readonly EndpointInfo[];
  readonly local: readonly EndpointInfo[];
  readonly hasEndpoints: boolean;
  readonly internalChain: string;
  readonly hasInternalEndpoints: boolean;
  readonly externalPolicyChain: string;
  readonly hasExternalEndpoints: boolean;
  readonly usesExternalChain: boolean;
  readonly usesClusterChain: boolean;
  readonly usesLocalChain: boolean;
  readonly usesFWChain: boolean;
  readonly loadBalancerChain: string;
}

function plan(p: ServicePortInfo, s: EndpointSelection | undefined): Plan {
  const n = portChainNames(p);
  const cluster = s?.cluster ?? [];
  const local = s?.local ?? [];
  const hasEndpoints = (s?.allReachable.length ?? 0) > 0 || (s?.hasAnyEndpoints ?? false);
  const usesFWChain = hasEndpoints && p.loadBalancerVIPs.length > 0 && p.loadBalancerSourceRanges.length > 0;
  return {
    n,
    cluster,
    local,
    hasEndpoints,
    internalChain: p.internalPolicyLocal ? n.svl : n.svc,
    hasInternalEndpoints: hasEndpoints && (!p.internalPolicyLocal || local.length > 0),
    externalPolicyChain: p.externalPolicyLocal ? n.svl : n.svc,
    hasExternalEndpoints: hasEndpoints && (!p.externalPolicyLocal || local.length > 0),
    usesExternalChain: hasEndpoints && p.externallyAccessible,
    usesClusterChain: cluster.length > 0 && p.usesClusterEndpoints,
    usesLocalChain: local.length > 0 && p.usesLocalEndpoints,
    usesFWChain,
    loadBalancerChain: usesFWChain ? n.fw : n.ext,
  };
}

/** Collects rules: shared ones in order, own chains in the order upstream declares them. */
class Writer {
  readonly shared: IptRule[] = [];
  private readonly own = new Map<string, IptRule[]>();

  add(table: IptTable, chain: string, matches: Match[], target: Target): void {
    this.shared.push({ table, chain, matches, target });
  }

  chain(name: string): void {
    if (!this.own.has(name)) this.own.set(name, []);
  }

  /** A rule in one of the port's own chains (which exists from its first rule on). */
  rule(chain: string, matches: Match[], target: Target): void {
    this.chain(chain);
    this.own.get(chain)!.push({ table: 'nat', chain, matches, target });
  }

  /**
   * The own chains. A chain a rule jumps to is declared even when it got no rule: upstream
   * assumes the model never asks for that (its restore would fail); an empty chain only
   * lets the packet go on.
   */
  chains(): IptChain[] {
    const declareTarget = (r: IptRule): void => {
      if (r.target.t === 'jump' && !this.own.has(r.target.chain) && isServicePortChain(r.target.chain))
        this.chain(r.target.chain);
    };
    for (const r of this.shared) declareTarget(r);
    for (const rules of [...this.own.values()]) for (const r of rules) declareTarget(r);
    return [...this.own].map(([name, rules]) => ({ table: 'nat', name, rules }));
  }
}

/** The rules one service port contributes (upstream's loop body for that port). */
export function servicePortRules(
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
  ctx: IptContext,
): ServicePortFragment {
  const pl = plan(p, s);
  const w = new Writer();
  sharedRules(w, p, pl, ctx);
  ownChains(w, p, s, pl, ctx);
  return { id: p.id, chains: w.chains(), shared: w.shared };
}

/** `-m comment` then `-m PROTO -p PROTO -d IP --dport PORT`, upstream's capture of one frontend. */
function capture(text: string, proto: PortChainNames['protocol'], ip: string, port: number): Match[] {
  return [comment(text), { m: 'proto', proto }, { m: 'dst', cidr: ip }, { m: 'dport', proto, port }];
}

function sharedRules(w: Writer, p: ServicePortInfo, pl: Plan, ctx: IptContext): void {
  const { n, hasEndpoints, hasInternalEndpoints, hasExternalEndpoints } = pl;
  const pr = n.protocol;
  // REJECT when the Service has no endpoint at all; DROP when a Local policy finds none here.
  const noEndpoints = !hasEndpoints;
  const filterTarget: Target = { t: noEndpoints ? 'REJECT' : 'DROP' };
  const filterComment = `${n.portName} ${noEndpoints ? 'has no endpoints' : 'has no local endpoints'}`;

  if (hasInternalEndpoints)
    w.add('nat', Chain.SERVICES, capture(`${n.portName} cluster IP`, pr, p.clusterIP, p.port), jump(pl.internalChain));
  else w.add('filter', Chain.SERVICES, capture(filterComment, pr, p.clusterIP, p.port), filterTarget);

  for (const ip of p.externalIPs) {
    if (hasEndpoints) w.add('nat', Chain.SERVICES, capture(`${n.portName} external IP`, pr, ip, p.port), jump(n.ext));
    if (!hasExternalEndpoints)
      w.add('filter', Chain.EXTERNAL_SERVICES, capture(filterComment, pr, ip, p.port), filterTarget);
  }

  for (const ip of p.loadBalancerVIPs) {
    if (hasEndpoints)
      w.add(
        'nat',
        Chain.SERVICES,
        capture(`${n.portName} loadbalancer IP`, pr, ip, p.port),
        jump(pl.loadBalancerChain),
      );
    if (pl.usesFWChain) {
      w.add('filter', Chain.PROXY_FIREWALL, capture(`${n.portName} traffic not accepted by ${n.fw}`, pr, ip, p.port), {
        t: 'DROP',
      });
    }
  }
  if (!hasExternalEndpoints) {
    for (const ip of p.loadBalancerVIPs)
      w.add('filter', Chain.EXTERNAL_SERVICES, capture(filterComment, pr, ip, p.port), filterTarget);
  }

  if (p.nodePort !== 0) {
    // Node ports are not subject to loadBalancerSourceRanges (upstream cannot change that).
    const port: Match = { m: 'dport', proto: pr, port: p.nodePort };
    if (hasEndpoints) {
      // Upstream counts localhost node port packets first, in a rule of their own (IPv4 only).
      if (ctx.localhostNodePortsCounter) {
        const counted: Match[] = [comment(n.portName), { m: 'proto', proto: pr }, { m: 'dst', cidr: '127.0.0.0/8' }];
        counted.push(port, { m: 'nfacct', name: NfacctCounter.LOCALHOST_ACCEPTED });
        w.add('nat', Chain.NODE_PORTS, counted, jump(n.ext));
      }
      w.add('nat', Chain.NODE_PORTS, [comment(n.portName), { m: 'proto', proto: pr }, port], jump(n.ext));
    }
    if (!hasExternalEndpoints) {
      const local: Match = { m: 'addrtype', dir: 'dst', type: 'LOCAL' };
      w.add(
        'filter',
        Chain.EXTERNAL_SERVICES,
        [comment(filterComment), local, { m: 'proto', proto: pr }, port],
        filterTarget,
      );
    }
  }

  if (p.healthCheckNodePort !== 0) {
    // Accepted whether or not this node has local endpoints: the load balancer must hear "no".
    const hc: Match[] = [
      comment(`${n.portName} health check node port`),
      { m: 'proto', proto: 'tcp' },
      { m: 'dport', proto: 'tcp', port: p.healthCheckNodePort },
    ];
    w.add('filter', Chain.NODE_PORTS, hc, { t: 'ACCEPT' });
  }
}

function ownChains(w: Writer, p: ServicePortInfo, s: EndpointSelection | undefined, pl: Plan, ctx: IptContext): void {
  const { n } = pl;
  // Internal traffic: masquerade what does not come from a local pod (or everything).
  if (pl.hasInternalEndpoints) {
    const cip = capture(`${n.portName} cluster IP`, n.protocol, p.clusterIP, p.port);
    const notLocal = ifNotLocal(ctx.detectLocal);
    if (ctx.masqueradeAll) w.rule(pl.internalChain, cip, MARK_MASQ);
    else if (notLocal) w.rule(pl.internalChain, [...cip, ...notLocal], MARK_MASQ);
  }
  if (pl.usesExternalChain) externalChain(w, p, pl, ctx);
  if (pl.usesFWChain) firewallChain(w, p, pl, ctx);
  // Each endpoint's chain name once (a sha256 each; the service chains and the endpoint's own chain all need it).
  const seps = new Map<string, string>();
  const sepOf = (ep: EndpointInfo): string => {
    let name = seps.get(ep.key);
    if (name === undefined) seps.set(ep.key, (name = endpointChainName(n, ep)));
    return name;
  };
  if (pl.usesClusterChain) endpointRules(w, p, pl.n, n.svc, pl.cluster, sepOf, ctx);
  if (pl.usesLocalChain) endpointRules(w, p, pl.n, n.svl, pl.local, sepOf, ctx);
  for (const ep of s?.allReachable ?? []) endpointChain(w, p, pl.n, ep, sepOf(ep), ctx);
}

function externalChain(w: Writer, p: ServicePortInfo, pl: Plan, ctx: IptContext): void {
  const { n } = pl;
  w.chain(n.ext);
  if (!p.externalPolicyLocal) {
    // Cluster policy may cross nodes: masquerade.
    w.rule(n.ext, [comment(`masquerade traffic for ${n.portName} external destinations`)], MARK_MASQ);
  } else {
    // Pods reaching an external address are treated as if they went out and came back:
    // neither traffic policy applies to them.
    const local = ifLocal(ctx.detectLocal);
    if (local) w.rule(n.ext, [comment(`pod traffic for ${n.portName} external destinations`), ...local], jump(n.svc));
    // The node itself: its source is a local address (the VIP), so masquerade, and send it
    // to the cluster chain.
    const fromNode: Match = { m: 'addrtype', dir: 'src', type: 'LOCAL' };
    w.rule(n.ext, [comment(`masquerade LOCAL traffic for ${n.portName} external destinations`), fromNode], MARK_MASQ);
    w.rule(n.ext, [comment(`route LOCAL traffic for ${n.portName} external destinations`), fromNode], jump(n.svc));
  }
  if (pl.hasExternalEndpoints) w.rule(n.ext, [], jump(pl.externalPolicyChain));
}

function firewallChain(w: Writer, p: ServicePortInfo, pl: Plan, ctx: IptContext): void {
  const { n } = pl;
  const text = `${n.portName} loadbalancer IP`;
  const node = ctx.nodeIP === '' ? undefined : parseIP(ctx.nodeIP);
  let allowFromNode = false;
  for (const range of p.loadBalancerSourceRanges) {
    w.rule(n.fw, [comment(text), { m: 'src', cidr: range }], jump(n.ext));
    const c = parseCIDR(range);
    if (node && c && c.family === node.family && cidrContains(c, node)) allowFromNode = true;
  }
  // A VIP is often a local address of the node: the node's own requests to it come back
  // with the VIP as source and must pass.
  if (allowFromNode)
    for (const vip of p.loadBalancerVIPs) w.rule(n.fw, [comment(text), { m: 'src', cidr: vip }], jump(n.ext));
  // Not DNATed here: KUBE-PROXY-FIREWALL drops it in filter.
  w.rule(n.fw, [comment(`other traffic to ${n.portName} will be dropped by KUBE-PROXY-FIREWALL`)], { t: 'none' });
}

/**
 * upstream writeServiceToEndpointRules: affinity checks first, then the pick (random as
 * upstream, or round-robin where the Service or the node asks for it).
 */
function endpointRules(
  w: Writer,
  p: ServicePortInfo,
  n: PortChainNames,
  chain: string,
  eps: readonly EndpointInfo[],
  sepOf: (ep: EndpointInfo) => string,
  ctx: IptContext,
): void {
  w.chain(chain);
  const epComment = (ep: EndpointInfo): Match[] =>
    ctx.largeClusterMode ? [] : [comment(`${n.portName} -> ${ep.key}`)];
  if (p.sessionAffinity === 'ClientIP') {
    for (const ep of eps) {
      const sep = sepOf(ep);
      const recent: Match = { m: 'recent', name: sep, mode: 'rcheck', seconds: p.stickyMaxAgeSeconds, reap: true };
      w.rule(chain, [...epComment(ep), recent], jump(sep));
    }
  }
  const roundRobin =
    resolveLoadBalancing(LOAD_BALANCING_SUPPORT.iptables, p.loadBalancingAsked, ctx.loadBalancing).algorithm ===
    'round-robin';
  eps.forEach((ep, i) => {
    const pick: Match[] = i < eps.length - 1 ? [endpointPick(eps.length - i, roundRobin)] : [];
    w.rule(chain, [...epComment(ep), ...pick], jump(sepOf(ep)));
  });
}

/** KUBE-SEP-…: masquerade hairpin traffic (an endpoint reaching itself), remember affinity, DNAT. */
function endpointChain(
  w: Writer,
  p: ServicePortInfo,
  n: PortChainNames,
  ep: EndpointInfo,
  sep: string,
  ctx: IptContext,
): void {
  const base: Match[] = ctx.largeClusterMode ? [] : [comment(n.portName)];
  w.rule(sep, [...base, { m: 'src', cidr: ep.ip }], MARK_MASQ);
  const affinity: Match[] = p.sessionAffinity === 'ClientIP' ? [{ m: 'recent', name: sep, mode: 'set' }] : [];
  w.rule(sep, [...base, ...affinity, { m: 'proto', proto: n.protocol }, { m: 'l4', proto: n.protocol }], {
    t: 'DNAT',
    addr: ep.ip,
    port: ep.port,
  });
}
