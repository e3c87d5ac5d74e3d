// Set and map elements: the element's part of transactions (runs of element operations
// packed many per message, encoded by element-encode.ts), decoding what the kernel lists
// (interval ends paired back into ranges) and nft syntax. FakeNft's rules live in fake/element.ts.

import { errorMessage } from '../../base/errors.ts';
import type { InMessage } from '../core/index.ts';
import { AttrCursor, NetlinkDecodeError, NLM_F_CREATE, NLM_F_EXCL } from '../core/index.ts';
import {
  NFT_SET_ELEM_INTERVAL_END,
  NFTA_DATA_VALUE,
  NFTA_DATA_VERDICT,
  NFTA_SET_ELEM_DATA,
  NFTA_SET_ELEM_EXPIRATION,
  NFTA_SET_ELEM_FLAGS,
  NFTA_SET_ELEM_KEY,
  NFTA_SET_ELEM_KEY_END,
  NFTA_SET_ELEM_LIST_ELEMENTS,
  NFTA_SET_ELEM_LIST_SET,
  NFTA_SET_ELEM_LIST_TABLE,
  NFTA_SET_ELEM_TIMEOUT,
  NFTA_SET_ELEM_USERDATA,
  NftMsg,
} from './constants.ts';
import type { DataType } from './datatypes.ts';
import { DATATYPES, decodeField, formatV6, keyLength, splitFields } from './datatypes.ts';
import {
  cmpBytes,
  ElementBuffer,
  elementMessages,
  encodeElementInto,
  estimateElementBytes,
  fieldBounds,
  leadingIntervalEndInto,
} from './element-encode.ts';
import { ident, received, renderDuration } from './message.ts';
import type { EncodeState, ObjectCodec, Operation, PendingElements, Verb } from './object.ts';
import { addThenDelete, createFlags, isRemoval, NftValidationError, removalCmd, scopeText } from './object.ts';
import { isConcatInterval, isInterval } from './set-shape.ts';
import type { KeyField, NftElement, NftSetLike } from './types.ts';
import {
  decodeUdata,
  SET_ELEM_F_INTERVAL_OPEN,
  udGet,
  udReadStr,
  udReadU32,
  UD_SET_ELEM_COMMENT,
  UD_SET_ELEM_FLAGS,
} from './udata.ts';
import type { Verdict } from './verdict.ts';
import { isVerdict, renderVerdict, verdictAt } from './verdict.ts';

// Where the rule builder finds it (nft prints element and dynset timeouts alike).
export { renderDuration } from './message.ts';

function decrement(b: Uint8Array): Uint8Array {
  const out = Uint8Array.from(b);
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]! > 0) {
      out[i]!--;
      return out;
    }
    out[i] = 0xff;
  }
  return out;
}

/** One element as the kernel holds it. */
export interface RawElement {
  key: Uint8Array;
  keyEnd?: Uint8Array;
  flags: number;
  data?: Uint8Array | Verdict;
  timeoutMs?: bigint;
  expirationMs?: bigint;
  comment?: string;
  open?: boolean;
}

export function decodeRawElements(msg: Pick<InMessage, 'payload'>): {
  table: string;
  set: string;
  elements: RawElement[];
} {
  const { attrs: a } = received(msg, 'setelem');
  const table = a.require(NFTA_SET_ELEM_LIST_TABLE, a.str(NFTA_SET_ELEM_LIST_TABLE));
  const set = a.require(NFTA_SET_ELEM_LIST_SET, a.str(NFTA_SET_ELEM_LIST_SET));
  const elements: RawElement[] = [];
  const list = a.get(NFTA_SET_ELEM_LIST_ELEMENTS);
  if (list) {
    const c = cursor.reset(list.data, 'setelem/elem', list.offset + 4);
    // nft numbers the entries 1, 2, 3 ...; the kernel (and we) take any type.
    while (c.next()) {
      const r = elementAt(c);
      if (r) elements.push(r);
    }
    c.check();
  }
  return { table, set, elements };
}

/** One cursor for every element list decoded (decoding is synchronous: never two at once). */
const cursor = new AttrCursor(new Uint8Array(0), '', 0, 'net');

/** The NFTA_LIST_ELEM the cursor is on; undefined once the cursor latched an error. */
function elementAt(c: AttrCursor): RawElement | undefined {
  const at = c.offset;
  let key: Uint8Array | undefined;
  let keyEnd: Uint8Array | undefined;
  let flags: number | undefined;
  let data: Uint8Array | Verdict | undefined;
  let timeout: bigint | undefined;
  let expiration: bigint | undefined;
  let userdata: Uint8Array | undefined;
  const outer = c.enter();
  while (c.next()) {
    const type = c.type();
    if (type === NFTA_SET_ELEM_KEY) key ??= dataValueAt(c);
    else if (type === NFTA_SET_ELEM_KEY_END) keyEnd ??= dataValueAt(c);
    else if (type === NFTA_SET_ELEM_FLAGS) flags ??= c.u32();
    else if (type === NFTA_SET_ELEM_DATA) data ??= elementDataAt(c);
    else if (type === NFTA_SET_ELEM_TIMEOUT) timeout ??= c.u64();
    else if (type === NFTA_SET_ELEM_EXPIRATION) expiration ??= c.u64();
    else if (type === NFTA_SET_ELEM_USERDATA) userdata ??= c.bytes();
  }
  c.exit(outer);
  if (c.err()) return undefined;
  if (!key) throw new NetlinkDecodeError(c.where, at, 'element without a key');
  const r: RawElement = { key, flags: flags ?? 0 };
  if (keyEnd) r.keyEnd = keyEnd;
  if (data) r.data = data;
  if (timeout !== undefined) r.timeoutMs = timeout;
  if (expiration !== undefined) r.expirationMs = expiration;
  if (userdata) {
    const tlvs = decodeUdata(userdata, 'element userdata');
    const comment = udGet(tlvs, UD_SET_ELEM_COMMENT);
    if (comment) r.comment = udReadStr(comment);
    const f = udGet(tlvs, UD_SET_ELEM_FLAGS);
    if (f && udReadU32(f) & SET_ELEM_F_INTERVAL_OPEN) r.open = true;
  }
  return r;
}

/** A copy of the NFTA_DATA_VALUE inside the NFTA_DATA_* nest the cursor is on. */
function dataValueAt(c: AttrCursor): Uint8Array | undefined {
  let value: Uint8Array | undefined;
  const outer = c.enter();
  while (c.next()) if (c.type() === NFTA_DATA_VALUE) value ??= Uint8Array.from(c.bytes());
  c.exit(outer);
  return value;
}

/** NFTA_SET_ELEM_DATA: a verdict, or the value's bytes (copied). */
function elementDataAt(c: AttrCursor): Uint8Array | Verdict | undefined {
  const at = c.offset;
  let value: Uint8Array | undefined;
  let verdict: Verdict | undefined;
  const outer = c.enter();
  while (c.next()) {
    if (c.type() === NFTA_DATA_VERDICT) verdict ??= verdictAt(c);
    else if (c.type() === NFTA_DATA_VALUE) value ??= Uint8Array.from(c.bytes());
  }
  c.exit(outer);
  if (c.err()) return undefined;
  if (verdict) return verdict;
  if (!value) throw new NetlinkDecodeError(c.where, at, 'element data without a value');
  return value;
}

function isPrefixRange(low: Uint8Array, high: Uint8Array): number | undefined {
  // A CIDR: low and high share a prefix, low has zeros after it, high ones.
  let prefix = 0;
  let i = 0;
  for (; i < low.length && low[i] === high[i]; i++) prefix += 8;
  if (i < low.length) {
    const x = low[i]! ^ high[i]!;
    let bits = 0;
    while (bits < 8 && !(x & (0x80 >> bits))) bits++;
    const hostMask = 0xff >> bits;
    if ((low[i]! & hostMask) !== 0 || (high[i]! & hostMask) !== hostMask) return undefined;
    prefix += bits;
    for (let j = i + 1; j < low.length; j++) if (low[j] !== 0 || high[j] !== 0xff) return undefined;
  }
  return prefix;
}

/** Renders [low, high] of one field as nft does: a single value, a CIDR, or "a-b". */
function boundsValue(t: DataType, low: Uint8Array, high: Uint8Array): KeyField {
  if (cmpBytes(low, high) === 0) return decodeField(t, low);
  if (t === 'ipv4_addr' || t === 'ipv6_addr') {
    const p = isPrefixRange(low, high);
    const text = (b: Uint8Array): string => (t === 'ipv4_addr' ? Array.from(b).join('.') : formatV6(b));
    if (p !== undefined) return `${text(low)}/${p}`;
    return `${text(low)}-${text(high)}`;
  }
  return `${decodeField(t, low)}-${decodeField(t, high)}`;
}

function valueOf(set: NftSetLike, r: RawElement): NftElement['value'] {
  if (set.kind !== 'map' || r.data === undefined) return undefined;
  if (!(r.data instanceof Uint8Array)) return r.data;
  if (set.data === 'verdict') return undefined;
  const data = set.data;
  return splitFields(data, r.data).map((b, i) => decodeField(data[i]!, b));
}

/**
 * Turns raw kernel elements into NftElements for a set of known type. Single-field interval
 * sets are paired (start, next end) back into CIDRs or ranges; the leading end at 0 is dropped.
 */
export function toElements(set: NftSetLike, raws: readonly RawElement[]): NftElement[] {
  const want = keyLength(set.key);
  for (const r of raws) {
    if (r.key.length !== want || (r.keyEnd && r.keyEnd.length !== want))
      throw new NetlinkDecodeError(
        `set ${set.name}`,
        0,
        `element key of ${r.key.length} bytes, the set's keys have ${want}`,
      );
    if (
      set.kind === 'map' &&
      set.data !== 'verdict' &&
      r.data instanceof Uint8Array &&
      r.data.length !== keyLength(set.data)
    ) {
      throw new NetlinkDecodeError(
        `set ${set.name}`,
        0,
        `element data of ${r.data.length} bytes, the map's data has ${keyLength(set.data)}`,
      );
    }
  }
  const finish = (r: RawElement, key: KeyField[]): NftElement => {
    const el: NftElement = { kind: 'element', set: set.name, key };
    const v = valueOf(set, r);
    if (v !== undefined) el.value = v;
    if (r.timeoutMs !== undefined) el.timeoutMs = Number(r.timeoutMs);
    if (r.comment !== undefined) el.comment = r.comment;
    return el;
  };
  if (isConcatInterval(set)) {
    return raws.map((r) => {
      const lows = splitFields(set.key, r.key);
      const highs = splitFields(set.key, r.keyEnd ?? r.key);
      return finish(
        r,
        set.key.map((t, i) => boundsValue(t, lows[i]!, highs[i]!)),
      );
    });
  }
  if (isInterval(set)) {
    const t = set.key[0]!;
    const sorted = [...raws].sort((x, y) => cmpBytes(x.key, y.key) || (x.flags & NFT_SET_ELEM_INTERVAL_END ? -1 : 1));
    const out: NftElement[] = [];
    for (let i = 0; i < sorted.length; i++) {
      const r = sorted[i]!;
      if (r.flags & NFT_SET_ELEM_INTERVAL_END) continue;
      const next = sorted[i + 1];
      let high: Uint8Array;
      if (next && next.flags & NFT_SET_ELEM_INTERVAL_END) {
        high = decrement(next.key);
        i++;
      } else high = new Uint8Array(DATATYPES[t].len).fill(0xff);
      out.push(finish(r, [boundsValue(t, r.key, high)]));
    }
    return out;
  }
  return raws.map((r) =>
    finish(
      r,
      splitFields(set.key, r.key).map((b, i) => decodeField(set.key[i]!, b)),
    ),
  );
}

/** nft syntax of one element: `10.0.0.1 . tcp . 80 timeout 10s comment "x" : goto svc`. */
export function renderElement(el: NftElement): string {
  const field = (f: KeyField): string =>
    Array.isArray(f)
      ? `${String(f[0])}-${String(f[1])}`
      : f instanceof Uint8Array
        ? `0x${Buffer.from(f).toString('hex')}`
        : String(f);
  let s = el.key.map(field).join(' . ');
  if (el.timeoutMs !== undefined) s += ` timeout ${renderDuration(el.timeoutMs)}`;
  if (el.comment !== undefined) s += ` comment "${el.comment.replace(/"/g, '\\"')}"`;
  if (el.value !== undefined)
    s += ` : ${isVerdict(el.value) ? renderVerdict(el.value) : el.value.map(field).join(' . ')}`;
  return s;
}

/**
 * Merges overlapping intervals of a single-field interval set into disjoint ones (the kernel
 * refuses an element that overlaps another with EEXIST; nft merges only with auto-merge).
 * Adjacent intervals are kept apart, as the kernel keeps them. Returns CIDRs where aligned.
 */
export function mergeIntervals(t: DataType, fields: readonly KeyField[]): KeyField[] {
  const ranges = fields.map((f) => fieldBounds(t, f)).sort((a, b) => cmpBytes(a[0], b[0]));
  const out: [Uint8Array, Uint8Array][] = [];
  for (const [lo, hi] of ranges) {
    const last = out.at(-1);
    if (last && cmpBytes(lo, last[1]) <= 0) {
      if (cmpBytes(hi, last[1]) > 0) last[1] = hi;
    } else out.push([lo, hi]);
  }
  return out.map(([lo, hi]) => boundsValue(t, lo, hi));
}

const WITH_DATA = { withData: true };
const KEYS_ONLY = { withData: false };

/**
 * Element operations in a row with the same verb and set, encoded into one buffer and packed
 * many per message when the run ends: a caller that adds elements one by one still gets
 * hundreds per message (a full sync has hundreds of thousands).
 */
export class ElementRun implements PendingElements {
  readonly verb: Verb;
  readonly set: NftSetLike;
  readonly buf: ElementBuffer;

  constructor(verb: Verb, set: NftSetLike, expected: number) {
    this.verb = verb;
    this.set = set;
    this.buf = new ElementBuffer(expected * estimateElementBytes(set, !isRemoval(verb)));
  }

  /** Appends an element; a problem becomes an NftValidationError naming the element. */
  add(o: NftElement, fam: string): void {
    try {
      encodeElementInto(this.buf, this.set, o, isRemoval(this.verb) ? KEYS_ONLY : WITH_DATA);
    } catch (e) {
      throw new NftValidationError(`${this.verb} element ${fam} ${o.set} { ${safeRender(o)} }: ${errorMessage(e)}`, {
        cause: e,
      });
    }
  }

  /** Ends the run: its elements become messages in `st`. */
  flush(st: EncodeState): void {
    st.pending = undefined;
    const { verb, set } = this;
    const del = isRemoval(verb);
    const cmd = del ? removalCmd(verb, NftMsg.DELSETELEM, NftMsg.DESTROYSETELEM) : NftMsg.NEWSETELEM;
    const flags = del ? 0 : createFlags(verb, NLM_F_CREATE, NLM_F_EXCL);
    const label = `${verb} element ${st.fam} ${ident(set.name)}`;
    st.out.push(
      ...elementMessages(st.scope, cmd, flags, set.name, del ? undefined : st.ctx.setId(set.name), this.buf, label),
    );
  }
}

/** How many element operations from `start` on share its verb and set (the run it starts). */
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

function safeRender(e: NftElement): string {
  try {
    return renderElement(e);
  } catch {
    return '?';
  }
}

/** The element without its value, as deletes name it. */
function keyOnly(o: NftElement): NftElement {
  const { value: _value, ...rest } = o;
  return rest;
}

/** Elements: NEWSETELEM/DELSETELEM, encoded against their set's definition. */
export const elementCodec: ObjectCodec<NftElement, ReturnType<typeof decodeRawElements>> = {
  validate(verb, o) {
    if (verb !== 'add' && verb !== 'create' && !isRemoval(verb)) return `cannot ${verb} an element`;
    if (!o.set) return 'element needs a set name';
    if (!Array.isArray(o.key) || o.key.length === 0) return `element of ${o.set} needs a key`;
    return undefined;
  },

  encode(st, verb, o, at) {
    // The common case first: one more element for the run in progress; no label, no lookup.
    const run = st.pending;
    if (run !== undefined && run.verb === verb && run.set.name === o.set) {
      run.add(o, st.fam);
      return;
    }
    const def = st.defs.get(o.set) ?? st.schema(o.set);
    if (!def)
      throw new NftValidationError(
        `${verb} element ${st.fam} ${o.set}: unknown set (add it in this transaction, or list sets first)`,
      );
    run?.flush(st);
    const next = new ElementRun(verb, def, runLength(st.ops, at));
    st.pending = next;
    if (!isRemoval(verb) && st.fresh.has(def.name)) leadingIntervalEndInto(next.buf, def);
    st.fresh.delete(def.name);
    next.add(o, st.fam);
  },

  render(scope, verb, o) {
    return `${verb} element ${scopeText(scope)} ${ident(o.set)} { ${safeRender(isRemoval(verb) ? keyOnly(o) : o)} }`;
  },

  decode: decodeRawElements,

  emulateDestroy: (o) => addThenDelete(o, o),
};
