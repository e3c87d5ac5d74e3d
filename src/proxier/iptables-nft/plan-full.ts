// The full sync's plan: the kernel as listed against the whole desired ruleset. Owned chains
// whose content differs are flushed and refilled; shared chains are diffed rule by rule
// (rules kept keep their handles); missing jumps are inserted at the top of the built-in
// chains; chains of ours nobody wants any more are removed last. The order (see groups.ts)
// lets a cold start be cut into batches: tables and the skeleton's chains first, then per
// service port its chains leaves first and its rules in the shared chains, then the tails,
// deletions, the jumps from the built-in chains, and stale chains.

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { builtinChain } from '../../netlink/nftables/iptables/tables.ts';
import { Plan } from './groups.ts';
import { diffOwned } from './plan-diff.ts';
import type { KernelState, ListedEntry } from './kernel-state.ts';
import type { Encoded, Encoder } from './plan-common.ts';
import {
  addShared,
  deleteRule,
  digestOf,
  unitDigest,
  unitDigests,
  refill,
  rulesByChain,
  SHARED_PER_GROUP,
} from './plan-common.ts';
import type { ChainDigests, SharedEntry, UnitState, WriterState } from './state.ts';
import { contentDigest, lazyDigests } from './state.ts';
import type { ChainRef, DesiredRuleset, Unit } from './units.ts';
import { BUILTIN_CHAINS, chainId, leavesFirst } from './units.ts';

export interface FullPlanInput {
  readonly desired: DesiredRuleset;
  readonly kernel: KernelState;
  readonly enc: Encoder;
  /** Chains of ours by name (fixed names and service-port chains): stale ones are removed. */
  readonly isOurs: (table: IptTable, chain: string) => boolean;
  /** Sends the groups planned so far (called between service ports when the plan grows large). */
  readonly drain: (plan: Plan) => Promise<void>;
  /**
   * What the last sync committed, when it can be trusted (it succeeded and nobody flushed our
   * tables since): a service port's chain whose digest is unchanged is left alone. Without it
   * every service-port chain is refilled (their rules are not listed: see kernel-state.ts).
   */
  readonly trusted?: WriterState;
  /** Chains taken as present though the kernel state does not list them (a light read). */
  readonly assumePresent?: (table: IptTable, chain: string) => boolean;
  /** Chains someone else changed since the last sync (../drift/chain-watch.ts): refilled even when trusted. */
  readonly tainted?: (table: IptTable, chain: string) => boolean;
  /** The skeleton's owned chains brought to their content rule by rule, by handle (plan-diff.ts), not refilled. */
  readonly diffOwned?: boolean;
}

/** Kernel rules of a shared chain not yet matched, by key, in chain order. */
class Pool {
  private readonly byKey = new Map<string, ListedEntry[]>();
  private readonly taken = new Set<bigint>();
  readonly all: readonly ListedEntry[];

  constructor(entries: readonly ListedEntry[]) {
    this.all = entries;
    for (const e of entries) {
      if (e.key === undefined) continue;
      let l = this.byKey.get(e.key);
      if (!l) this.byKey.set(e.key, (l = []));
      l.push(e);
    }
  }

  take(key: string): ListedEntry | undefined {
    const e = this.byKey.get(key)?.shift();
    if (e) this.taken.add(e.handle);
    return e;
  }

  /** Gives a taken entry back (first in line for its key again). */
  release(e: ListedEntry): void {
    if (!this.taken.delete(e.handle) || e.key === undefined) return;
    const l = this.byKey.get(e.key);
    if (l) l.unshift(e);
    else this.byKey.set(e.key, [e]);
  }

  untaken(): ListedEntry[] {
    return this.all.filter((e) => !this.taken.has(e.handle));
  }
}

const DRAIN_OPS = 4000;

export async function planFull(inp: FullPlanInput): Promise<{ plan: Plan; state: WriterState }> {
  const { desired, kernel, enc } = inp;
  const sk = desired.skeleton;
  let plan = new Plan();
  const present = (t: IptTable, name: string): boolean =>
    (kernel.tables.get(t)?.chains.has(name) ?? false) || (inp.assumePresent?.(t, name) ?? false);
  const listed = (c: ChainRef): readonly ListedEntry[] => kernel.rules.get(chainId(c.table, c.name)) ?? [];
  const tainted = inp.tainted ?? ((): boolean => false);

  // Tables, the built-in chains our jumps need, the skeleton's chains.
  const skRules = enc.all(sk.rules);
  const tables = new Set<IptTable>([...sk.chains, ...sk.shared].map((c) => c.table));
  for (const t of tables) if (!kernel.tables.get(t)?.exists) plan.table(t);
  const jumps = skRules.filter((r) => BUILTIN_CHAINS.has(r.rule.chain));
  const builtins = new Set<string>();
  for (const j of jumps) {
    const t = j.rule.table;
    if (!kernel.tables.get(t)?.exists && !tables.has(t)) {
      plan.table(t);
      tables.add(t);
    }
    const id = chainId(t, j.rule.chain);
    if (present(t, j.rule.chain) || builtins.has(id)) continue;
    builtins.add(id);
    plan.chain(t, 'add', builtinChain(t, j.rule.chain)!);
  }
  for (const c of [...sk.chains, ...sk.shared])
    if (!present(c.table, c.name)) plan.chain(c.table, 'add', { kind: 'chain', name: c.name });
  const skOwned = rulesByChain(sk.chains, skRules);
  const skContent = new Map<string, string>();
  for (const c of leavesFirst(sk.chains, (x) => skOwned.get(chainId(x.table, x.name)) ?? [])) {
    const want = skOwned.get(chainId(c.table, c.name)) ?? [];
    if (inp.diffOwned && present(c.table, c.name)) diffOwned(plan, c, want, listed(c));
    else writeOwned(plan, c, want, present(c.table, c.name) ? listed(c) : undefined);
    skContent.set(chainId(c.table, c.name), digestOf(skOwned.get(chainId(c.table, c.name)) ?? []));
  }

  const { sharedIds, pools, tailEntries, tailBefore, tails } = sharedChains(sk.shared, skRules, listed);

  // Service ports.
  const units = new Map<string, UnitState>();
  const want = new Set<string>([...sk.chains, ...sk.shared].map((c) => chainId(c.table, c.name)));
  for (const src of desired.units) {
    const id = src.id;
    const before = inp.trusted?.units.get(id);
    const kept = src.unchanged && before ? keepUnit(before, present, pools, tainted) : undefined;
    if (kept) {
      for (const c of kept.chains) want.add(chainId(c.table, c.name));
      units.set(id, kept);
      continue;
    }
    const unit = src.unit();
    for (const c of unit.chains) want.add(chainId(c.table, c.name));
    units.set(
      id,
      writeUnit(plan, unit, src.unit, enc, {
        present,
        listed,
        pools,
        tailBefore,
        sharedIds,
        before,
        tainted,
      }),
    );
    if (plan.size > DRAIN_OPS) {
      await inp.drain(plan);
      plan = new Plan();
    }
  }

  // Tails that were missing or out of place go at the end.
  for (const c of sk.shared) {
    const id = chainId(c.table, c.name);
    if (tailBefore.get(id) !== undefined) continue;
    plan.group();
    for (const t of tails)
      if (t.rule.table === c.table && t.rule.chain === c.name) tailEntries.push(addShared(plan, c.table, t, undefined));
  }
  // Rules of shared chains nobody wants.
  for (const c of sk.shared)
    deleteAll(
      plan,
      c,
      pools
        .get(chainId(c.table, c.name))!
        .untaken()
        .map((e) => e.handle),
    );

  const jumpEntries = writeJumps(plan, jumps, kernel, inp.isOurs);
  writeStale(plan, want, kernel, inp.isOurs);
  const skeleton: UnitState = {
    chains: [...sk.chains, ...sk.shared],
    content: skContent,
    shared: [...tailEntries, ...jumpEntries],
  };
  return { plan, state: { skeleton, units } };
}

/**
 * Shared chains: what the kernel has (a pool per chain, from which units take their rules), and
 * where the tail (the skeleton's last rules) stands: kept only if it is complete, in order, and
 * nothing but tail follows it.
 */
function sharedChains(
  shared: readonly ChainRef[],
  skRules: readonly Encoded[],
  listed: (c: ChainRef) => readonly ListedEntry[],
) {
  const sharedIds = new Set(shared.map((c) => chainId(c.table, c.name)));
  const pools = new Map<string, Pool>();
  const tailEntries: SharedEntry[] = [];
  const tailBefore = new Map<string, bigint | undefined>();
  const tails = skRules.filter((r) => sharedIds.has(chainId(r.rule.table, r.rule.chain)));
  for (const c of shared) {
    const id = chainId(c.table, c.name);
    const pool = new Pool(listed(c));
    pools.set(id, pool);
    const mine = tails.filter((t) => t.rule.table === c.table && t.rule.chain === c.name);
    const kept = mine.map((t) => pool.take(t.key));
    const firstIdx = kept[0] ? pool.all.indexOf(kept[0]) : -1;
    const ok =
      kept.every((k, i) => k !== undefined && pool.all.indexOf(k) === firstIdx + i) &&
      firstIdx + kept.length === pool.all.length;
    if (ok && kept.length > 0) {
      tailBefore.set(id, kept[0]!.handle);
      mine.forEach((t, i) => tailEntries.push({ table: c.table, chain: c.name, key: t.key, handle: kept[i]!.handle }));
    } else {
      for (const k of kept) if (k) pool.release(k);
      tailBefore.set(id, undefined);
    }
  }
  return { sharedIds, pools, tailEntries, tailBefore, tails };
}

/**
 * A unit unchanged since the last trusted sync, kept as committed when the kernel still has
 * its chains untouched by others and every one of its shared rules; undefined (nothing taken)
 * otherwise.
 */
function keepUnit(
  before: UnitState,
  present: (t: IptTable, name: string) => boolean,
  pools: Map<string, Pool>,
  tainted: (t: IptTable, name: string) => boolean,
): UnitState | undefined {
  if (!before.chains.every((c) => present(c.table, c.name) && !tainted(c.table, c.name))) return undefined;
  const taken: [Pool, ListedEntry][] = [];
  const shared: SharedEntry[] = [];
  for (const e of before.shared) {
    const pool = pools.get(chainId(e.table, e.chain));
    const k = pool?.take(e.key);
    if (!pool || !k) {
      for (const [p, x] of taken) p.release(x);
      return undefined;
    }
    taken.push([pool, k]);
    shared.push({ ...e, handle: k.handle });
  }
  return { chains: before.chains, content: before.content, shared };
}

/** Flushes and refills an owned chain unless the kernel already holds exactly its rules. */
function writeOwned(plan: Plan, c: ChainRef, want: readonly Encoded[], have: readonly ListedEntry[] | undefined): void {
  if (have && have.length === want.length && contentDigest(have.map((e) => e.key)) === digestOf(want)) return;
  if (!have && want.length === 0) return;
  refill(plan, c, want, have !== undefined && have.length > 0);
}

interface UnitCtx {
  /** The unit as the last trusted sync committed it. */
  before: UnitState | undefined;
  present(t: IptTable, name: string): boolean;
  listed(c: ChainRef): readonly ListedEntry[];
  pools: Map<string, Pool>;
  tailBefore: Map<string, bigint | undefined>;
  sharedIds: Set<string>;
  tainted(t: IptTable, name: string): boolean;
}

/** `remake`: makes the same unit again (for its digests, computed only when a later sync asks). */
function writeUnit(plan: Plan, unit: Unit, remake: () => Unit, enc: Encoder, ctx: UnitCtx): UnitState {
  const rules = enc.all(unit.rules);
  const owned = rulesByChain(unit.chains, rules);
  const missing = unit.chains.filter((c) => !ctx.present(c.table, c.name));
  if (missing.length > 0) {
    plan.group();
    for (const c of missing) plan.chain(c.table, 'add', { kind: 'chain', name: c.name });
  }
  for (const c of leavesFirst(unit.chains, (x) => owned.get(chainId(x.table, x.name)) ?? [])) {
    const id = chainId(c.table, c.name);
    const want = owned.get(id) ?? [];
    if (!ctx.present(c.table, c.name)) {
      if (want.length > 0) refill(plan, c, want, false);
    } else if (
      ctx.before === undefined ||
      ctx.tainted(c.table, c.name) ||
      ctx.before.content.get(id) !== unitDigest(want)
    ) {
      refill(plan, c, want, true);
    }
  }
  const content = digestsLater(remake);
  const shared: SharedEntry[] = [];
  let inGroup = SHARED_PER_GROUP;
  for (const r of rules) {
    const id = chainId(r.rule.table, r.rule.chain);
    if (owned.has(id)) continue;
    const pool = ctx.pools.get(id);
    if (!pool)
      throw new Error(
        `rule for ${r.rule.table} ${r.rule.chain}: neither a chain of its service port nor a shared chain`,
      );
    const kept = pool.take(r.key);
    if (kept) {
      shared.push({ table: r.rule.table, chain: r.rule.chain, key: r.key, handle: kept.handle });
      continue;
    }
    if (inGroup >= SHARED_PER_GROUP) {
      plan.group();
      inGroup = 0;
    }
    shared.push(addShared(plan, r.rule.table, r, ctx.tailBefore.get(id)));
    inGroup++;
  }
  return { chains: unit.chains, content, shared };
}

/**
 * The unit's digests, made when first asked for. A function of its own: a closure made in
 * writeUnit would share its scope's context with the closures there that use the encoded rules
 * (V8 keeps one context per scope), and every committed unit would keep its rules alive.
 */
function digestsLater(remake: () => Unit): ChainDigests {
  return lazyDigests(() => unitDigests(remake()));
}

function deleteAll(plan: Plan, c: ChainRef, handles: readonly bigint[]): void {
  for (let i = 0; i < handles.length; i++) {
    if (i % SHARED_PER_GROUP === 0) plan.group();
    deleteRule(plan, c.table, c.name, handles[i]!);
  }
}

/**
 * Our jumps in the built-in chains: one of each, inserted at the top when missing (in reverse,
 * so that several land in the order given); extra copies, and jumps of ours to chains we no
 * longer jump to from there, deleted. Rules of others are never touched.
 */
function writeJumps(
  plan: Plan,
  jumps: readonly Encoded[],
  kernel: KernelState,
  isOurs: (t: IptTable, c: string) => boolean,
): SharedEntry[] {
  const out: SharedEntry[] = [];
  const byChain = new Map<string, Encoded[]>();
  for (const j of jumps) {
    const id = chainId(j.rule.table, j.rule.chain);
    let l = byChain.get(id);
    if (!l) byChain.set(id, (l = []));
    l.push(j);
  }
  plan.group();
  const seen = new Set<string>();
  for (const [id, want] of byChain) {
    const pool = new Pool(kernel.rules.get(id) ?? []);
    const entries = want.map((j) => {
      const k = pool.take(j.key);
      return { j, entry: { table: j.rule.table, chain: j.rule.chain, key: j.key, handle: k?.handle } as SharedEntry };
    });
    for (const { j, entry } of [...entries].reverse()) {
      if (entry.handle !== undefined) continue;
      plan.rule(j.rule.table, 'insert', j.nft, (h) => {
        entry.handle = h;
      });
    }
    for (const e of entries) out.push(e.entry);
    seen.add(id);
    const [table, chain] = splitId(id);
    for (const e of pool.untaken())
      if (e.jump !== undefined && isOurs(table, e.jump)) deleteRule(plan, table, chain, e.handle);
  }
  // Built-in chains we no longer jump from at all.
  for (const [id, entries] of kernel.rules) {
    const [table, chain] = splitId(id);
    if (seen.has(id) || !BUILTIN_CHAINS.has(chain)) continue;
    for (const e of entries)
      if (e.jump !== undefined && isOurs(table, e.jump)) deleteRule(plan, table, chain, e.handle);
  }
  return out;
}

function splitId(id: string): [IptTable, string] {
  const i = id.indexOf('/');
  return [id.slice(0, i) as IptTable, id.slice(i + 1)];
}

/**
 * Chains of ours nobody wants: flushed, then deleted, in late groups (a reference by someone else must not fail the
 * sync).
 */
function writeStale(
  plan: Plan,
  want: ReadonlySet<string>,
  kernel: KernelState,
  isOurs: (t: IptTable, c: string) => boolean,
): void {
  const stale: ChainRef[] = [];
  for (const [table, st] of kernel.tables) {
    for (const name of st.chains.keys())
      if (isOurs(table, name) && !want.has(chainId(table, name))) stale.push({ table, name });
  }
  for (let i = 0; i < stale.length; i++) {
    if (i % 500 === 0) plan.lateGroup();
    plan.chain(stale[i]!.table, 'flush', { kind: 'chain', name: stale[i]!.name });
  }
  for (let i = 0; i < stale.length; i++) {
    if (i % 500 === 0) plan.lateGroup();
    plan.chain(stale[i]!.table, 'delete', { kind: 'chain', name: stale[i]!.name });
  }
}
