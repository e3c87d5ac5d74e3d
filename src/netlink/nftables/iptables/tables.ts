// iptables-nft's tables and built-in chains: `ip|ip6 nat`, `filter`, `mangle`, each built-in
// chain a base chain with the type, hook and priority iptables-nft 1.8.9 gives it (nft-chain.c's
// builtin tables; the same for IPv4 and IPv6) and policy accept. Checked against the NEWCHAIN
// messages iptables-nft-restore sent (test/fixtures/netlink/iptables/restore-ipv4.hex).
//
// iptables-nft creates a built-in chain only when it is missing, and so does addTableAndBuiltins:
// re-sending a base chain's policy would reset an administrator's `-P FORWARD DROP`, and nothing
// here ever flushes or deletes what others keep in these tables.

import type { IPFamily } from '../../../base/ip.ts';
import type { Family } from '../constants.ts';
import type { NftTransaction } from '../transaction.ts';
import type { BaseChainSpec, NftChain } from '../types.ts';
import type { BuiltinChain, IptRule, IptTable } from './rule.ts';

export const IPT_TABLES: readonly IptTable[] = ['nat', 'filter', 'mangle'];

/** The nf_tables family of iptables (ip) and ip6tables (ip6). */
export const IPT_FAMILY: Readonly<Record<IPFamily, Family>> = { IPv4: 'ip', IPv6: 'ip6' };

const NF_IP_PRI_MANGLE = -150,
  NF_IP_PRI_NAT_DST = -100,
  NF_IP_PRI_FILTER = 0,
  NF_IP_PRI_NAT_SRC = 100;
const spec = (type: BaseChainSpec['type'], hook: BaseChainSpec['hook'], priority: number): BaseChainSpec => ({
  type,
  hook,
  priority,
  policy: 'accept',
});

/** Each table's built-in chains, in the order iptables-nft lists them. */
export const BUILTIN_CHAINS: Readonly<Record<IptTable, Readonly<Partial<Record<BuiltinChain, BaseChainSpec>>>>> = {
  nat: {
    PREROUTING: spec('nat', 'prerouting', NF_IP_PRI_NAT_DST),
    INPUT: spec('nat', 'input', NF_IP_PRI_NAT_SRC),
    OUTPUT: spec('nat', 'output', NF_IP_PRI_NAT_DST),
    POSTROUTING: spec('nat', 'postrouting', NF_IP_PRI_NAT_SRC),
  },
  filter: {
    INPUT: spec('filter', 'input', NF_IP_PRI_FILTER),
    FORWARD: spec('filter', 'forward', NF_IP_PRI_FILTER),
    OUTPUT: spec('filter', 'output', NF_IP_PRI_FILTER),
  },
  mangle: {
    PREROUTING: spec('filter', 'prerouting', NF_IP_PRI_MANGLE),
    INPUT: spec('filter', 'input', NF_IP_PRI_MANGLE),
    FORWARD: spec('filter', 'forward', NF_IP_PRI_MANGLE),
    OUTPUT: spec('route', 'output', NF_IP_PRI_MANGLE),
    POSTROUTING: spec('filter', 'postrouting', NF_IP_PRI_MANGLE),
  },
};

/** The base chain iptables-nft creates for a built-in chain, or undefined when `name` is not one of `table`'s. */
export function builtinChain(table: IptTable, name: string): NftChain | undefined {
  const base = (BUILTIN_CHAINS[table] as Partial<Record<string, BaseChainSpec>>)[name];
  return base ? { kind: 'chain', name, base: { ...base } } : undefined;
}

export const isBuiltinChain = (table: IptTable, name: string): name is BuiltinChain =>
  builtinChain(table, name) !== undefined;

/** The built-in chains the rules of `table` are placed in, in first-use order. */
export function builtinChainsOf(rules: readonly IptRule[], table: IptTable): BuiltinChain[] {
  const out: BuiltinChain[] = [];
  for (const r of rules)
    if (r.table === table && isBuiltinChain(table, r.chain) && !out.includes(r.chain)) out.push(r.chain);
  return out;
}

/**
 * Adds to `tx` (bound to (ip|ip6, table)) the table and every chain of `chains` that is a
 * built-in chain of `table` and not in `existing` (the chain names NftClient.list('chain')
 * returned; empty when the table is missing), as iptables-nft creates them: NEWTABLE with
 * NLM_F_CREATE and no flags (a no-op on an existing table), NEWCHAIN with type, hook, priority
 * and policy accept. Never flushes; existing chains are left alone.
 */
export function addTableAndBuiltins(
  tx: NftTransaction,
  table: IptTable,
  chains: Iterable<string>,
  existing: ReadonlySet<string>,
): void {
  tx.add({ kind: 'table' });
  const done = new Set<string>();
  for (const name of chains) {
    const chain = builtinChain(table, name);
    if (!chain || existing.has(name) || done.has(name)) continue;
    done.add(name);
    tx.add(chain);
  }
}
