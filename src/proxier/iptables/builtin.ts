// The built-in chains iptables-nft creates as base chains when a rule first needs them
// (iptables nft-chain.c / nft.c builtin_table: type, hook, priority; policy accept).

import type { BaseChainSpec } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';

const ACCEPT = 'accept' as const;

const BASE: Record<IptTable, Readonly<Record<string, BaseChainSpec>>> = {
  nat: {
    PREROUTING: { type: 'nat', hook: 'prerouting', priority: -100, policy: ACCEPT },
    INPUT: { type: 'nat', hook: 'input', priority: 100, policy: ACCEPT },
    OUTPUT: { type: 'nat', hook: 'output', priority: -100, policy: ACCEPT },
    POSTROUTING: { type: 'nat', hook: 'postrouting', priority: 100, policy: ACCEPT },
  },
  filter: {
    INPUT: { type: 'filter', hook: 'input', priority: 0, policy: ACCEPT },
    FORWARD: { type: 'filter', hook: 'forward', priority: 0, policy: ACCEPT },
    OUTPUT: { type: 'filter', hook: 'output', priority: 0, policy: ACCEPT },
  },
  mangle: {
    PREROUTING: { type: 'filter', hook: 'prerouting', priority: -150, policy: ACCEPT },
    INPUT: { type: 'filter', hook: 'input', priority: -150, policy: ACCEPT },
    FORWARD: { type: 'filter', hook: 'forward', priority: -150, policy: ACCEPT },
    OUTPUT: { type: 'route', hook: 'output', priority: -150, policy: ACCEPT },
    POSTROUTING: { type: 'filter', hook: 'postrouting', priority: -150, policy: ACCEPT },
  },
};

export function builtinBase(table: IptTable, chain: string): BaseChainSpec {
  const b = BASE[table][chain];
  if (!b) throw new Error(`${chain} is not a built-in chain of the ${table} table`);
  return b;
}
