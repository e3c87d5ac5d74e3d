// NftTransaction: a list of (verb, object) operations on one (family, table), applied by
// NftClient.run() as one nfnetlink batch (all or nothing), in the spirit of knftables.
//
// The verbs never throw at the call site: the first invalid operation is latched, shown
// by toString() as a `# ERROR:` line, and reported by run(), so proxier code reads as a
// straight line. toString() renders nft syntax that `nft -f` accepts for rules built with
// the rule builder (rules decoded from the kernel render as `nft --debug=netlink` comments).

import type { OutMessage } from '../core/index.ts';
import { NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE } from '../core/index.ts';
import { NftMsg } from './constants.ts';
import { isDataType } from './datatypes.ts';
import { chainMessage } from './chain.ts';
import { ElementBuffer, elementMessages, encodeElementInto, estimateElementBytes, flushSetMessage, leadingIntervalEndInto, renderDuration, renderElement } from './element.ts';
import type { EncodeContext, NftExpr } from './expr/index.ts';
import { ident, nftMessage, quote } from './message.ts';
import { renderRuleBody, ruleMessage } from './rule.ts';
import { isConcatInterval, isInterval, renderSetType, setMessage } from './set.ts';
import { tableMessage } from './table.ts';
import type { NftChain, NftElement, NftObject, NftRule, NftSetLike, NftTable, Scope } from './types.ts';

export type Verb = 'add' | 'create' | 'insert' | 'replace' | 'flush' | 'delete' | 'destroy';

export interface Operation {
  verb: Verb;
  obj: NftObject;
}

/** Raised by run() for a transaction whose operations are invalid (nothing was sent). */
export class NftValidationError extends Error {
  override readonly name = 'NftValidationError';
}

const NAME_MAX = 256;

function validName(what: string, n: unknown): string | undefined {
  if (typeof n !== 'string' || n.length === 0) return `${what} needs a name`;
  // The kernel keeps a name up to its first NUL: it would hold an object we did not name.
  if (n.includes('\0')) return `${what} name ${JSON.stringify(n.slice(0, 40))} holds a NUL byte`;
  if (Buffer.byteLength(n) >= NAME_MAX) return `${what} name ${n.slice(0, 40)}... is longer than ${NAME_MAX - 1} bytes`;
  return undefined;
}

function validate(verb: Verb, o: NftObject): string | undefined {
  switch (o.kind) {
    case 'table':
      if (verb === 'insert' || verb === 'replace') return `cannot ${verb} a table`;
      return undefined;
    case 'chain':
      if (verb === 'insert' || verb === 'replace') return `cannot ${verb} a chain`;
      if ((verb === 'delete' || verb === 'destroy') && o.handle !== undefined) return undefined;
      return validName('chain', o.name);
    case 'set':
    case 'map': {
      if (verb === 'insert' || verb === 'replace') return `cannot ${verb} a ${o.kind}`;
      if ((verb === 'delete' || verb === 'destroy') && o.handle !== undefined) return undefined;
      const bad = validName(o.kind, o.name);
      if (bad) return bad;
      if (verb !== 'add' && verb !== 'create') return undefined;
      if (!Array.isArray(o.key) || o.key.length === 0) return `${o.kind} ${o.name} needs a key type`;
      const unknown = o.key.find((t) => !isDataType(t));
      if (unknown !== undefined) return `${o.kind} ${o.name}: unknown key type ${String(unknown)}`;
      if (o.typeof && o.typeof.length !== o.key.length) return `${o.kind} ${o.name}: typeof has ${o.typeof.length} fields, key has ${o.key.length}`;
      if (o.kind === 'map' && o.data !== 'verdict') {
        if (!Array.isArray(o.data) || o.data.length === 0) return `map ${o.name} needs a data type`;
        const bad2 = o.data.find((t) => !isDataType(t));
        if (bad2 !== undefined) return `map ${o.name}: unknown data type ${String(bad2)}`;
      }
      return undefined;
    }
    case 'element':
      if (verb !== 'add' && verb !== 'create' && verb !== 'delete' && verb !== 'destroy') return `cannot ${verb} an element`;
      if (!o.set) return 'element needs a set name';
      if (!Array.isArray(o.key) || o.key.length === 0) return `element of ${o.set} needs a key`;
      return undefined;
    case 'rule':
      if (verb === 'flush') return 'cannot flush a rule';
      if (verb === 'create') return 'cannot create a rule (use add)';
      if (!o.chain) return 'rule needs a chain';
      if ((verb === 'replace' || verb === 'delete' || verb === 'destroy') && o.handle === undefined) return `${verb} rule in ${o.chain} needs a handle`;
      if ((verb === 'add' || verb === 'insert' || verb === 'replace') && !Array.isArray(o.exprs)) return `rule in ${o.chain} needs expressions`;
      return undefined;
  }
  return `unknown object kind ${String((o as { kind?: unknown }).kind)}`;
}

/** Where run() finds the definition of a set the transaction does not create itself. */
export type SetSchema = (name: string) => NftSetLike | undefined;

export class NftTransaction {
  readonly scope: Scope;
  private readonly ops: Operation[] = [];
  private err: Error | undefined;

  constructor(scope: Scope) {
    this.scope = scope;
  }

  private push(verb: Verb, obj: NftObject): void {
    if (this.err) return;
    const bad = validate(verb, obj);
    if (bad) {
      this.err = new NftValidationError(`${verb} ${obj.kind}: ${bad}`);
      return;
    }
    this.ops.push({ verb, obj });
  }

  add(o: NftObject): void { this.push('add', o); }
  create(o: NftObject): void { this.push('create', o); }
  insert(r: NftRule): void { this.push('insert', r); }
  replace(r: NftRule): void { this.push('replace', r); }
  flush(o: NftTable | NftChain | NftSetLike): void { this.push('flush', o); }
  delete(o: NftObject): void { this.push('delete', o); }
  destroy(o: NftObject): void { this.push('destroy', o); }

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
      for (const { verb, obj } of this.ops) {
        if (verb !== 'destroy') expanded.ops.push({ verb, obj });
        else if (obj.kind === 'rule') throw new NftValidationError(`destroy rule ${obj.chain} handle ${obj.handle}: needs kernel 6.3+ (use delete)`);
        else if ((obj.kind === 'chain' || obj.kind === 'set' || obj.kind === 'map') && obj.name === undefined) {
          throw new NftValidationError(`destroy ${obj.kind} by handle: needs kernel 6.3+ (use delete)`);
        } else {
          const bare = obj.kind === 'chain' ? ({ kind: 'chain', name: obj.name } as const) : obj;
          expanded.ops.push({ verb: 'add', obj: bare }, { verb: 'delete', obj });
        }
      }
      return expanded.messages(schema);
    }
    const s = this.scope;
    const fam = `${s.family} ${ident(s.table)}`;
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
    const defs = new Map<string, NftSetLike>();
    const fresh = new Set<string>();
    const out: OutMessage[] = [];
    const create = (verb: Verb): number => NLM_F_CREATE | (verb === 'create' ? NLM_F_EXCL : 0);
    // Runs of element ops for the same (verb, set) are merged, so a caller that adds
    // elements one by one still gets many elements per message.
    let run: { verb: Verb; set: NftSetLike; buf: ElementBuffer } | undefined;
    const flushRun = (): void => {
      if (!run) return;
      const r = run;
      run = undefined;
      const del = r.verb === 'delete' || r.verb === 'destroy';
      const cmd = r.verb === 'delete' ? NftMsg.DELSETELEM : r.verb === 'destroy' ? NftMsg.DESTROYSETELEM : NftMsg.NEWSETELEM;
      const flags = del ? 0 : create(r.verb);
      out.push(...elementMessages(s, cmd, flags, r.set.name, del ? undefined : setId(r.set.name), r.buf, (n) => `${r.verb} element ${fam} ${ident(r.set.name)} (${n} elements)`));
    };
    const ops = this.ops;
    for (let i = 0; i < ops.length; i++) {
      const { verb, obj } = ops[i]!;
      // The common case first: one more element for the run in progress (a full sync has
      // hundreds of thousands); no label, no lookup.
      if (obj.kind === 'element' && run !== undefined && run.verb === verb && run.set.name === obj.set) {
        encodeRunElement(run.buf, run.set, obj, verb, fam);
        continue;
      }
      if (obj.kind !== 'element') flushRun();
      const label = obj.kind === 'element' ? '' : `${verb} ${obj.kind} ${fam}${'name' in obj ? ` ${ident(obj.name)}` : obj.kind === 'rule' ? ` ${ident(obj.chain)}` : ''}`;
      const del = verb === 'delete' || verb === 'destroy';
      switch (obj.kind) {
        case 'table': {
          if (verb === 'flush') out.push(nftMessage(NftMsg.DELRULE, s.family, 0, label, (w) => w.str(1, s.table)));
          else if (del) out.push(tableMessage(s, verb === 'delete' ? NftMsg.DELTABLE : NftMsg.DESTROYTABLE, 0, obj, label, false));
          else out.push(tableMessage(s, NftMsg.NEWTABLE, verb === 'create' ? NLM_F_EXCL : 0, obj, label, true));
          break;
        }
        case 'chain': {
          if (verb === 'flush') out.push(nftMessage(NftMsg.DELRULE, s.family, 0, label, (w) => w.str(1, s.table).str(2, obj.name)));
          else if (del) out.push(chainMessage(s, verb === 'delete' ? NftMsg.DELCHAIN : NftMsg.DESTROYCHAIN, 0, obj, label, false));
          else out.push(chainMessage(s, NftMsg.NEWCHAIN, create(verb), obj, label, true));
          break;
        }
        case 'set':
        case 'map': {
          if (verb === 'flush') out.push(flushSetMessage(s, NftMsg.DELSETELEM, obj.name, label));
          else if (del) {
            out.push(setMessage(s, verb === 'delete' ? NftMsg.DELSET : NftMsg.DESTROYSET, 0, obj, label, false, undefined));
            defs.delete(obj.name);
          } else {
            out.push(setMessage(s, NftMsg.NEWSET, create(verb), obj, label, true, setId(obj.name)));
            defs.set(obj.name, obj);
            if (isInterval(obj) && !isConcatInterval(obj)) fresh.add(obj.name);
          }
          break;
        }
        case 'element': {
          const def = defs.get(obj.set) ?? schema(obj.set);
          if (!def) throw new NftValidationError(`${verb} element ${fam} ${obj.set}: unknown set (add it in this transaction, or list sets first)`);
          if (!run || run.set.name !== def.name || run.verb !== verb) {
            flushRun();
            run = { verb, set: def, buf: new ElementBuffer(runLength(ops, i) * estimateElementBytes(def, !del)) };
            if (!del && fresh.has(def.name)) leadingIntervalEndInto(run.buf, def);
          }
          fresh.delete(def.name);
          encodeRunElement(run.buf, def, obj, verb, fam);
          break;
        }
        case 'rule': {
          const body = { handle: false, body: true };
          if (verb === 'add') out.push(ruleMessage(s, NftMsg.NEWRULE, NLM_F_CREATE | NLM_F_APPEND, obj, label, body, ctx));
          else if (verb === 'insert') out.push(ruleMessage(s, NftMsg.NEWRULE, NLM_F_CREATE, obj, label, body, ctx));
          else if (verb === 'replace') out.push(ruleMessage(s, NftMsg.NEWRULE, NLM_F_REPLACE, obj, `${label} handle ${obj.handle}`, { handle: true, body: true }, ctx));
          else out.push(ruleMessage(s, verb === 'delete' ? NftMsg.DELRULE : NftMsg.DESTROYRULE, 0, obj, `${label} handle ${obj.handle}`, { handle: true, body: false }, ctx));
          break;
        }
      }
    }
    flushRun();
    return out;
  }

  toString(): string {
    const lines = this.ops.map((op) => renderOp(this.scope, op));
    if (this.err) lines.push(`# ERROR: ${this.err.message}`);
    return lines.map((l) => `${l}\n`).join('');
  }
}

/** How many element operations from `start` on share its verb and set (the run messages() merges). */
function runLength(ops: readonly Operation[], start: number): number {
  const { verb, obj } = ops[start]!;
  const set = (obj as NftElement).set;
  let end = start + 1;
  while (end < ops.length) {
    const o = ops[end]!;
    if (o.verb !== verb || o.obj.kind !== 'element' || o.obj.set !== set) break;
    end++;
  }
  return end - start;
}

const WITH_DATA = { withData: true };
const KEYS_ONLY = { withData: false };

/** Appends an element to a run's buffer; a problem becomes an NftValidationError naming the element. */
function encodeRunElement(buf: ElementBuffer, def: NftSetLike, obj: NftElement, verb: Verb, fam: string): void {
  try {
    encodeElementInto(buf, def, obj, verb === 'delete' || verb === 'destroy' ? KEYS_ONLY : WITH_DATA);
  } catch (e) {
    throw new NftValidationError(`${verb} element ${fam} ${obj.set} { ${safeRender(obj)} }: ${(e as Error).message}`, { cause: e });
  }
}

function safeRender(e: NftElement): string {
  try {
    return renderElement(e);
  } catch {
    return '?';
  }
}

function braces(parts: string[]): string {
  return parts.length > 0 ? ` { ${parts.map((p) => `${p} ;`).join(' ')} }` : '';
}

export function renderSetBody(o: NftSetLike): string[] {
  const parts = [renderSetType(o)];
  const flags = [...(o.flags ?? [])];
  if (o.timeoutMs !== undefined && !flags.includes('timeout')) flags.push('timeout');
  if (flags.length > 0) parts.push(`flags ${flags.join(',')}`);
  if (o.timeoutMs !== undefined) parts.push(`timeout ${renderDuration(o.timeoutMs)}`);
  if (o.size !== undefined) parts.push(`size ${o.size}`);
  if (o.comment !== undefined) parts.push(`comment ${quote(o.comment)}`);
  return parts;
}

export function renderChainBody(o: NftChain): string[] {
  const parts: string[] = [];
  if (o.base) {
    parts.push(`type ${o.base.type} hook ${o.base.hook}${o.base.device !== undefined ? ` device ${quote(o.base.device)}` : ''} priority ${o.base.priority}`);
    if (o.base.policy) parts.push(`policy ${o.base.policy}`);
  }
  if (o.comment !== undefined) parts.push(`comment ${quote(o.comment)}`);
  return parts;
}

export function renderOp(scope: Scope, { verb, obj }: Operation): string {
  const fam = `${scope.family} ${ident(scope.table)}`;
  const del = verb === 'delete' || verb === 'destroy';
  switch (obj.kind) {
    case 'table':
      if (del && obj.handle !== undefined) return `${verb} table ${scope.family} handle ${obj.handle}`;
      return `${verb} table ${fam}${del || verb === 'flush' ? '' : braces(obj.comment !== undefined ? [`comment ${quote(obj.comment)}`] : [])}`;
    case 'chain':
      if (del && obj.handle !== undefined) return `${verb} chain ${fam} handle ${obj.handle}`;
      return `${verb} chain ${fam} ${ident(obj.name)}${del || verb === 'flush' ? '' : braces(renderChainBody(obj))}`;
    case 'set':
    case 'map':
      if (del && obj.handle !== undefined) return `${verb} ${obj.kind} ${fam} handle ${obj.handle}`;
      return `${verb} ${obj.kind} ${fam} ${ident(obj.name)}${del || verb === 'flush' ? '' : braces(renderSetBody(obj))}`;
    case 'element': {
      const e = del ? { ...obj, value: undefined } : obj;
      const { value: _v, ...rest } = e;
      return `${verb} element ${fam} ${ident(obj.set)} { ${safeRender(e.value === undefined ? (rest as NftElement) : obj)} }`;
    }
    case 'rule': {
      const where = `${fam} ${ident(obj.chain)}`;
      if (del) return `${verb} rule ${where} handle ${obj.handle}`;
      if (verb === 'replace') return `replace rule ${where} handle ${obj.handle} ${renderRuleBody(obj)}`;
      return `${verb} rule ${where}${obj.position !== undefined ? ` position ${obj.position}` : ''} ${renderRuleBody(obj)}`;
    }
  }
}

export type { NftExpr };
