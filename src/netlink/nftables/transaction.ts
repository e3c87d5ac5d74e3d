// NftTransaction: a list of (verb, object) operations on one (family, table), applied by
// NftClient.run() as one nfnetlink batch (all or nothing), in the spirit of knftables.
//
// The verbs never throw at the call site: the first invalid operation is latched, shown
// by toString() as a `# ERROR:` line, and reported by run(), so proxier code reads as a
// straight line. toString() renders nft syntax that `nft -f` accepts for rules built with
// the rule builder (rules decoded from the kernel render as `nft --debug=netlink` comments).
//
// What an operation means for each kind of object (checks, messages, nft text) lives with
// the kind (table.ts, chain.ts, set.ts, element.ts, rule.ts); this file only walks the list.

import type { OutMessage } from '../core/index.ts';
import type { EncodeContext, NftExpr } from './expr/index.ts';
import type { EncodeState, Operation, SetSchema, Verb } from './object.ts';
import { NftValidationError, scopeText } from './object.ts';
import { codecOf, invalidOperation } from './objects.ts';
import type { NftChain, NftObject, NftRule, NftSetLike, NftTable, Scope } from './types.ts';

export { NftValidationError } from './object.ts';
export type { Operation, SetSchema, Verb } from './object.ts';
export { renderChainBody } from './chain.ts';
export { renderSetBody } from './set.ts';

export class NftTransaction {
  readonly scope: Scope;
  private readonly ops: Operation[] = [];
  private err: Error | undefined;

  constructor(scope: Scope) {
    this.scope = scope;
  }

  private push(verb: Verb, obj: NftObject): void {
    if (this.err) return;
    const bad = invalidOperation(verb, obj);
    if (bad) {
      this.err = new NftValidationError(`${verb} ${obj.kind}: ${bad}`);
      return;
    }
    this.ops.push({ verb, obj });
  }

  add(o: NftObject): void {
    this.push('add', o);
  }
  create(o: NftObject): void {
    this.push('create', o);
  }
  insert(r: NftRule): void {
    this.push('insert', r);
  }
  replace(r: NftRule): void {
    this.push('replace', r);
  }
  flush(o: NftTable | NftChain | NftSetLike): void {
    this.push('flush', o);
  }
  delete(o: NftObject): void {
    this.push('delete', o);
  }
  destroy(o: NftObject): void {
    this.push('destroy', o);
  }

  /** Number of operations queued. */
  get size(): number {
    return this.ops.length;
  }

  /** The first invalid operation, if any. */
  get error(): Error | undefined {
    return this.err;
  }

  get operations(): readonly Operation[] {
    return this.ops;
  }

  /**
   * Encodes the operations as nf_tables messages. Throws NftValidationError when an element
   * does not fit its set or names a set that is neither created here nor known to `schema`.
   *
   * `emulateDestroy`: kernels before 6.3 have no DESTROY messages; then destroy is sent as
   * add + delete (as knftables' EmulateDestroy does), which needs the object's full
   * definition, and is refused for rules.
   */
  messages(schema: SetSchema = () => undefined, opts: { emulateDestroy?: boolean } = {}): OutMessage[] {
    if (this.err) throw this.err;
    if (opts.emulateDestroy && this.ops.some((o) => o.verb === 'destroy')) {
      const expanded = new NftTransaction(this.scope);
      for (const op of this.ops) {
        if (op.verb === 'destroy') expanded.ops.push(...codecOf(op.obj).emulateDestroy(op.obj));
        else expanded.ops.push(op);
      }
      return expanded.messages(schema);
    }
    const ids = new Map<string, number>();
    const setId = (name: string): number => {
      let id = ids.get(name);
      if (id === undefined) {
        id = ids.size + 1;
        ids.set(name, id);
      }
      return id;
    };
    const ctx: EncodeContext = { setId };
    const ops = this.ops;
    const st: EncodeState = {
      scope: this.scope,
      fam: scopeText(this.scope),
      ctx,
      schema,
      ops,
      out: [],
      defs: new Map(),
      fresh: new Set(),
      pending: undefined,
    };
    for (let i = 0; i < ops.length; i++) {
      const { verb, obj } = ops[i]!;
      // Pending elements become messages before anything else is encoded, so that set ids
      // are numbered in the order of the messages.
      if (st.pending !== undefined && obj.kind !== 'element') st.pending.flush(st);
      codecOf(obj).encode(st, verb, obj, i);
    }
    st.pending?.flush(st);
    return st.out;
  }

  toString(): string {
    const lines = this.ops.map((op) => renderOp(this.scope, op));
    if (this.err) lines.push(`# ERROR: ${this.err.message}`);
    return lines.map((l) => `${l}\n`).join('');
  }
}

/** One operation in nft syntax. */
export function renderOp(scope: Scope, { verb, obj }: Operation): string {
  return codecOf(obj).render(scope, verb, obj);
}

export type { NftExpr };
