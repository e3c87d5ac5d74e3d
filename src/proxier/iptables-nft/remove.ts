// Removes this mode's objects and nothing else: first our jumps in the built-in chains (no
// packet reaches our chains any more), then every chain of ours flushed, then deleted.
// Tables and built-in chains stay (others share them; iptables-nft never deletes them either).

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { RuleCodec } from './codec.ts';
import { Plan, sendGroups } from './groups.ts';
import type { Budget } from './groups.ts';
import { readKernel } from './kernel-state.ts';
import { deleteRule } from './plan-common.ts';
import { BUILTIN_CHAINS } from './units.ts';
import type { BatchSender, TableClient } from './writer-types.ts';

const PER_GROUP = 500;

/** `ours(table, chain)`: the chains to remove (and the jumps to them). */
export async function removeAll(
  clients: ReadonlyMap<IptTable, TableClient>,
  sender: BatchSender,
  codec: RuleCodec,
  ours: (table: IptTable, chain: string) => boolean,
  budget: Budget,
  signal?: AbortSignal,
): Promise<number> {
  const kernel = await readKernel(clients, codec, () => false);
  const plan = new Plan();
  for (const [id, entries] of kernel.rules) {
    const table = id.slice(0, id.indexOf('/')) as IptTable;
    const chain = id.slice(id.indexOf('/') + 1);
    if (!BUILTIN_CHAINS.has(chain)) continue;
    plan.group();
    for (const e of entries) if (e.jump !== undefined && ours(table, e.jump)) deleteRule(plan, table, chain, e.handle);
  }
  const chains: [IptTable, string][] = [];
  for (const [table, st] of kernel.tables)
    for (const name of st.chains.keys()) if (ours(table, name)) chains.push([table, name]);
  chains.forEach(([table, name], i) => {
    if (i % PER_GROUP === 0) plan.group();
    plan.chain(table, 'flush', { kind: 'chain', name });
  });
  chains.forEach(([table, name], i) => {
    if (i % PER_GROUP === 0) plan.group();
    plan.chain(table, 'delete', { kind: 'chain', name });
  });
  await sendGroups(plan.groups, clients, sender, budget, signal, () => performance.now());
  return chains.length;
}
