// The whole desired ruleset from its parts, for full syncs and tests: per table, the built-in
// chains with our jumps, the fixed chains, and every service port's chains; a shared chain
// holds the fixed rules, then each fragment's rules in fragment order, then the tail (the
// nodeports rule that must end nat KUBE-SERVICES).

import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { TABLE_ORDER } from '../../netlink/nftables/iptables/save.ts';
import type { GlobalRules, IptRuleset, ServicePortFragment } from './types.ts';

export function assembleRuleset(global: GlobalRules, fragments: Iterable<ServicePortFragment>): IptRuleset {
  const tables = new Map<IptTable, Map<string, IptRule[]>>(TABLE_ORDER.map((t) => [t, new Map()]));
  const chainOf = (table: IptTable, name: string): IptRule[] | undefined => tables.get(table)!.get(name);
  const declare = (table: IptTable, name: string, owner: string): IptRule[] => {
    const chains = tables.get(table)!;
    if (chains.has(name)) throw new Error(`${owner}: chain ${table} ${name} is declared twice`);
    const rules: IptRule[] = [];
    chains.set(name, rules);
    return rules;
  };
  const append = (r: IptRule, owner: string): void => {
    const rules = chainOf(r.table, r.chain);
    if (!rules) throw new Error(`${owner}: a rule for ${r.table} ${r.chain}, which is not a chain of ours`);
    rules.push(r);
  };

  for (const j of global.jumps) (chainOf(j.table, j.chain) ?? declare(j.table, j.chain, 'jumps')).push(j);
  for (const c of global.chains) declare(c.table, c.name, 'fixed chains');
  for (const r of global.rules) append(r, 'fixed rules');
  for (const f of fragments) {
    for (const c of f.chains) declare(c.table, c.name, f.id).push(...c.rules);
    for (const r of f.shared) append(r, f.id);
  }
  for (const r of global.tail) append(r, 'tail');

  return {
    family: global.family,
    tables: [...tables].map(([table, chains]) => ({
      table,
      chains: [...chains].map(([name, rules]) => ({ name, rules })),
    })),
  };
}
