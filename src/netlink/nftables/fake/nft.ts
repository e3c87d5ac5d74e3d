// FakeNft: an in-memory nf_tables table with the kernel's transaction semantics, for unit
// tests of the proxier (like knftables' Fake). run() applies the operations to a copy and
// commits only if every one succeeds, failing with the NetlinkError (errno name, operation
// label) the kernel would return. Pure: no sockets, no timers.

import { errnoNumber, NetlinkError } from '../../core/index.ts';
import type { ElementPagesOptions, NftInterface, RunStats } from '../client.ts';
import type { Operation } from '../object.ts';
import { NftTransaction, renderOp } from '../transaction.ts';
import type { NftChain, NftElement, NftObject, NftRule, NftSetLike, Scope } from '../types.ts';
import type { Verdict } from '../verdict.ts';
import { isVerdict } from '../verdict.ts';
import { applierOf } from './appliers.ts';
import type { FakeState } from './state.ts';
import { cloneState, emptyState, missing } from './state.ts';

/** Elements per page of FakeNft.listElementPages (small, so tests see large sets in several). */
export const FAKE_PAGE_ELEMENTS = 64;

export class FakeNft implements NftInterface {
  readonly scope: Scope;
  private state: FakeState;
  /** The last transaction run (successful or not), for assertions. */
  lastTransaction: NftTransaction | undefined;
  /** How many transactions were committed. */
  generationId = 0;

  constructor(scope: Scope) {
    this.scope = scope;
    this.state = emptyState();
  }

  newTransaction(): NftTransaction {
    return new NftTransaction(this.scope);
  }

  async run(tx: NftTransaction, signal?: AbortSignal): Promise<RunStats> {
    this.lastTransaction = tx;
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
    if (tx.error) throw tx.error;
    const next = cloneState(this.state);
    for (const op of tx.operations) this.apply(next, op);
    this.state = next;
    this.generationId++;
    return { messages: tx.size, bytes: 0 };
  }

  /** Each kind applies its own operations (appliers.ts); everything but the table needs the table. */
  private apply(s: FakeState, { verb, obj }: Operation): void {
    const op = { scope: this.scope, verb, obj };
    if (obj.kind !== 'table' && !s.table) return missing(op, 'no such table');
    applierOf(obj)(s, op);
  }

  // ---- reads (NftInterface) ----

  private needTable(what: string): void {
    // As the kernel: set dumps name the table and fail without it; chain and rule dumps filter.
    if (!this.state.table)
      throw new NetlinkError(`${what} ${this.scope.family} ${this.scope.table}`, errnoNumber('ENOENT'));
  }

  async list(kind: 'chain' | 'set' | 'map'): Promise<string[]> {
    if (kind === 'chain') return [...this.state.chains.keys()].sort();
    this.needTable('list sets');
    return [...this.state.sets.values()]
      .filter((s) => s.def.kind === kind)
      .map((s) => s.def.name)
      .sort();
  }

  async listChains(): Promise<NftChain[]> {
    return [...this.state.chains.values()].map((c) => c.chain);
  }

  async listSets(): Promise<NftSetLike[]> {
    this.needTable('list sets');
    return [...this.state.sets.values()].map((s) => s.def);
  }

  async listElements(set: string): Promise<NftElement[]> {
    const s = this.state.sets.get(set);
    if (!s)
      throw new NetlinkError(`list elements ${this.scope.family} ${this.scope.table} ${set}`, errnoNumber('ENOENT'));
    return [...s.elements.values()];
  }

  /**
   * Pages of FAKE_PAGE_ELEMENTS, as the kernel's dump replies hold a few hundred elements each.
   * Always a snapshot (the fake is never read while it changes): `_opts.onInterrupted` is never called.
   */
  async listElementPages(set: string, _opts?: ElementPagesOptions): Promise<(() => NftElement[])[]> {
    const all = await this.listElements(set);
    const pages: (() => NftElement[])[] = [];
    for (let i = 0; i < all.length; i += FAKE_PAGE_ELEMENTS) {
      const page = all.slice(i, i + FAKE_PAGE_ELEMENTS);
      pages.push(() => page);
    }
    return pages;
  }

  async listRules(chain?: string): Promise<NftRule[]> {
    if (chain === undefined) return [...this.state.chains.values()].flatMap((c) => c.rules);
    const c = this.state.chains.get(chain);
    if (!c)
      throw new NetlinkError(`list rules ${this.scope.family} ${this.scope.table} ${chain}`, errnoNumber('ENOENT'));
    return [...c.rules];
  }

  // ---- synchronous views for tests and packet tracers ----

  get tableExists(): boolean {
    return this.state.table !== undefined;
  }

  chainNames(): string[] {
    return [...this.state.chains.keys()];
  }

  chain(name: string): { chain: NftChain; rules: readonly NftRule[] } | undefined {
    return this.state.chains.get(name);
  }

  set(name: string): { def: NftSetLike; elements: readonly NftElement[] } | undefined {
    const s = this.state.sets.get(name);
    return s && { def: s.def, elements: [...s.elements.values()] };
  }

  /** Looks a key up in a verdict map (exact keys only), for tracers. */
  lookupVerdict(map: string, key: readonly (string | number)[]): Verdict | undefined {
    const s = this.state.sets.get(map);
    if (!s) return undefined;
    const k = JSON.stringify(key.map(String));
    for (const e of s.elements.values())
      if (JSON.stringify(e.key.map(String)) === k && e.value && isVerdict(e.value)) return e.value;
    return undefined;
  }

  /** The table in nft syntax, sorted (chains, sets and elements by name), for golden tests. */
  dump(): string {
    const s = this.state;
    if (!s.table) return '';
    const add = (obj: NftObject): string => renderOp(this.scope, { verb: 'add', obj });
    const chains = [...s.chains.values()].sort((a, b) => a.chain.name.localeCompare(b.chain.name));
    const sets = [...s.sets.values()].sort((a, b) => a.def.name.localeCompare(b.def.name));
    const lines = [add(s.table)];
    for (const c of chains) lines.push(add(c.chain));
    for (const set of sets) lines.push(add(set.def));
    for (const c of chains) for (const r of c.rules) lines.push(add(r));
    for (const set of sets) lines.push(...[...set.elements.values()].map(add).sort());
    return lines.map((l) => `${l}\n`).join('');
  }
}
