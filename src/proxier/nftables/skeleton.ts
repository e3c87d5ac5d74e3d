// The fixed part of the table: sets and maps whose number never grows with the number of
// Services, the base chains hooked into netfilter, and the helper chains they jump to.
// Rewritten as a whole on every full sync (it is small), never touched by partial syncs.

import type { NftChain, NftRule, NftSetLike, RuleBuilder } from '../../netlink/nftables/index.ts';
import { rule } from '../../netlink/nftables/index.ts';
import type { FamilyTraits } from './family.ts';
import { CHAIN, SET } from './names.ts';
import { countConnectionsJump, trafficChains, trafficRules, trafficSets } from './traffic.ts';

export interface SkeletonOptions {
  readonly traits: FamilyTraits;
  /** 1 << masqueradeBit (upstream default bit 14: 0x4000). */
  readonly masqueradeMark: number;
  /** Node ports answer on every local address (fib), else on the addresses in @nodeport-ips. */
  readonly nodePortsOnAllAddresses: boolean;
  /** --service-traffic-metrics: the counting chains and maps (traffic.ts); without it, none. */
  readonly serviceTraffic?: boolean;
  /**
   * KubeProxyNFTablesLocalhostNodePorts with loopback in nodePortAddresses: UDP and SCTP to a
   * loopback node port are rejected and counted (localhostRejectRules); TCP is the userspace
   * proxy's.
   */
  readonly localhostNodePorts?: boolean;
}

/** The comment of the rule that rejects (and counts) one protocol on loopback node ports. */
export const localhostRejectComment = (protocol: 'UDP' | 'SCTP'): string =>
  `localhost nodeport ${protocol.toLowerCase()} rejected`;

/**
 * Loopback node ports of UDP and SCTP Services: no userspace listener serves them, so their
 * packets are rejected at once rather than left to the loopback host, each protocol counted by
 * its rule (kubeproxy_nftables_localhost_nodeport_rejected_packets_total).
 */
function localhostRejectRules(t: FamilyTraits): NftRule[] {
  return (['UDP', 'SCTP'] as const).map((p) =>
    rule(t.nft, CHAIN.filterOutput)
      .match(t.daddr, t.loopback)
      .match('meta l4proto', p.toLowerCase())
      .inSet(['meta l4proto', 'th dport'], SET.localhostNodePorts)
      .counter()
      .reject(t.reject)
      .comment(localhostRejectComment(p))
      .build(),
  );
}

/** The set the loopback reject rules look node ports up in (a verdict map cannot be: its goto targets DNAT). */
export const localhostNodePortsSet: NftSetLike = {
  kind: 'set',
  name: SET.localhostNodePorts,
  key: ['inet_proto', 'inet_service'],
  comment: 'node ports, for the loopback ones of UDP and SCTP',
};

export function skeletonSets(t: FamilyTraits, serviceTraffic = false, localhostNodePorts = false): NftSetLike[] {
  const a = t.addrType;
  return [
    ...(serviceTraffic ? trafficSets(t) : []),
    ...(localhostNodePorts ? [localhostNodePortsSet] : []),
    { kind: 'set', name: SET.clusterIPs, key: [a], comment: 'cluster IPs: a port no Service exposes is rejected' },
    {
      kind: 'map',
      name: SET.serviceIPs,
      key: [a, 'inet_proto', 'inet_service'],
      data: 'verdict',
      comment: 'service frontends',
    },
    {
      kind: 'map',
      name: SET.serviceNodePorts,
      key: ['inet_proto', 'inet_service'],
      data: 'verdict',
      comment: 'node ports',
    },
    {
      kind: 'map',
      name: SET.noEndpointServices,
      key: [a, 'inet_proto', 'inet_service'],
      data: 'verdict',
      comment: 'frontends without usable endpoints',
    },
    {
      kind: 'map',
      name: SET.noEndpointNodePorts,
      key: ['inet_proto', 'inet_service'],
      data: 'verdict',
      comment: 'node ports without usable endpoints',
    },
    {
      kind: 'set',
      name: SET.firewallProtected,
      key: [a, 'inet_proto', 'inet_service'],
      comment: 'load balancers with source ranges',
    },
    {
      kind: 'set',
      name: SET.firewallAllow,
      key: [a, 'inet_proto', 'inet_service', a],
      flags: ['interval'],
      comment: 'allowed source ranges',
    },
    { kind: 'set', name: SET.nodePortIPs, key: [a], comment: 'addresses node ports answer on' },
    { kind: 'set', name: SET.podCIDRs, key: [a], flags: ['interval'], comment: 'sources that are local pods' },
    { kind: 'set', name: SET.serviceCIDRs, key: [a], flags: ['interval'], comment: 'service IP ranges' },
    {
      kind: 'set',
      name: SET.hairpin,
      key: [a, a],
      comment: 'endpoint . itself: a pod reaching itself through a Service',
    },
  ];
}

const base = (
  name: string,
  type: 'filter' | 'nat',
  hook: 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting',
  priority: number,
): NftChain => ({
  kind: 'chain',
  name,
  base: { type, hook, priority, policy: 'accept' },
});

export function skeletonChains(serviceTraffic = false): NftChain[] {
  const plain = (name: string): NftChain => ({ kind: 'chain', name });
  return [
    ...(serviceTraffic ? trafficChains() : []),
    plain(CHAIN.markForMasquerade),
    plain(CHAIN.masquerading),
    plain(CHAIN.services),
    plain(CHAIN.serviceEndpointsCheck),
    plain(CHAIN.nodePortEndpointsCheck),
    plain(CHAIN.firewallCheck),
    plain(CHAIN.clusterIPsCheck),
    plain(CHAIN.reject),
    // Priorities as upstream: filter checks run just before DNAT (dstnat - 10), the
    // cluster-IP check on locally generated traffic just after it.
    base(CHAIN.natPrerouting, 'nat', 'prerouting', -100),
    base(CHAIN.natOutput, 'nat', 'output', -100),
    base(CHAIN.natPostrouting, 'nat', 'postrouting', 100),
    base(CHAIN.filterPrerouting, 'filter', 'prerouting', -110),
    base(CHAIN.filterInput, 'filter', 'input', -110),
    base(CHAIN.filterForward, 'filter', 'forward', -110),
    base(CHAIN.filterOutput, 'filter', 'output', -110),
    base(CHAIN.filterOutputPostDNAT, 'filter', 'output', -90),
  ];
}

export function skeletonRules(o: SkeletonOptions): NftRule[] {
  const { traits: t, masqueradeMark: mark } = o;
  const r = (chain: string) => rule(t.nft, chain);
  const frontend = [t.daddr, 'meta l4proto', 'th dport'] as const;
  // Every local address except loopback (upstream's nftables mode has no localhost node ports).
  const nodePortGuard = (b: RuleBuilder): RuleBuilder =>
    o.nodePortsOnAllAddresses
      ? b.fibDaddrLocal().match(t.daddr, t.loopback, 'neq')
      : b.inSet([t.daddr], SET.nodePortIPs);
  const nodePortRule = (chain: string, map: string): NftRule =>
    nodePortGuard(r(chain)).vmap(['meta l4proto', 'th dport'], map).build();
  const newConn = (chain: string, target: string): NftRule => r(chain).ctState(['new']).jump(target).build();
  const traffic = o.serviceTraffic ? trafficRules(t, nodePortGuard) : [];
  return [
    ...(o.serviceTraffic ? [countConnectionsJump(t)] : []),
    r(CHAIN.markForMasquerade).setMarkOr(mark).build(),
    r(CHAIN.masquerading).inSet([t.saddr, t.daddr], SET.hairpin).jump(CHAIN.markForMasquerade).build(),
    r(CHAIN.masquerading).markAnd(mark, 0).return().build(),
    r(CHAIN.masquerading).clearMark(mark).build(),
    r(CHAIN.masquerading).masquerade({ fullyRandom: true }).build(),
    r(CHAIN.services)
      .vmap([...frontend], SET.serviceIPs)
      .build(),
    nodePortRule(CHAIN.services, SET.serviceNodePorts),
    r(CHAIN.serviceEndpointsCheck)
      .vmap([...frontend], SET.noEndpointServices)
      .build(),
    nodePortRule(CHAIN.nodePortEndpointsCheck, SET.noEndpointNodePorts),
    r(CHAIN.firewallCheck)
      .inSet([...frontend], SET.firewallProtected)
      .inSet([...frontend, t.saddr], SET.firewallAllow, true)
      .drop()
      .build(),
    r(CHAIN.clusterIPsCheck).inSet([t.daddr], SET.clusterIPs).reject(t.reject).build(),
    r(CHAIN.clusterIPsCheck).inSet([t.daddr], SET.serviceCIDRs).drop().build(),
    r(CHAIN.reject).reject(t.reject).build(),
    r(CHAIN.natPrerouting).jump(CHAIN.services).build(),
    r(CHAIN.natOutput).jump(CHAIN.services).build(),
    r(CHAIN.natPostrouting).jump(CHAIN.masquerading).build(),
    newConn(CHAIN.filterPrerouting, CHAIN.firewallCheck),
    newConn(CHAIN.filterInput, CHAIN.nodePortEndpointsCheck),
    newConn(CHAIN.filterInput, CHAIN.serviceEndpointsCheck),
    newConn(CHAIN.filterForward, CHAIN.serviceEndpointsCheck),
    newConn(CHAIN.filterForward, CHAIN.clusterIPsCheck),
    ...(o.localhostNodePorts ? localhostRejectRules(t) : []),
    newConn(CHAIN.filterOutput, CHAIN.serviceEndpointsCheck),
    newConn(CHAIN.filterOutput, CHAIN.firewallCheck),
    newConn(CHAIN.filterOutputPostDNAT, CHAIN.clusterIPsCheck),
    ...traffic,
  ];
}
