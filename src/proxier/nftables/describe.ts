// `kube-proxy-ts explain` for the nftables mode: the elements, chains and sets one service
// port owns, read back from the kernel, beside what its plan (port-plan.ts) says the last
// sync wrote. The port's objects are found by its frontends: every element of the shared
// sets and maps whose key starts with `clusterIP . proto . port`, `vip . proto . port` or
// `proto . nodePort`, and the affinity and traffic-counting chains and sets named after it.
//
// The kernel is read once per query (a snapshot kept in the describe session) and indexed by
// frontend, so explaining every Service reads each map once: O(elements + ports), not their
// product. Reading is never done by a sync.

import type { ServicePortInfo } from '../../model/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { NftElement, NftInterface } from '../../netlink/nftables/index.ts';
import type { DescribeOptions, PortDescription, ProgrammedEntry } from '../types.ts';
import { keyText, slotElement } from './elements.ts';
import {
  balancingMap,
  CHAIN,
  externalChain,
  isBalancingMap,
  isEndpointsMap,
  NODE_PORT_SETS,
  PORT_SETS,
  serviceChain,
  SET,
  trafficChain,
} from './names.ts';
import type { PortPlan } from './port-plan.ts';

type Field = string | number;

function valueText(e: NftElement): string {
  const v = e.value;
  if (v === undefined) return '';
  if (Array.isArray(v)) return keyText(v as readonly Field[]);
  const verdict = v as { verdict: string; chain?: string };
  return verdict.chain !== undefined ? `${verdict.verdict} ${verdict.chain}` : verdict.verdict;
}

const entryOf = (e: NftElement): ProgrammedEntry => ({
  where: e.set,
  key: keyText(e.key as readonly Field[]),
  value: valueText(e),
});

/** The key prefixes of the port's frontends, as nft prints them. */
export function frontendKeys(p: ServicePortInfo): string[] {
  const proto = p.protocol.toLowerCase();
  const keys = [keyText([p.clusterIP, proto, p.port])];
  if (p.externallyAccessible) {
    for (const ip of [...p.externalIPs, ...p.loadBalancerVIPs]) keys.push(keyText([ip, proto, p.port]));
    if (p.nodePort > 0) keys.push(keyText([proto, p.nodePort]));
  }
  return keys;
}

/** The frontend an element of `set` belongs to: the first 2 or 3 fields of its key, or a cluster IP. */
function frontendOf(set: string, e: NftElement): string {
  if (set === SET.clusterIPs) return `ip ${keyText(e.key as readonly Field[])}`;
  const n = NODE_PORT_SETS.has(set) || set.startsWith('nodeport-') ? 2 : 3;
  return keyText(e.key.slice(0, n) as readonly Field[]);
}

/** What the kernel holds, indexed by frontend. */
export interface NftSnapshot {
  readonly chains: ReadonlySet<string>;
  readonly byFrontend: ReadonlyMap<string, readonly ProgrammedEntry[]>;
  readonly affinitySets: readonly string[];
  /** Balancing maps (balancing.ts): their elements are read for the port explained only. */
  readonly balancingMaps?: ReadonlySet<string>;
  /** Rules per chain, read when the table counts traffic (traffic.ts): one dump, not one per port. */
  readonly ruleCounts?: ReadonlyMap<string, number>;
}

export async function readSnapshot(nft: NftInterface): Promise<NftSnapshot> {
  const byFrontend = new Map<string, ProgrammedEntry[]>();
  const affinitySets: string[] = [];
  let chains: Set<string>;
  let sets: string[];
  try {
    chains = new Set((await nft.listChains()).map((c) => c.name));
    if (chains.size === 0) return { chains, byFrontend, affinitySets };
    sets = (await nft.listSets()).map((s) => s.name);
  } catch (e) {
    if (isNotFound(e)) return { chains: new Set(), byFrontend, affinitySets };
    throw e;
  }
  const balancingMaps = new Set(sets.filter(isBalancingMap));
  for (const set of sets) {
    if (set.startsWith('affinity-')) affinitySets.push(set);
    if (!PORT_SETS.has(set) && !isEndpointsMap(set)) continue;
    for (const e of await nft.listElements(set)) {
      const f = frontendOf(set, e);
      const list = byFrontend.get(f);
      if (list) list.push(entryOf(e));
      else byFrontend.set(f, [entryOf(e)]);
    }
  }
  if (!chains.has(CHAIN.countTraffic)) return { chains, byFrontend, affinitySets, balancingMaps };
  const ruleCounts = new Map<string, number>();
  for (const r of await nft.listRules()) ruleCounts.set(r.chain, (ruleCounts.get(r.chain) ?? 0) + 1);
  return { chains, byFrontend, affinitySets, balancingMaps, ruleCounts };
}

/** What the plan wrote: one entry per element, chain and set. */
export function plannedEntries(plan: PortPlan | undefined): ProgrammedEntry[] {
  if (!plan) return [];
  const out: ProgrammedEntry[] = [];
  for (const c of plan.contributions) {
    if (c.kind === 'element') out.push(entryOf(c.element));
    else for (let i = 0; i < c.endpoints.length; i++) out.push(entryOf(slotElement(c, i)));
  }
  for (const ch of plan.chains) out.push({ where: 'chain', key: ch.name, value: `${ch.rules.length} rules` });
  for (const s of plan.sets) out.push({ where: 'set', key: s.name, value: '' });
  return out;
}

/** The affinity sets of a port carry its readable name after the hash (names.ts affinitySet). */
const affinityPrefix = (p: ServicePortInfo): string =>
  `-${p.namespace}/${p.name}/${p.protocol.toLowerCase()}/${p.portName || p.port}__`;

/** What the kernel holds for the port, from a snapshot (and, for affinity chains, their rules). */
export async function kernelEntries(nft: NftInterface, s: NftSnapshot, p: ServicePortInfo): Promise<ProgrammedEntry[]> {
  const out: ProgrammedEntry[] = [...(s.byFrontend.get(`ip ${p.clusterIP}`) ?? [])];
  for (const f of frontendKeys(p)) out.push(...(s.byFrontend.get(f) ?? []));
  const prefix = affinityPrefix(p);
  for (const set of s.affinitySets) if (set.includes(prefix)) out.push({ where: 'set', key: set, value: '' });
  for (const role of ['cluster', 'local'] as const) {
    const name = balancingMap(p, role);
    if (!s.balancingMaps?.has(name)) continue;
    out.push({ where: 'set', key: name, value: '' });
    for (const e of await nft.listElements(name)) out.push(entryOf(e));
  }
  // Only Services with session affinity have chains of their own.
  for (const name of [serviceChain(p), externalChain(p)]) {
    if (!s.chains.has(name)) continue;
    const rules = await nft.listRules(name);
    out.push({ where: 'chain', key: name, value: `${rules.length} rules` });
  }
  // The traffic counters' chains (--service-traffic-metrics), counted from the snapshot's dump.
  if (s.ruleCounts)
    for (const kind of ['cluster-ip', 'external', 'node-port'] as const)
      for (const what of ['traffic', 'connections'] as const) {
        const name = trafficChain(p, kind, what);
        if (s.chains.has(name)) out.push({ where: 'chain', key: name, value: `${s.ruleCounts.get(name) ?? 0} rules` });
      }
  return out;
}

const SNAPSHOT = 'nftables-snapshot';

export async function describeNftPort(
  nft: NftInterface,
  p: ServicePortInfo,
  plan: PortPlan | undefined,
  opts: DescribeOptions = {},
): Promise<PortDescription> {
  // One snapshot per table and query: the session is shared by both families' proxiers.
  const key = `${SNAPSHOT} ${nft.scope.family}`;
  let snapshot = opts.session?.get(key) as Promise<NftSnapshot> | undefined;
  if (!snapshot) {
    snapshot = readSnapshot(nft);
    opts.session?.set(key, snapshot);
  }
  return { mode: 'nftables', kernel: await kernelEntries(nft, await snapshot, p), expected: plannedEntries(plan) };
}
