// FakeNft: an in-memory nf_tables table with the kernel's transaction semantics, for unit
// tests of the proxier (like knftables' Fake). run() applies the operations to a copy and
// commits only if every one succeeds, failing with the NetlinkError (errno name, operation
// label) the kernel would return. Pure: no sockets, no timers.

import { errnoNumber, NetlinkError } from '../core/index.ts';
import { encodeElement, renderElement } from './element.ts';
import type { NftExpr } from './expr/index.ts';
import { ident } from './message.ts';
import { renderRuleBody } from './rule.ts';
import type { NftInterface, RunStats } from './client.ts';
import type { Operation } from './transaction.ts';
import { NftTransaction, NftValidationError, renderChainBody, renderSetBody } from './transaction.ts';
import type { NftChain, NftElement, NftRule, NftSetLike, NftTable, Scope } from './types.ts';
import type { Verdict } from './verdict.ts';
import { isVerdict } from './verdict.ts';

interface FakeChain {
  chain: NftChain;
  rules: NftRule[];
}

interface FakeSet {
  def: NftSetLike;
  /** Keyed by the encoded key bytes (hex), so equal keys written differently collide as in the kernel. */
  elements: Map<string, NftElement>;
}

interface State {
  table: NftTable | undefined;
  chains: Map<string, FakeChain>;
  sets: Map<string, FakeSet>;
  nextHandle: bigint;
}

const clone = (s: State): State => ({
  table: s.table ? { ...s.table } : undefined,
  chains: new Map([...s.chains].map(([k, v]) => [k, { chain: { ...v.chain }, rules: [...v.rules] }])),
  sets: new Map([...s.sets].map(([k, v]) => [k, { def: v.def, elements: new Map(v.elements) }])),
  nextHandle: s.nextHandle,
});

const verdictTargets = (exprs: readonly NftExpr[]): string[] =>
  exprs.flatMap((e) => (e.type === 'immediate' && 'verdict' in e && 'chain' in e.verdict ? [e.verdict.chain] : []));
const setRefs = (exprs: readonly NftExpr[]): string[] => exprs.flatMap((e) => (e.type === 'lookup' || e.type === 'dynset' ? [e.set] : []));

export class FakeNft implements NftInterface {
  readonly scope: Scope;
  private state: State;
  /** The last transaction run (successful or not), for assertions. */
  lastTransaction: NftTransaction | undefined;
  /** How many transactions were committed. */
  generationId = 0;

  constructor(scope: Scope) {
    this.scope = scope;
    this.state = { table: undefined, chains: new Map(), sets: new Map(), nextHandle: 1n };
  }

  newTransaction(): NftTransaction {
    return new NftTransaction(this.scope);
  }

  async run(tx: NftTransaction, signal?: AbortSignal): Promise<RunStats> {
    this.lastTransaction = tx;
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
    if (tx.error) throw tx.error;
    const next = clone(this.state);
    for (const op of tx.operations) this.apply(next, op);
    this.state = next;
    this.generationId++;
    return { messages: tx.size, bytes: 0 };
  }

  private fail(op: Operation, code: string, why?: string): never {
    const o = op.obj;
    const name = 'name' in o ? ` ${o.name}` : o.kind === 'rule' ? ` ${o.chain}` : o.kind === 'element' ? ` ${o.set}` : '';
    throw new NetlinkError(`${op.verb} ${o.kind} ${this.scope.family} ${this.scope.table}${name}${why ? ` (${why})` : ''}`, errnoNumber(code));
  }

  private handle(s: State): bigint {
    return s.nextHandle++;
  }

  private chainRefs(s: State, name: string): boolean {
    for (const c of s.chains.values()) for (const r of c.rules) if (verdictTargets(r.exprs).includes(name)) return true;
    for (const set of s.sets.values()) {
      for (const e of set.elements.values()) if (e.value && isVerdict(e.value) && 'chain' in e.value && e.value.chain === name) return true;
    }
    return false;
  }

  private apply(s: State, op: Operation): void {
    const { verb, obj } = op;
    const del = verb === 'delete' || verb === 'destroy';
    if (obj.kind === 'table') {
      if (del) {
        if (!s.table) {
          if (verb === 'destroy') return;
          this.fail(op, 'ENOENT');
        }
        s.table = undefined;
        s.chains.clear();
        s.sets.clear();
        return;
      }
      if (verb === 'flush') {
        if (!s.table) this.fail(op, 'ENOENT');
        for (const c of s.chains.values()) c.rules = [];
        return;
      }
      if (s.table && verb === 'create') this.fail(op, 'EEXIST');
      s.table = { ...obj, handle: s.table?.handle ?? this.handle(s) };
      return;
    }
    if (!s.table) {
      if (verb === 'destroy') return;
      this.fail(op, 'ENOENT', 'no such table');
    }
    switch (obj.kind) {
      case 'chain': {
        const name = obj.name ?? [...s.chains.values()].find((c) => c.chain.handle === obj.handle)?.chain.name;
        const cur = name !== undefined ? s.chains.get(name) : undefined;
        if (del) {
          if (!cur) {
            if (verb === 'destroy') return;
            this.fail(op, 'ENOENT');
          }
          if (this.chainRefs(s, cur.chain.name)) this.fail(op, 'EBUSY', 'chain is the target of a jump, goto or verdict map element');
          s.chains.delete(cur.chain.name);
          return;
        }
        if (verb === 'flush') {
          if (!cur) this.fail(op, 'ENOENT');
          cur.rules = [];
          return;
        }
        if (cur) {
          if (verb === 'create') this.fail(op, 'EEXIST');
          if (JSON.stringify(cur.chain.base) !== JSON.stringify(obj.base) && obj.base !== undefined) this.fail(op, 'EOPNOTSUPP', 'base chain spec differs');
          return;
        }
        s.chains.set(obj.name, { chain: { ...obj, handle: this.handle(s) }, rules: [] });
        return;
      }
      case 'set':
      case 'map': {
        const name = obj.name ?? [...s.sets.values()].find((x) => x.def.handle === obj.handle)?.def.name;
        const cur = name !== undefined ? s.sets.get(name) : undefined;
        if (del) {
          if (!cur) {
            if (verb === 'destroy') return;
            this.fail(op, 'ENOENT');
          }
          for (const c of s.chains.values()) for (const r of c.rules) if (setRefs(r.exprs).includes(cur.def.name)) this.fail(op, 'EBUSY', 'set is used by a rule');
          s.sets.delete(cur.def.name);
          return;
        }
        if (verb === 'flush') {
          if (!cur) this.fail(op, 'ENOENT');
          cur.elements = new Map();
          return;
        }
        if (cur) {
          if (verb === 'create') this.fail(op, 'EEXIST');
          const same = (a: NftSetLike, b: NftSetLike): boolean =>
            a.kind === b.kind && JSON.stringify(a.key) === JSON.stringify(b.key) && (a.kind !== 'map' || b.kind !== 'map' || JSON.stringify(a.data) === JSON.stringify(b.data));
          if (!same(cur.def, obj)) this.fail(op, 'EEXIST', 'exists with another type');
          return;
        }
        s.sets.set(obj.name, { def: { ...obj, handle: this.handle(s) }, elements: new Map() });
        return;
      }
      case 'element': {
        const set = s.sets.get(obj.set);
        if (!set) {
          if (verb === 'destroy') return;
          this.fail(op, 'ENOENT', 'no such set');
        }
        let key: string;
        try {
          key = encodeElement(set.def, { kind: 'element', set: obj.set, key: obj.key }, { withData: false }).map((b) => Buffer.from(b).toString('hex')).join('');
          if (!del) encodeElement(set.def, obj, { withData: true });
        } catch (e) {
          throw new NftValidationError(`${verb} element ${obj.set}: ${(e as Error).message}`, { cause: e });
        }
        const cur = set.elements.get(key);
        if (del) {
          if (!cur) {
            if (verb === 'destroy') return;
            this.fail(op, 'ENOENT', 'no such element');
          }
          set.elements.delete(key);
          return;
        }
        const v = obj.value;
        if (v && isVerdict(v) && 'chain' in v && !s.chains.has(v.chain)) this.fail(op, 'ENOENT', `no chain ${v.chain}`);
        if (cur) {
          if (verb === 'create') this.fail(op, 'EEXIST');
          if (JSON.stringify(cur.value) !== JSON.stringify(obj.value)) this.fail(op, 'EEXIST', 'element exists with other data');
        }
        set.elements.set(key, obj);
        return;
      }
      case 'rule': {
        const c = s.chains.get(obj.chain);
        if (!c) {
          if (verb === 'destroy') return;
          this.fail(op, 'ENOENT', 'no such chain');
        }
        const at = obj.handle !== undefined ? c.rules.findIndex((r) => r.handle === obj.handle) : -1;
        if (del) {
          if (at < 0) {
            if (verb === 'destroy') return;
            this.fail(op, 'ENOENT', 'no such rule');
          }
          c.rules.splice(at, 1);
          return;
        }
        for (const t of verdictTargets(obj.exprs)) if (!s.chains.has(t)) this.fail(op, 'ENOENT', `no chain ${t}`);
        for (const n of setRefs(obj.exprs)) if (!s.sets.has(n)) this.fail(op, 'ENOENT', `no set ${n}`);
        if (verb === 'replace') {
          if (at < 0) this.fail(op, 'ENOENT', 'no such rule');
          c.rules[at] = { ...obj };
          return;
        }
        const r: NftRule = { ...obj, handle: this.handle(s) };
        delete r.position;
        const pos = obj.position !== undefined ? c.rules.findIndex((x) => x.handle === obj.position) : -1;
        if (obj.position !== undefined && pos < 0) this.fail(op, 'ENOENT', 'no rule at position');
        if (verb === 'add') c.rules.splice(pos < 0 ? c.rules.length : pos + 1, 0, r);
        else c.rules.splice(pos < 0 ? 0 : pos, 0, r);
        return;
      }
    }
  }

  // ---- reads (NftInterface) ----

  private needTable(what: string): void {
    // As the kernel: set dumps name the table and fail without it; chain and rule dumps filter.
    if (!this.state.table) throw new NetlinkError(`${what} ${this.scope.family} ${this.scope.table}`, errnoNumber('ENOENT'));
  }

  async list(kind: 'chain' | 'set' | 'map'): Promise<string[]> {
    if (kind === 'chain') return [...this.state.chains.keys()].sort();
    this.needTable('list sets');
    return [...this.state.sets.values()].filter((s) => s.def.kind === kind).map((s) => s.def.name).sort();
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
    if (!s) throw new NetlinkError(`list elements ${this.scope.family} ${this.scope.table} ${set}`, errnoNumber('ENOENT'));
    return [...s.elements.values()];
  }

  async listRules(chain?: string): Promise<NftRule[]> {
    if (chain === undefined) return [...this.state.chains.values()].flatMap((c) => c.rules);
    const c = this.state.chains.get(chain);
    if (!c) throw new NetlinkError(`list rules ${this.scope.family} ${this.scope.table} ${chain}`, errnoNumber('ENOENT'));
    return [...c.rules];
  }

  // ---- synchronous views for tests and packet tracers ----

  get tableExists(): boolean {
    return this.state.table !== undefined;
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
    for (const e of s.elements.values()) if (JSON.stringify(e.key.map(String)) === k && e.value && isVerdict(e.value)) return e.value;
    return undefined;
  }

  /** The table in nft syntax, sorted (chains, sets and elements by name), for golden tests. */
  dump(): string {
    const s = this.state;
    if (!s.table) return '';
    const fam = `${this.scope.family} ${ident(this.scope.table)}`;
    const lines: string[] = [`add table ${fam}${s.table.comment !== undefined ? ` { comment "${s.table.comment}" ; }` : ''}`];
    const chains = [...s.chains.values()].sort((a, b) => a.chain.name.localeCompare(b.chain.name));
    const sets = [...s.sets.values()].sort((a, b) => a.def.name.localeCompare(b.def.name));
    for (const c of chains) {
      const body = renderChainBody(c.chain);
      lines.push(`add chain ${fam} ${ident(c.chain.name)}${body.length > 0 ? ` { ${body.map((p) => `${p} ;`).join(' ')} }` : ''}`);
    }
    for (const set of sets) lines.push(`add ${set.def.kind} ${fam} ${ident(set.def.name)} { ${renderSetBody(set.def).map((p) => `${p} ;`).join(' ')} }`);
    for (const c of chains) for (const r of c.rules) lines.push(`add rule ${fam} ${ident(c.chain.name)} ${renderRuleBody(r)}`);
    for (const set of sets) {
      const els = [...set.elements.values()].map((e) => renderElement(e)).sort();
      for (const e of els) lines.push(`add element ${fam} ${ident(set.def.name)} { ${e} }`);
    }
    return lines.map((l) => `${l}\n`).join('');
  }
}
