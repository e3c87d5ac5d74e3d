// The userspace mode's rules, as upstream's userspace proxier wrote them (pkg/proxy/userspace,
// iptablesInit and the *PortalArgs functions, removed in 1.26): every frontend of a service
// port (cluster IP, external IPs, load-balancer IPs, node port) is sent to the port of the
// proxy socket that serves it.
//
//   nat PREROUTING -> KUBE-PORTALS-CONTAINER   traffic from pods and the network: REDIRECT to the
//                  -> KUBE-NODEPORT-CONTAINER  proxy port (DNAT to the bind address when it is one)
//   nat OUTPUT     -> KUBE-PORTALS-HOST        traffic from the node itself: DNAT to the node's
//                  -> KUBE-NODEPORT-HOST       address and the proxy port (REDIRECT would answer
//                                              from the wrong address, upstream found)
//   filter INPUT   -> KUBE-NODEPORT-NON-LOCAL  accepts new connections to the proxy ports, for
//                                              hosts whose INPUT policy drops
//
// Pure: what a service port's rules are depends on it, its proxy port and the RuleContext.

import type { IPFamily } from '../../base/ip.ts';
import type { ServicePortInfo } from '../../model/index.ts';
import type { IptRule, JumpRule, L4Proto, Match, Target } from '../../netlink/nftables/iptables/rule.ts';

/** Upstream's chain names. */
export const Chain = {
  CONTAINER_PORTALS: 'KUBE-PORTALS-CONTAINER',
  HOST_PORTALS: 'KUBE-PORTALS-HOST',
  CONTAINER_NODE_PORTS: 'KUBE-NODEPORT-CONTAINER',
  HOST_NODE_PORTS: 'KUBE-NODEPORT-HOST',
  NON_LOCAL_NODE_PORTS: 'KUBE-NODEPORT-NON-LOCAL',
} as const;

export const CHAINS: readonly { table: 'nat' | 'filter'; name: string }[] = [
  { table: 'nat', name: Chain.CONTAINER_PORTALS },
  { table: 'nat', name: Chain.HOST_PORTALS },
  { table: 'nat', name: Chain.CONTAINER_NODE_PORTS },
  { table: 'nat', name: Chain.HOST_NODE_PORTS },
  { table: 'filter', name: Chain.NON_LOCAL_NODE_PORTS },
];

const CHAIN_NAMES: ReadonlySet<string> = new Set(Object.values(Chain));

/** Chains this mode owns (the jumps to them are ours too). */
export const isUserspaceChain = (_table: string, chain: string): boolean => CHAIN_NAMES.has(chain);

const PORTALS_COMMENT = 'handle ClusterIPs; NOTE: this must be before the NodePort rules';
const NODE_PORTS_COMMENT = 'handle service NodePorts; NOTE: this must be the last rule in the chain';
const NON_LOCAL_COMMENT = 'Ensure that non-local NodePort traffic can flow';

/**
 * The jumps from the built-in chains, top to bottom per chain: the portal jump before the
 * node-port one (which matches every local address, so it must come second).
 */
export function jumps(): JumpRule[] {
  const comment = (text: string): Match => ({ m: 'comment', text });
  const local: Match = { m: 'addrtype', dir: 'dst', type: 'LOCAL' };
  const jump = (table: 'nat' | 'filter', chain: JumpRule['chain'], matches: Match[], to: string): JumpRule => ({
    table,
    chain,
    matches,
    target: { t: 'jump', chain: to },
  });
  return [
    jump('nat', 'PREROUTING', [comment(PORTALS_COMMENT)], Chain.CONTAINER_PORTALS),
    jump('nat', 'PREROUTING', [local, comment(NODE_PORTS_COMMENT)], Chain.CONTAINER_NODE_PORTS),
    jump('nat', 'OUTPUT', [comment(PORTALS_COMMENT)], Chain.HOST_PORTALS),
    jump('nat', 'OUTPUT', [local, comment(NODE_PORTS_COMMENT)], Chain.HOST_NODE_PORTS),
    jump('filter', 'INPUT', [comment(NON_LOCAL_COMMENT)], Chain.NON_LOCAL_NODE_PORTS),
  ];
}

export interface RuleContext {
  readonly family: IPFamily;
  /** The address the proxy sockets bind: '0.0.0.0' / '::' (any) or --bind-address. */
  readonly listenIP: string;
  /**
   * Where traffic from the node itself is DNATed (upstream's hostIP): the bind address when it
   * is a specific one, else the node's primary IP of this family; '' when there is none (then
   * the node's own traffic to Services is not redirected, and the sync says so).
   */
  readonly hostIP: string;
}

export const isAnyAddress = (ip: string): boolean => ip === '0.0.0.0' || ip === '::';

/** The node's address for the host rules: the bind address when specific, else the node's primary IP. */
export function hostIPOf(listenIP: string, nodeIP: string): string {
  return isAnyAddress(listenIP) ? nodeIP : listenIP;
}

/** upstream's ServicePortName.String() as its userspace proxier printed it: "ns/name:port" ("ns/name:" unnamed). */
export function portalComment(p: Pick<ServicePortInfo, 'namespace' | 'name' | 'portName'>): string {
  return `${p.namespace}/${p.name}:${p.portName}`;
}

const protoOf = (p: ServicePortInfo): L4Proto => (p.protocol === 'UDP' ? 'udp' : 'tcp');

/** The rules of one service port whose proxy socket listens on `proxyPort`. SCTP ports have none. */
export function servicePortRules(p: ServicePortInfo, proxyPort: number, ctx: RuleContext): IptRule[] {
  if (p.protocol === 'SCTP') return [];
  const proto = protoOf(p);
  const comment = portalComment(p);
  const base = (dst: string | undefined, port: number): Match[] => [
    ...(dst === undefined ? [] : [{ m: 'dst', cidr: dst } as const]),
    { m: 'proto', proto },
    { m: 'comment', text: comment },
    { m: 'dport', proto, port },
  ];
  const toProxy: Target = isAnyAddress(ctx.listenIP)
    ? { t: 'REDIRECT', port: proxyPort }
    : { t: 'DNAT', addr: ctx.listenIP, port: proxyPort };
  const hostOk = ctx.hostIP !== '';
  const toHost: Target = { t: 'DNAT', addr: ctx.hostIP, port: proxyPort };
  const nat = (chain: string, matches: Match[], target: Target): IptRule => ({ table: 'nat', chain, matches, target });
  const out: IptRule[] = [];

  // A portal that is not external: the cluster IP and the load balancer's IPs.
  const portal = (ip: string): void => {
    out.push(nat(Chain.CONTAINER_PORTALS, base(ip, p.port), toProxy));
    if (hostOk) out.push(nat(Chain.HOST_PORTALS, base(ip, p.port), toHost));
  };
  portal(p.clusterIP);
  // External IPs: from outside the node's bridges (physdev), or to an address of the node's own;
  // from the node itself only when the address is local.
  const local: Match = { m: 'addrtype', dir: 'dst', type: 'LOCAL' };
  for (const ip of p.externalIPs) {
    out.push(nat(Chain.CONTAINER_PORTALS, [...base(ip, p.port), { m: 'physdevNotIsIn' }], toProxy));
    out.push(nat(Chain.CONTAINER_PORTALS, [...base(ip, p.port), local], toProxy));
    if (hostOk) out.push(nat(Chain.HOST_PORTALS, [...base(ip, p.port), local], toHost));
  }
  for (const ip of p.loadBalancerVIPs) portal(ip);
  if (p.nodePort !== 0) {
    out.push(nat(Chain.CONTAINER_NODE_PORTS, base(undefined, p.nodePort), toProxy));
    if (hostOk) out.push(nat(Chain.HOST_NODE_PORTS, base(undefined, p.nodePort), toHost));
    // Upstream wrote `-m state --state NEW`; the dialect encodes the conntrack match, which
    // matches the same packets (iptables-save prints `-m conntrack --ctstate NEW`).
    out.push({
      table: 'filter',
      chain: Chain.NON_LOCAL_NODE_PORTS,
      matches: [...base(undefined, proxyPort), { m: 'ctstate', states: ['NEW'] }],
      target: { t: 'ACCEPT' },
    });
  }
  return out;
}
