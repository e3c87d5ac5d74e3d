// The handles of rules a full sync added to shared and built-in chains without asking for
// their echo: those chains are listed once after the sync, and each new entry takes the
// handle of a listed rule with its key that no other entry of that chain holds (in chain
// order). Handles are unique within one table only: nat's and filter's count alike, so a
// handle held in one chain says nothing about a rule of another table.

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { RuleCodec } from './codec.ts';
import type { SharedEntry, WriterState } from './state.ts';
import { chainId } from './units.ts';
import type { TableClient } from './writer-types.ts';

/** Returns how many entries are still without a handle (0 when all were found). */
export async function learnHandles(
  state: WriterState,
  clients: ReadonlyMap<IptTable, TableClient>,
  codec: RuleCodec,
): Promise<number> {
  const pending = new Map<string, SharedEntry[]>();
  /** chainId → the handles entries already hold there. */
  const known = new Map<string, Set<bigint>>();
  const visit = (e: SharedEntry): void => {
    const id = chainId(e.table, e.chain);
    if (e.handle !== undefined) {
      let k = known.get(id);
      if (!k) known.set(id, (k = new Set()));
      k.add(e.handle);
      return;
    }
    let l = pending.get(id);
    if (!l) pending.set(id, (l = []));
    l.push(e);
  };
  for (const e of state.skeleton.shared) visit(e);
  for (const u of state.units.values()) for (const e of u.shared) visit(e);
  let missing = 0;
  for (const [id, entries] of pending) {
    const { table, chain } = entries[0]!;
    const held = known.get(id);
    const free = new Map<string, bigint[]>();
    for (const r of await clients.get(table)!.listRules(chain)) {
      if (r.handle === undefined || held?.has(r.handle)) continue;
      const key = codec.kernelKey(r, table);
      if (key === undefined) continue;
      let l = free.get(key);
      if (!l) free.set(key, (l = []));
      l.push(r.handle);
    }
    for (const e of entries) {
      const h = free.get(e.key)?.shift();
      if (h === undefined) missing++;
      else e.handle = h;
    }
  }
  return missing;
}
