// An upstream-shaped nftables ruleset, as text for `nft -f`: what kube-proxy's nftables mode
// (pkg/proxy/nftables, via knftables) writes for N ClusterIP Services — a per-Service chain
// `service-HASH-ns/name/tcp/http` ending in `numgen random mod N vmap { i : goto endpoint-… }`,
// a per-endpoint chain with `dnat to IP:port`, and the `service-ips` verdict map pointing at the
// Service chains. Every chain is added then flushed before its rules, as upstream's full sync
// does. Only ClusterIP Services are generated (the benchmark's workload); the fixed chains,
// sets and maps are upstream's.

import { createHash } from 'node:crypto';
import {
  CLUSTER_CIDR,
  ENDPOINTS,
  SERVICE_CIDR,
  SERVICE_PORT,
  TARGET_PORT,
  clusterIP,
  endpointIP,
  extraIP,
  changedService,
  nameOf,
  namespaceOf,
} from './nftables-workload.ts';

export const UPSTREAM_TABLE = 'kube-proxy';
const T = `ip ${UPSTREAM_TABLE}`;

const hash = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 8).toUpperCase();
const portName = (i: number): string => `${namespaceOf(i)}/${nameOf(i)}/tcp/http`;
export const serviceChain = (i: number): string => `service-${hash(`${portName(i)}|svc`)}-${portName(i)}`;
const endpointChain = (i: number, ip: string): string =>
  `endpoint-${hash(`${portName(i)}|${ip}`)}-${portName(i)}__${ip}/${TARGET_PORT}`;

const SKELETON = `add table ${T} { comment "rules for kube-proxy" ; }
add chain ${T} mark-for-masquerade
flush chain ${T} mark-for-masquerade
add rule ${T} mark-for-masquerade mark set mark or 0x4000
add chain ${T} masquerading
flush chain ${T} masquerading
add rule ${T} masquerading mark and 0x4000 == 0 return
add rule ${T} masquerading mark set mark xor 0x4000
add rule ${T} masquerading masquerade fully-random
add set ${T} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ${T} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
add map ${T} firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ${T} no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ${T} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ${T} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ${T} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
flush set ${T} cluster-ips
flush set ${T} nodeport-ips
flush map ${T} firewall-ips
flush map ${T} no-endpoint-services
flush map ${T} no-endpoint-nodeports
flush map ${T} service-ips
flush map ${T} service-nodeports
add chain ${T} services
flush chain ${T} services
add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ${T} services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add chain ${T} service-endpoints-check
flush chain ${T} service-endpoints-check
add rule ${T} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add chain ${T} nodeport-endpoints-check
flush chain ${T} nodeport-endpoints-check
add rule ${T} nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add chain ${T} firewall-check
flush chain ${T} firewall-check
add rule ${T} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add chain ${T} reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
flush chain ${T} reject-chain
add rule ${T} reject-chain reject
add chain ${T} cluster-ips-check
flush chain ${T} cluster-ips-check
add rule ${T} cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ${T} cluster-ips-check ip daddr { ${SERVICE_CIDR} } drop comment "Drop traffic to unallocated ClusterIPs"
add chain ${T} filter-prerouting { type filter hook prerouting priority -110 ; }
flush chain ${T} filter-prerouting
add rule ${T} filter-prerouting ct state new jump firewall-check
add chain ${T} filter-input { type filter hook input priority -110 ; }
flush chain ${T} filter-input
add rule ${T} filter-input ct state new jump nodeport-endpoints-check
add rule ${T} filter-input ct state new jump service-endpoints-check
add chain ${T} filter-forward { type filter hook forward priority -110 ; }
flush chain ${T} filter-forward
add rule ${T} filter-forward ct state new jump service-endpoints-check
add rule ${T} filter-forward ct state new jump cluster-ips-check
add chain ${T} filter-output { type filter hook output priority -110 ; }
flush chain ${T} filter-output
add rule ${T} filter-output ct state new jump service-endpoints-check
add rule ${T} filter-output ct state new jump firewall-check
add chain ${T} filter-output-post-dnat { type filter hook output priority -90 ; }
flush chain ${T} filter-output-post-dnat
add rule ${T} filter-output-post-dnat ct state new jump cluster-ips-check
add chain ${T} nat-prerouting { type nat hook prerouting priority -100 ; }
flush chain ${T} nat-prerouting
add rule ${T} nat-prerouting jump services
add chain ${T} nat-output { type nat hook output priority -100 ; }
flush chain ${T} nat-output
add rule ${T} nat-output jump services
add chain ${T} nat-postrouting { type nat hook postrouting priority 100 ; }
flush chain ${T} nat-postrouting
add rule ${T} nat-postrouting jump masquerading
`;

/** One Service's chains, rules and map elements, as upstream writes them when the Service changed. */
function serviceText(i: number, ips: readonly string[]): string {
  const sc = serviceChain(i);
  const out: string[] = [];
  for (const ip of ips) {
    const ec = endpointChain(i, ip);
    out.push(
      `add chain ${T} ${ec}`,
      `flush chain ${T} ${ec}`,
      `add rule ${T} ${ec} ip saddr ${ip} jump mark-for-masquerade`,
      `add rule ${T} ${ec} meta l4proto tcp dnat to ${ip}:${TARGET_PORT}`,
    );
  }
  const vmap = ips.map((ip, k) => `${k} : goto ${endpointChain(i, ip)}`).join(' , ');
  out.push(
    `add chain ${T} ${sc}`,
    `flush chain ${T} ${sc}`,
    `add rule ${T} ${sc} ip daddr ${clusterIP(i)} tcp dport ${SERVICE_PORT} ip saddr != ${CLUSTER_CIDR} jump mark-for-masquerade`,
    `add rule ${T} ${sc} numgen random mod ${ips.length} vmap { ${vmap} }`,
    `add element ${T} cluster-ips { ${clusterIP(i)} }`,
    `add element ${T} service-ips { ${clusterIP(i)} . tcp . ${SERVICE_PORT} : goto ${sc} }`,
  );
  return out.join('\n') + '\n';
}

const initialIPs = (i: number): string[] => Array.from({ length: ENDPOINTS }, (_, e) => endpointIP(i, e));

/** The full sync from empty for n Services × 10 endpoints. */
export function upstreamFullText(n: number): string {
  const parts = [SKELETON];
  for (let i = 0; i < n; i++) parts.push(serviceText(i, initialIPs(i)));
  return parts.join('');
}

/**
 * The r-th one-endpoint change (same Service and address as the proxier's change r), given
 * the addresses earlier changes already added: the new endpoint chain and the Service's
 * chain rewritten with one more vmap entry, as upstream's partial sync writes it.
 */
export function upstreamChangeText(n: number, r: number, added: Map<number, string[]>): string {
  const i = changedService(r, n);
  const extra = [...(added.get(i) ?? []), extraIP(r)];
  added.set(i, extra);
  return serviceText(i, [...initialIPs(i), ...extra]);
}
