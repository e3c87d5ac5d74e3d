// The pure middle of the IPVS mode: what one service port asks of the kernel (virtual servers
// with their real servers, addresses on kube-ipvs0, ipset entries), computed from the model
// alone. Semantics follow upstream's syncProxyRules (pkg/proxy/ipvs/proxier.go):
//
//   ClusterIP:port        one VS, bound on kube-ipvs0; KUBE-CLUSTER-IP entry.
//   externalIP:port       one VS each, bound unless the address is the node's own;
//                         KUBE-EXTERNAL-IP (or -LOCAL with externalTrafficPolicy=Local).
//   LB VIP:port           one VS each, bound likewise; KUBE-LOAD-BALANCER (+ -LOCAL, + -FW,
//                         -SOURCE-CIDR per source range, -SOURCE-IP when a range covers the node).
//   nodeIP:nodePort       one VS per selected node address, never bound; KUBE-NODE-PORT-{TCP,UDP}
//                         (bitmap:port) or -SCTP-HASH (hash:ip,port per node address), + -LOCAL.
//   healthCheckNodePort   KUBE-HEALTH-CHECK-NODE-PORT (not when the node port has no address).
//   local endpoints       KUBE-LOOP-BACK ip,proto:port,ip (hairpin masquerade).
//   eTP=Local, no usable  KUBE-NO-LOCAL-ENDPOINTS ip,proto:port for each external frontend (LB
//   local endpoint        IP, external IP, node address:node port): ours, not upstream's.
//
// Real servers: a VS that serves "internal" traffic (the cluster IP) uses the Local endpoints
// when internalTrafficPolicy=Local, the others when externalTrafficPolicy=Local; as upstream
// (PR 97081), a Local policy with no local endpoint falls back to the cluster endpoints, because
// IPVS cannot tell pod-originated from external traffic the way the nftables mode does. For the
// external frontends the companion rules tell them apart instead: KUBE-NO-LOCAL-ENDPOINTS lists
// the frontends that fell back, and a filter rule drops new connections to them from anything
// but this node's pods and the node itself (rules.ts), as the documented traffic policy asks.

import { cidrContains, isLoopback, parseCIDR, parseIP } from '../../base/ip.ts';
import type { CIDR, IPFamily } from '../../base/ip.ts';
import type { IpsetEntry } from '../../netlink/ipset/index.ts';
import { formatEntry } from '../../netlink/ipset/index.ts';
import type { IpvsAddrKey, IpvsProtocol } from '../../netlink/ipvs/index.ts';
import type {
  EndpointInfo,
  EndpointSelection,
  LoadBalancing,
  NodePortAddresses,
  ServicePortInfo,
} from '../../model/index.ts';
import { SetName } from './names.ts';
import { schedulerFor } from './scheduler.ts';
import type { SetKey } from './names.ts';

/** A virtual server as we want it. */
export interface VsPlan {
  readonly key: string;
  readonly addr: IpvsAddrKey;
  readonly scheduler: string;
  /** IP_VS_SVC_F_* without PERSISTENT (the encoder adds it when timeout > 0). */
  readonly flags: number;
  /** Persistence timeout (ClientIP affinity); 0: none. */
  readonly timeout: number;
  /** Real servers by "ip:port" key (weight 1, masquerade). */
  readonly dests: ReadonlyMap<string, { address: string; port: number }>;
}

export interface EntryPlan {
  readonly set: SetKey;
  readonly key: string;
  readonly entry: IpsetEntry;
}

/** A load-balancer IP:port no range lets the node itself reach (upstream lbNoNodeAccessIPPortProtocolEntries). */
export interface NoNodeAccess {
  readonly ip: string;
  readonly protocol: string;
  readonly port: number;
}

export interface PortPlan {
  readonly vss: readonly VsPlan[];
  /** Addresses to bind on kube-ipvs0. */
  readonly binds: readonly string[];
  readonly entries: readonly EntryPlan[];
  readonly noNodeAccess: readonly NoNodeAccess[];
}

export interface PlanContext {
  readonly family: IPFamily;
  /** --ipvs-scheduler: the scheduler of Services that ask for no algorithm IPVS has. */
  readonly scheduler: string;
  /** --load-balancing, the node's default algorithm (undefined: --ipvs-scheduler). */
  readonly loadBalancing?: LoadBalancing;
  /** False for a scheduler the kernel lacks: ports asking for it keep `scheduler`. Default: all usable. */
  readonly schedulerUsable?: (scheduler: string) => boolean;
  /** Addresses NodePort VSes are made on (node addresses selected by nodePortAddresses). */
  readonly nodePortIPs: readonly string[];
  /** Every local address not on kube-ipvs0: such an external/LB IP is not bound again. */
  readonly nodeAddresses: ReadonlySet<string>;
  /** The node's primary IP ('' when unknown): a source range covering it lets the node reach the LB IP. */
  readonly primaryIP: string;
}

export const vsKey = (a: IpvsAddrKey): string =>
  `${a.protocol.toUpperCase()} ${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
export const destKey = (address: string, port: number): string =>
  address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;

function entry(set: SetKey, e: IpsetEntry): EntryPlan {
  return { set, key: formatEntry(e), entry: e };
}

/**
 * The addresses NodePort VSes are made on, as upstream's syncProxyRules picks them: without
 * CIDRs (matchAll) the node's addresses, every local one but kube-ipvs0's; with CIDRs every
 * address of every interface they contain (GetNodeIPs lists them all), so kube-ipvs0's VIPs
 * too, loopback left out. `bound`: kube-ipvs0's addresses as the sync starts (upstream lists
 * the interfaces before it binds that sync's VIPs). Sorted, without duplicates.
 *
 * Every sync asks about every bound VIP, so answers are remembered per address (for one set of
 * CIDRs); the memory is dropped when it outgrows the addresses asked about (VIPs come and go).
 */
export class NodePortAddressPicker {
  private cidrsText = '';
  private cidrs: CIDR[] = [];
  private readonly known = new Map<string, boolean>();

  pick(npa: NodePortAddresses, nodeAddrs: readonly string[], bound: ReadonlySet<string> | readonly string[]) {
    if (npa.matchAll) return nodeAddrs;
    const text = npa.cidrs.join(',');
    const asked = nodeAddrs.length + ('size' in bound ? bound.size : bound.length);
    if (text !== this.cidrsText || this.known.size > 2 * asked + 1024) {
      this.cidrsText = text;
      this.cidrs = npa.cidrs.map((t) => parseCIDR(t)).filter((c) => c !== undefined);
      this.known.clear();
    }
    const out = new Set<string>();
    for (const a of nodeAddrs) if (this.matches(a)) out.add(a);
    for (const a of bound) if (this.matches(a)) out.add(a);
    return [...out].sort();
  }

  private matches(a: string): boolean {
    let m = this.known.get(a);
    if (m === undefined) {
      const ip = parseIP(a);
      m = ip !== undefined && !isLoopback(ip) && this.cidrs.some((c) => cidrContains(c, ip));
      this.known.set(a, m);
    }
    return m;
  }
}

/** A Local-policy VS has no usable local endpoint but cluster ones to fall back to (PR 97081). */
export function fallsBackToCluster(sel: EndpointSelection | undefined, onlyLocal: boolean): boolean {
  return onlyLocal && sel !== undefined && sel.local.length === 0 && sel.cluster.length > 0;
}

/** Which endpoints a VS sends to (upstream syncEndpoint's onlyNodeLocalEndpoints branch). */
export function destinationsFor(sel: EndpointSelection | undefined, onlyLocal: boolean): readonly EndpointInfo[] {
  if (!sel) return [];
  if (onlyLocal && sel.local.length > 0) return sel.local;
  return sel.cluster;
}

export function planPort(
  info: ServicePortInfo,
  endpoints: readonly EndpointInfo[],
  sel: EndpointSelection | undefined,
  ctx: PlanContext,
): PortPlan {
  const proto = info.protocol.toLowerCase() as IpvsProtocol;
  const vss: VsPlan[] = [];
  const binds: string[] = [];
  const entries: EntryPlan[] = [];
  const noNodeAccess: NoNodeAccess[] = [];
  const { scheduler, flags } = schedulerFor(info, ctx.scheduler, ctx.loadBalancing, ctx.schedulerUsable);
  const timeout = info.sessionAffinity === 'ClientIP' ? info.stickyMaxAgeSeconds : 0;
  const externalFallback = fallsBackToCluster(sel, info.externalPolicyLocal);
  const makeVs = (address: string, port: number, onlyLocal: boolean): VsPlan => {
    const addr: IpvsAddrKey = { family: ctx.family, protocol: proto, address, port };
    const dests = new Map<string, { address: string; port: number }>();
    for (const e of destinationsFor(sel, onlyLocal)) dests.set(destKey(e.ip, e.port), { address: e.ip, port: e.port });
    return { key: vsKey(addr), addr, scheduler, flags, timeout, dests };
  };

  for (const e of endpoints) {
    if (e.isLocal) entries.push(entry(SetName.LOOP_BACK, { ip: e.ip, proto, port: e.port, ip2: e.ip }));
  }

  entries.push(entry(SetName.CLUSTER_IP, { ip: info.clusterIP, proto, port: info.port }));
  vss.push(makeVs(info.clusterIP, info.port, info.internalPolicyLocal));
  binds.push(info.clusterIP);

  for (const ip of info.externalIPs) {
    entries.push(
      entry(info.externalPolicyLocal ? SetName.EXTERNAL_IP_LOCAL : SetName.EXTERNAL_IP, { ip, proto, port: info.port }),
    );
    vss.push(makeVs(ip, info.port, info.externalPolicyLocal));
    if (externalFallback) entries.push(entry(SetName.NO_LOCAL_ENDPOINTS, { ip, proto, port: info.port }));
    if (!ctx.nodeAddresses.has(ip)) binds.push(ip);
  }

  const primary = ctx.primaryIP ? parseIP(ctx.primaryIP) : undefined;
  for (const ip of info.loadBalancerVIPs) {
    const e: IpsetEntry = { ip, proto, port: info.port };
    entries.push(entry(SetName.LOAD_BALANCER, e));
    if (info.externalPolicyLocal) entries.push(entry(SetName.LOAD_BALANCER_LOCAL, e));
    if (info.loadBalancerSourceRanges.length > 0) {
      entries.push(entry(SetName.LOAD_BALANCER_FW, e));
      let allowFromNode = false;
      for (const r of info.loadBalancerSourceRanges) {
        const c = parseCIDR(r);
        if (!c) continue;
        entries.push(
          entry(SetName.LOAD_BALANCER_SOURCE_CIDR, { ip, proto, port: info.port, ip2: c.addr.text, cidr2: c.prefix }),
        );
        if (primary && cidrContains(c, primary)) allowFromNode = true;
      }
      if (allowFromNode) entries.push(entry(SetName.LOAD_BALANCER_SOURCE_IP, { ip, proto, port: info.port, ip2: ip }));
      else noNodeAccess.push({ ip, protocol: proto, port: info.port });
    }
    vss.push(makeVs(ip, info.port, info.externalPolicyLocal));
    if (externalFallback) entries.push(entry(SetName.NO_LOCAL_ENDPOINTS, e));
    if (!ctx.nodeAddresses.has(ip)) binds.push(ip);
  }

  if (info.nodePort !== 0 && ctx.nodePortIPs.length > 0) {
    const local = info.externalPolicyLocal;
    if (proto === 'sctp') {
      for (const ip of ctx.nodePortIPs) {
        const e: IpsetEntry = { ip, proto, port: info.nodePort };
        entries.push(entry(SetName.NODE_PORT_SCTP, e));
        if (local) entries.push(entry(SetName.NODE_PORT_LOCAL_SCTP, e));
      }
    } else {
      const e: IpsetEntry = { port: info.nodePort };
      entries.push(entry(proto === 'tcp' ? SetName.NODE_PORT_TCP : SetName.NODE_PORT_UDP, e));
      if (local) entries.push(entry(proto === 'tcp' ? SetName.NODE_PORT_LOCAL_TCP : SetName.NODE_PORT_LOCAL_UDP, e));
    }
    for (const ip of ctx.nodePortIPs) {
      vss.push(makeVs(ip, info.nodePort, local));
      // The node port's exact addresses (not dst-type LOCAL): others have no VS to protect.
      if (externalFallback) entries.push(entry(SetName.NO_LOCAL_ENDPOINTS, { ip, proto, port: info.nodePort }));
    }
  }

  // As upstream, a port whose node port has no node address to live on (nodePortAddresses
  // matching none) stops there: no health check entry either.
  const nodePortHomeless = info.nodePort !== 0 && ctx.nodePortIPs.length === 0;
  if (info.healthCheckNodePort !== 0 && !nodePortHomeless)
    entries.push(entry(SetName.HEALTH_CHECK_NODE_PORT, { port: info.healthCheckNodePort }));

  for (const ip of binds) entries.push(entry(SetName.IPVS_IPS, { ip }));
  return { vss, binds, entries, noNodeAccess };
}
