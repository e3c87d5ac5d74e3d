// The partial sync's plan: only the changed service ports, against what the last sync
// committed (state.ts), without reading the kernel. Per port: its new chains created, its
// chains whose content changed flushed and refilled (leaves first), its rules in the shared
// chains added above the tail or deleted by handle, its chains that are gone flushed and
// deleted after the rules that jumped to them.

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { Plan } from './groups.ts';
import type { Encoded, Encoder } from './plan-common.ts';
import { addShared, deleteRule, unitDigest, refill, rulesByChain } from './plan-common.ts';
import type { SharedEntry, UnitState, WriterState } from './state.ts';
import { tailHandle } from './state.ts';
import type { ChainRef, Unit } from './units.ts';
import { chainId, leavesFirst } from './units.ts';

export interface PartialPlanInput {
  readonly state: WriterState;
  /** Changed service port ids, with their wanted unit (undefined: the port is gone). */
  readonly changed: ReadonlyMap<string, Unit | undefined>;
  readonly enc: Encoder;
}

/** Plans the change; `commit` installs the new unit states once the plan was sent. */
export function planPartial(inp: PartialPlanInput): { plan: Plan; commit: () => void } {
  const { state, enc } = inp;
  const plan = new Plan();
  const next = new Map<string, UnitState | undefined>();
  const deletes: [IptTable, string, bigint][] = [];
  const gone: ChainRef[] = [];
  const sharedIds = new Set(state.skeleton.chains.map((c) => chainId(c.table, c.name)));
  for (const [id, unit] of inp.changed) {
    const old = state.units.get(id);
    if (!unit) {
      if (old) for (const e of old.shared) if (e.handle !== undefined) deletes.push([e.table, e.chain, e.handle]);
      if (old) gone.push(...old.chains);
      next.set(id, undefined);
      continue;
    }
    const rules = enc.all(unit.rules);
    const owned = rulesByChain(unit.chains, rules);
    const had = new Set((old?.chains ?? []).map((c) => chainId(c.table, c.name)));
    const created = unit.chains.filter((c) => !had.has(chainId(c.table, c.name)));
    if (created.length > 0) {
      plan.group();
      for (const c of created) plan.chain(c.table, 'add', { kind: 'chain', name: c.name });
    }
    const content = new Map<string, string>();
    for (const c of leavesFirst(unit.chains, (x) => owned.get(chainId(x.table, x.name)) ?? [])) {
      const cid = chainId(c.table, c.name);
      const want = owned.get(cid) ?? [];
      const digest = unitDigest(want);
      content.set(cid, digest);
      if (old?.content.get(cid) === digest && had.has(cid)) continue;
      if (want.length === 0 && !had.has(cid)) continue;
      // Flushed even when new to us: a chain of that name may linger (a stale one whose
      // removal failed), and adding to it would double its rules.
      refill(plan, c, want, true);
    }
    const shared = diffShared(
      plan,
      state,
      old?.shared ?? [],
      rules.filter((r) => !owned.has(chainId(r.rule.table, r.rule.chain))),
      sharedIds,
      deletes,
    );
    const keep = new Set(unit.chains.map((c) => chainId(c.table, c.name)));
    for (const c of old?.chains ?? []) if (!keep.has(chainId(c.table, c.name))) gone.push(c);
    next.set(id, { chains: unit.chains, content, shared });
  }
  if (deletes.length > 0) plan.group();
  for (const [t, c, h] of deletes) deleteRule(plan, t, c, h);
  if (gone.length > 0) plan.group();
  for (const c of gone) plan.chain(c.table, 'flush', { kind: 'chain', name: c.name });
  for (const c of gone) plan.chain(c.table, 'delete', { kind: 'chain', name: c.name });
  const commit = (): void => {
    for (const [id, u] of next) {
      if (u) state.units.set(id, u);
      else state.units.delete(id);
    }
  };
  return { plan, commit };
}

/** Keeps the shared rules whose key stays, adds the new ones above the tail, queues the rest for deletion. */
function diffShared(
  plan: Plan,
  state: WriterState,
  old: readonly SharedEntry[],
  want: readonly Encoded[],
  sharedIds: ReadonlySet<string>,
  deletes: [IptTable, string, bigint][],
): SharedEntry[] {
  const pool = new Map<string, SharedEntry[]>();
  for (const e of old) {
    const k = `${chainId(e.table, e.chain)} ${e.key}`;
    let l = pool.get(k);
    if (!l) pool.set(k, (l = []));
    l.push(e);
  }
  const out: SharedEntry[] = [];
  let grouped = false;
  for (const r of want) {
    const cid = chainId(r.rule.table, r.rule.chain);
    if (!sharedIds.has(cid))
      throw new Error(
        `rule for ${r.rule.table} ${r.rule.chain}: neither a chain of its service port nor a shared chain`,
      );
    const kept = pool.get(`${cid} ${r.key}`)?.shift();
    if (kept && kept.handle !== undefined) {
      out.push(kept);
      continue;
    }
    if (!grouped) {
      plan.group();
      grouped = true;
    }
    out.push(addShared(plan, r.rule.table, r, tailHandle(state, r.rule.table, r.rule.chain)));
  }
  for (const l of pool.values())
    for (const e of l) if (e.handle !== undefined) deletes.push([e.table, e.chain, e.handle]);
  return out;
}
