// Per-Service traffic counters (--service-traffic-metrics; nothing of this is in the table
// without it). Each Service port has, per frontend kind it has, a chain `traffic-KIND-…`
// counting its packets and bytes and a chain `connections-KIND-…` counting its new
// connections, each a single `counter` rule. Shared verdict maps keyed by the frontend
// (address . proto . port, or proto . port for node ports) send a packet to its chain with
// one lookup, so a packet's cost does not grow with the number of Services:
//
//   map traffic-services { 10.96.0.10 . tcp . 80 : goto traffic-cluster-ip-HASH-ns/name/tcp/http, ... }
//   chain traffic-cluster-ip-HASH-ns/name/tcp/http { counter }
//
// Where each counter sees what:
//   - connections are counted in the nat hooks (the `services` chain jumps to
//     count-connections first): conntrack runs the nat hooks for a connection's first packet
//     only, so each new connection counts once, whatever the protocol or retransmissions.
//   - packets and bytes are counted in the filter chains that run before DNAT (prerouting and
//     output, priority -110), for the connection's original direction only: every packet from
//     client to Service, still addressed to the frontend, as IPVS counts a virtual server's
//     incoming packets. After the source-range check, so a packet it drops is not counted.
//   Both count a connection the filter chains refuse afterwards for lack of endpoints when it
//   came from another host (its refusal is in input/forward, after the nat hook); from the
//   node itself it is refused in output before both and not counted.
// The chains' rules never change, so syncs leave them (and their counts) alone.

import type { ServicePortId, ServicePortInfo } from '../../model/index.ts';
import type { NftChain, NftInterface, NftRule, NftSetLike, RuleBuilder } from '../../netlink/nftables/index.ts';
import { rule } from '../../netlink/nftables/index.ts';
import type { TrafficSample } from '../types.ts';
import type { Contribution } from './elements.ts';
import { keyText, mapElement } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import type { TrafficFrontend } from './names.ts';
import { CHAIN, SET, trafficChain } from './names.ts';

export function trafficSets(t: FamilyTraits): NftSetLike[] {
  const services = (name: string, what: string): NftSetLike => ({
    kind: 'map',
    name,
    key: [t.addrType, 'inet_proto', 'inet_service'],
    data: 'verdict',
    comment: `service frontends: their ${what} counters`,
  });
  const nodePorts = (name: string, what: string): NftSetLike => ({
    kind: 'map',
    name,
    key: ['inet_proto', 'inet_service'],
    data: 'verdict',
    comment: `node ports: their ${what} counters`,
  });
  return [
    services(SET.trafficServices, 'traffic'),
    nodePorts(SET.trafficNodePorts, 'traffic'),
    services(SET.connectionsServices, 'connection'),
    nodePorts(SET.connectionsNodePorts, 'connection'),
  ];
}

export const trafficChains = (): NftChain[] => [
  { kind: 'chain', name: CHAIN.countConnections },
  { kind: 'chain', name: CHAIN.countTraffic },
];

/** The jump to count-connections, first in the `services` chain. */
export const countConnectionsJump = (t: FamilyTraits): NftRule =>
  rule(t.nft, CHAIN.services).jump(CHAIN.countConnections).build();

/**
 * The rules of count-connections and count-traffic, and the filter chains' jumps to
 * count-traffic (last in them: after their checks). `nodePortGuard` is the skeleton's test
 * for "addressed to a node port".
 */
export function trafficRules(t: FamilyTraits, nodePortGuard: (r: RuleBuilder) => RuleBuilder): NftRule[] {
  const r = (chain: string): RuleBuilder => rule(t.nft, chain);
  const frontend = [t.daddr, 'meta l4proto', 'th dport'] as const;
  const nodePort = ['meta l4proto', 'th dport'] as const;
  return [
    r(CHAIN.countConnections)
      .vmap([...frontend], SET.connectionsServices)
      .build(),
    nodePortGuard(r(CHAIN.countConnections))
      .vmap([...nodePort], SET.connectionsNodePorts)
      .build(),
    r(CHAIN.countTraffic)
      .vmap([...frontend], SET.trafficServices)
      .build(),
    nodePortGuard(r(CHAIN.countTraffic))
      .vmap([...nodePort], SET.trafficNodePorts)
      .build(),
    r(CHAIN.filterPrerouting).ctDirection('original').jump(CHAIN.countTraffic).build(),
    r(CHAIN.filterOutput).ctDirection('original').jump(CHAIN.countTraffic).build(),
  ];
}

/** A Service port's frontends, by kind, as the traffic maps key them. */
function frontendKeys(p: ServicePortInfo): [TrafficFrontend, (string | number)[][]][] {
  const pr = p.protocol.toLowerCase();
  const out: [TrafficFrontend, (string | number)[][]][] = [['cluster-ip', [[p.clusterIP, pr, p.port]]]];
  if (!p.externallyAccessible) return out;
  const ext = [...p.externalIPs, ...p.loadBalancerVIPs].map((ip) => [ip, pr, p.port]);
  if (ext.length > 0) out.push(['external', ext]);
  if (p.nodePort > 0) out.push(['node-port', [[pr, p.nodePort]]]);
  return out;
}

const MAPS = {
  traffic: { services: SET.trafficServices, nodePorts: SET.trafficNodePorts },
  connections: { services: SET.connectionsServices, nodePorts: SET.connectionsNodePorts },
} as const;

export interface TrafficPortChain {
  readonly name: string;
  readonly rules: readonly NftRule[];
  readonly signature: string;
  /** Left alone when it exists: its rules never change, and rewriting them would reset the counts. */
  readonly keep: true;
}

/** A Service port's traffic chains and its elements in the traffic maps. */
export function trafficPlan(
  t: FamilyTraits,
  p: ServicePortInfo,
): { chains: TrafficPortChain[]; contributions: Contribution[] } {
  const chains: TrafficPortChain[] = [];
  const contributions: Contribution[] = [];
  for (const [kind, keys] of frontendKeys(p)) {
    for (const what of ['traffic', 'connections'] as const) {
      const name = trafficChain(p, kind, what);
      chains.push({ name, rules: [rule(t.nft, name).counter().build()], signature: 'counter', keep: true });
      const map = kind === 'node-port' ? MAPS[what].nodePorts : MAPS[what].services;
      for (const key of keys) contributions.push(mapElement(map, key, { verdict: 'goto', chain: name }, keyText(key)));
    }
  }
  return { chains, contributions };
}

/**
 * The counters of every programmed Service port, read from the kernel now: one dump of the
 * table's rules, matched to the ports by their traffic chains' names.
 */
export async function readTrafficCounters(
  nft: NftInterface,
  ports: Iterable<ServicePortInfo>,
): Promise<TrafficSample[]> {
  const owner = new Map<string, { key: string; what: 'traffic' | 'connections' }>();
  const out = new Map<
    string,
    { id: ServicePortId; frontend: TrafficFrontend; packets: number; bytes: number; connections: number; seen: number }
  >();
  for (const p of ports)
    for (const [kind] of frontendKeys(p)) {
      const key = `${p.id}|${kind}`;
      out.set(key, { id: p.id, frontend: kind, packets: 0, bytes: 0, connections: 0, seen: 0 });
      owner.set(trafficChain(p, kind, 'traffic'), { key, what: 'traffic' });
      owner.set(trafficChain(p, kind, 'connections'), { key, what: 'connections' });
    }
  for (const r of await nft.listRules()) {
    const o = owner.get(r.chain);
    const c = o && r.exprs.find((e) => e.type === 'counter');
    if (!o || !c || c.type !== 'counter') continue;
    const acc = out.get(o.key)!;
    if (o.what === 'traffic') {
      acc.packets = Number(c.packets ?? 0n);
      acc.bytes = Number(c.bytes ?? 0n);
    } else acc.connections = Number(c.packets ?? 0n);
    acc.seen++;
  }
  // A port whose chains are not both in the kernel (a sync under way) is left out of this scrape.
  return [...out.values()]
    .filter((a) => a.seen === 2)
    .map((a) => ({ id: a.id, frontend: a.frontend, packets: a.packets, bytes: a.bytes, connections: a.connections }));
}
