// Adapter from the generator (rules.ts, global.ts: GlobalRules, ServicePortFragment) to the
// writer's units (units.ts). The generator stays pure and knows nothing of how rules are
// written; the writer needs to know which fixed chains are shared (rules diffed one by one,
// the generator's tail last) and which are owned whole by the skeleton.

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { Chain } from './names.ts';
import type { GlobalRules, ServicePortFragment } from './types.ts';
import type { ChainRef, Skeleton, Unit } from '../iptables-nft/units.ts';
import { chainId } from '../iptables-nft/units.ts';

/** The fixed chains service ports add rules to. */
export const SHARED_CHAINS: readonly ChainRef[] = [
  { table: 'nat', name: Chain.SERVICES },
  { table: 'nat', name: Chain.NODE_PORTS },
  { table: 'filter', name: Chain.SERVICES },
  { table: 'filter', name: Chain.EXTERNAL_SERVICES },
  { table: 'filter', name: Chain.NODE_PORTS },
  { table: 'filter', name: Chain.PROXY_FIREWALL },
];

const SHARED_IDS = new Set(SHARED_CHAINS.map((c) => chainId(c.table, c.name)));

export function skeletonOf(g: GlobalRules): Skeleton {
  const isShared = (c: ChainRef): boolean => SHARED_IDS.has(chainId(c.table, c.name));
  for (const r of g.rules) {
    if (SHARED_IDS.has(chainId(r.table, r.chain)))
      throw new Error(`fixed rule in shared chain ${r.table} ${r.chain}: only tail rules go there`);
  }
  return {
    chains: g.chains.filter((c) => !isShared(c)),
    shared: g.chains.filter(isShared),
    rules: [...g.rules, ...g.tail, ...g.jumps],
  };
}

export function unitOf(f: ServicePortFragment): Unit {
  return {
    chains: f.chains.map((c) => ({ table: c.table, name: c.name })),
    rules: [...f.chains.flatMap((c) => c.rules), ...f.shared],
  };
}

/** Fixed chain names of this mode (with the service-port prefixes: everything it may own). */
export const FIXED_NAMES: ReadonlySet<string> = new Set(Object.values(Chain));

export function tablesOf(chains: readonly ChainRef[]): IptTable[] {
  return [...new Set(chains.map((c) => c.table))];
}
