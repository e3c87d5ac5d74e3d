// Per-Service load balancing in nftables mode (model/load-balancing.ts): a Service port that
// asks for round-robin or consistent-hash leaves the shared pickers (pickers.ts), whose
// `numgen random` is shared by every Service of an endpoint count, for chains of its own,
// as a Service with session affinity does:
//
//   chain service-HASH-ns/name/tcp/p {                # cluster IP; external-… alike
//       ip saddr != @pod-cidrs meta mark set meta mark | 0x4000
//       meta l4proto tcp dnat ip to numgen inc mod 3 map @balance-cluster-HASH-…       # round-robin
//       meta l4proto tcp dnat ip to jhash ip saddr mod 1601 seed 0x0 map @balance-…    # consistent-hash
//   }
//   map balance-cluster-HASH-ns/name/tcp/p { typeof numgen random mod 1 : ip daddr . th dport }
//       round-robin:     i : endpoint i, for i < N
//       consistent-hash: bucket b : the endpoint Maglev gives bucket b (maglev.ts), b < M
//
// One map per endpoint list the port uses: `cluster` (all usable endpoints) and, with a Local
// traffic policy, `local`. Its elements are slots of the element index (elements.ts), so an
// endpoint change rewrites only the buckets whose endpoint changed. numgen inc's counter
// belongs to its rule: each Service port (and each of its frontend kinds) counts on its own.

import type { EndpointInfo, EndpointSelection, LoadBalancing, ServicePortInfo } from '../../model/index.ts';
import type { NftRule, NftSetLike, RuleBuilder } from '../../netlink/nftables/index.ts';
import { rule } from '../../netlink/nftables/index.ts';
import type { Contribution } from './elements.ts';
import { slots } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import { maglevTable, tableSize } from '../../base/maglev.ts';
import { balancingMap, externalChain, serviceChain } from './names.ts';
import type { PickerContext } from './pickers.ts';
import { internalMarkRules, localTraffic } from './pickers.ts';

/** The algorithms that take a Service port out of the shared pickers. */
export type OwnAlgorithm = Extract<LoadBalancing, 'round-robin' | 'consistent-hash'>;

export const isOwnAlgorithm = (a: LoadBalancing | undefined): a is OwnAlgorithm =>
  a === 'round-robin' || a === 'consistent-hash';

/** jhash's seed: fixed, so that every node hashes a client to the same bucket. */
export const HASH_SEED = 0;

type Role = 'cluster' | 'local';
type Guard = (r: RuleBuilder) => RuleBuilder;
const unguarded: Guard = (r) => r;

export interface BalancingObjects {
  readonly chains: { name: string; rules: NftRule[] }[];
  readonly maps: NftSetLike[];
  readonly contributions: Contribution[];
}

/** A balancing map's definition (every one alike but its name). */
export function balancingMapDef(t: FamilyTraits, name: string): NftSetLike {
  const daddr = t.daddr === 'ip daddr' ? 'ip daddr' : 'ip6 daddr';
  return {
    kind: 'map',
    name,
    key: ['integer'],
    // As nft records `typeof numgen random mod 1 : ip daddr . th dport` (its printout loads back).
    typeof: [{ expr: 'numgen', mode: 'random', modulus: 1 }],
    data: [t.addrType, 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: daddr },
      { expr: 'payload', field: 'th dport' },
    ],
  };
}

/** The endpoint in each slot of the map: the endpoints themselves, or Maglev's table of them. */
export function balancingSlots(algorithm: OwnAlgorithm, eps: readonly EndpointInfo[]): readonly EndpointInfo[] {
  if (algorithm === 'round-robin' || eps.length === 0) return eps;
  const table = maglevTable(eps.map((e) => `${e.ip} . ${e.port}`));
  const out = new Array<EndpointInfo>(table.length);
  for (let b = 0; b < table.length; b++) out[b] = eps[table[b]!]!;
  return out;
}

/** Each endpoint's share of new connections (trace): equal for round-robin, the table's share for consistent-hash. */
export function endpointShares(algorithm: OwnAlgorithm, eps: readonly EndpointInfo[]): Map<string, number> {
  const slotsOf = balancingSlots(algorithm, eps);
  const out = new Map<string, number>();
  for (const e of slotsOf) out.set(e.key, (out.get(e.key) ?? 0) + 1 / slotsOf.length);
  return out;
}

function pickRules(
  t: FamilyTraits,
  chain: string,
  p: ServicePortInfo,
  algorithm: OwnAlgorithm,
  map: string,
  count: number,
  guard: Guard,
): NftRule[] {
  if (count === 0) return [];
  const b = guard(rule(t.nft, chain)).match('meta l4proto', p.protocol.toLowerCase() as 'tcp');
  const picked =
    algorithm === 'round-robin' ? b.dnatRoundRobin(count, map) : b.dnatHashSource(tableSize(count), HASH_SEED, map);
  return [picked.build()];
}

/** The chains, maps and map elements of a Service port that balances on its own. */
export function balancingObjects(
  ctx: PickerContext,
  p: ServicePortInfo,
  s: EndpointSelection | undefined,
  algorithm: OwnAlgorithm,
): BalancingObjects {
  const t = ctx.traits;
  const lists: Record<Role, readonly EndpointInfo[]> = { cluster: s?.cluster ?? [], local: s?.local ?? [] };
  const used = new Set<Role>();
  const pick = (chain: string, role: Role, guard: Guard = unguarded): NftRule[] => {
    if (lists[role].length > 0) used.add(role);
    return pickRules(t, chain, p, algorithm, balancingMap(p, role), lists[role].length, guard);
  };
  const svc = serviceChain(p);
  const chains = [
    { name: svc, rules: [...internalMarkRules(ctx, svc), ...pick(svc, p.internalPolicyLocal ? 'local' : 'cluster')] },
  ];
  if (p.externallyAccessible) {
    const ext = externalChain(p);
    const mark = (b: RuleBuilder): NftRule => b.setMarkOr(ctx.masqueradeMark).build();
    const rules: NftRule[] = [];
    if (!p.externalPolicyLocal) rules.push(mark(rule(t.nft, ext)), ...pick(ext, 'cluster'));
    else {
      // externalTrafficPolicy=Local: upstream's short-circuit for local pods and the node.
      if (lists.cluster.length > 0) {
        if (ctx.detectLocal) rules.push(...pick(ext, 'cluster', (b) => localTraffic(ctx, b)));
        rules.push(mark(rule(t.nft, ext).fibSaddrLocal()));
        rules.push(...pick(ext, 'cluster', (b) => b.fibSaddrLocal()));
      }
      rules.push(...pick(ext, 'local'));
    }
    chains.push({ name: ext, rules });
  }
  const maps: NftSetLike[] = [];
  const contributions: Contribution[] = [];
  for (const role of used) {
    const name = balancingMap(p, role);
    maps.push(balancingMapDef(t, name));
    contributions.push(slots(name, [], '', balancingSlots(algorithm, lists[role])));
  }
  return { chains, maps, contributions };
}
