// The names, types and comments of the kernel objects upstream's IPVS mode uses, transcribed
// from kubernetes pkg/proxy/ipvs (ipset.go, proxier.go) so that operators' tooling and
// runbooks (`ipset list KUBE-CLUSTER-IP`, `iptables-save | grep KUBE-`) keep working.

import type { IPFamily } from '../../base/ip.ts';
import type { IpsetType } from '../../netlink/ipset/index.ts';

/** The dummy link every service VIP is bound on. */
export const DUMMY_DEVICE = 'kube-ipvs0';

/**
 * Schedulers the kernel ships (module ip_vs_<name>); upstream accepts any name, we name the unknown one at start-up.
 */
export const KNOWN_SCHEDULERS: readonly string[] = [
  'rr',
  'wrr',
  'lc',
  'wlc',
  'lblc',
  'lblcr',
  'dh',
  'sh',
  'sed',
  'nq',
  'mh',
  'fo',
  'ovf',
  'twos',
];
export const DEFAULT_SCHEDULER = 'rr';

/** Upstream's ipset keys (the IPv4 names); IPv6 names are derived by ipsetName(). */
export const SetName = {
  LOOP_BACK: 'KUBE-LOOP-BACK',
  CLUSTER_IP: 'KUBE-CLUSTER-IP',
  EXTERNAL_IP: 'KUBE-EXTERNAL-IP',
  EXTERNAL_IP_LOCAL: 'KUBE-EXTERNAL-IP-LOCAL',
  LOAD_BALANCER: 'KUBE-LOAD-BALANCER',
  LOAD_BALANCER_FW: 'KUBE-LOAD-BALANCER-FW',
  LOAD_BALANCER_LOCAL: 'KUBE-LOAD-BALANCER-LOCAL',
  LOAD_BALANCER_SOURCE_IP: 'KUBE-LOAD-BALANCER-SOURCE-IP',
  LOAD_BALANCER_SOURCE_CIDR: 'KUBE-LOAD-BALANCER-SOURCE-CIDR',
  NODE_PORT_TCP: 'KUBE-NODE-PORT-TCP',
  NODE_PORT_LOCAL_TCP: 'KUBE-NODE-PORT-LOCAL-TCP',
  NODE_PORT_UDP: 'KUBE-NODE-PORT-UDP',
  NODE_PORT_LOCAL_UDP: 'KUBE-NODE-PORT-LOCAL-UDP',
  NODE_PORT_SCTP: 'KUBE-NODE-PORT-SCTP-HASH',
  NODE_PORT_LOCAL_SCTP: 'KUBE-NODE-PORT-LOCAL-SCTP-HASH',
  HEALTH_CHECK_NODE_PORT: 'KUBE-HEALTH-CHECK-NODE-PORT',
  IPVS_IPS: 'KUBE-IPVS-IPS',
  /** Ours, not upstream's: see NO_LOCAL_ENDPOINTS in SETS. */
  NO_LOCAL_ENDPOINTS: 'KUBE-NO-LOCAL-ENDPOINTS',
} as const;
export type SetKey = (typeof SetName)[keyof typeof SetName];

export interface SetInfo {
  readonly key: SetKey;
  readonly type: IpsetType;
  /** The set's purpose; also the comment of the iptables rule that matches it. */
  readonly comment: string;
}

/** upstream ipsetInfo, in its order, then ours. */
export const SETS: readonly SetInfo[] = [
  {
    key: SetName.LOOP_BACK,
    type: 'hash:ip,port,ip',
    comment: 'Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose',
  },
  {
    key: SetName.CLUSTER_IP,
    type: 'hash:ip,port',
    comment: 'Kubernetes service cluster ip + port for masquerade purpose',
  },
  {
    key: SetName.EXTERNAL_IP,
    type: 'hash:ip,port',
    comment: 'Kubernetes service external ip + port for masquerade and filter purpose',
  },
  {
    key: SetName.EXTERNAL_IP_LOCAL,
    type: 'hash:ip,port',
    comment: 'Kubernetes service external ip + port with externalTrafficPolicy=local',
  },
  { key: SetName.LOAD_BALANCER, type: 'hash:ip,port', comment: 'Kubernetes service lb portal' },
  {
    key: SetName.LOAD_BALANCER_FW,
    type: 'hash:ip,port',
    comment: 'Kubernetes service load balancer ip + port for load balancer with sourceRange',
  },
  {
    key: SetName.LOAD_BALANCER_LOCAL,
    type: 'hash:ip,port',
    comment: 'Kubernetes service load balancer ip + port with externalTrafficPolicy=local',
  },
  {
    key: SetName.LOAD_BALANCER_SOURCE_IP,
    type: 'hash:ip,port,ip',
    comment: 'Kubernetes service load balancer ip + port + source IP for packet filter purpose',
  },
  {
    key: SetName.LOAD_BALANCER_SOURCE_CIDR,
    type: 'hash:ip,port,net',
    comment: 'Kubernetes service load balancer ip + port + source cidr for packet filter purpose',
  },
  { key: SetName.NODE_PORT_TCP, type: 'bitmap:port', comment: 'Kubernetes nodeport TCP port for masquerade purpose' },
  {
    key: SetName.NODE_PORT_LOCAL_TCP,
    type: 'bitmap:port',
    comment: 'Kubernetes nodeport TCP port with externalTrafficPolicy=local',
  },
  { key: SetName.NODE_PORT_UDP, type: 'bitmap:port', comment: 'Kubernetes nodeport UDP port for masquerade purpose' },
  {
    key: SetName.NODE_PORT_LOCAL_UDP,
    type: 'bitmap:port',
    comment: 'Kubernetes nodeport UDP port with externalTrafficPolicy=local',
  },
  {
    key: SetName.NODE_PORT_SCTP,
    type: 'hash:ip,port',
    comment: "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
  },
  {
    key: SetName.NODE_PORT_LOCAL_SCTP,
    type: 'hash:ip,port',
    comment: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
  },
  { key: SetName.HEALTH_CHECK_NODE_PORT, type: 'bitmap:port', comment: 'Kubernetes health check node port' },
  { key: SetName.IPVS_IPS, type: 'hash:ip', comment: 'Addresses on the ipvs interface' },
  // Our extension (README "Local traffic policy without a local endpoint"): the external
  // frontends whose VS falls back to remote endpoints, which external clients may not reach.
  {
    key: SetName.NO_LOCAL_ENDPOINTS,
    type: 'hash:ip,port',
    comment: 'Kubernetes service external ip + port with externalTrafficPolicy=local and no local endpoint',
  },
];

export const SET_INFO: ReadonlyMap<SetKey, SetInfo> = new Map(SETS.map((s) => [s.key, s]));

/**
 * The kernel name of a set for a family. As upstream: IPv4 keeps "KUBE-", IPv6 becomes
 * "KUBE-6-", cut to ipset's 31 characters (KUBE-6-LOAD-BALANCER-SOURCE-CIDR loses its last R).
 */
export function ipsetName(key: SetKey, family: IPFamily): string {
  if (family === 'IPv4') return key;
  return key.replace(/^KUBE-/, 'KUBE-6-').slice(0, 31);
}

/** Upstream's defaults for every set (utilipset: hashsize 1024, maxelem 65536, port range 0-65535). */
export const DEFAULT_HASH_SIZE = 1024;
export const DEFAULT_MAX_ELEM = 65536;

/** The sysctls upstream's IPVS mode writes (pkg/proxy/ipvs/proxier.go NewProxier). */
export const Sysctl = {
  VS_CONNTRACK: 'net/ipv4/vs/conntrack',
  VS_EXPIRE_NODEST_CONN: 'net/ipv4/vs/expire_nodest_conn',
  VS_EXPIRE_QUIESCENT_TEMPLATE: 'net/ipv4/vs/expire_quiescent_template',
  IP_FORWARD: 'net/ipv4/ip_forward',
  ARP_IGNORE: 'net/ipv4/conf/all/arp_ignore',
  ARP_ANNOUNCE: 'net/ipv4/conf/all/arp_announce',
} as const;
