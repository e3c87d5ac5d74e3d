// Set and map elements (NEWSETELEM / DELSETELEM), many per message.
//
//   NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_LIST_SET, [NFTA_SET_ELEM_LIST_SET_ID],
//   NFTA_SET_ELEM_LIST_ELEMENTS {
//     NFTA_LIST_ELEM { [FLAGS be32], [TIMEOUT be64 ms], KEY { NFTA_DATA_VALUE },
//                      [KEY_END { NFTA_DATA_VALUE }], [DATA { VALUE | VERDICT }], [USERDATA] } ...
//   }
//
// Intervals, as nft encodes them:
//  - single-field interval sets hold a start element and an end element (flag
//    NFT_SET_ELEM_INTERVAL_END) whose key is one past the last address/port. An interval
//    that runs to the top of the key space has no end element; its start carries the udata
//    flag NFTNL_SET_ELEM_F_INTERVAL_OPEN instead. When the set is new (empty), nft also sends
//    a leading end element at 0, which we do too for sets created in the same transaction.
//  - concatenated interval sets (pipapo) hold one element with KEY (all low bounds) and
//    KEY_END (all high bounds, inclusive).
//
// ELEMENTS is one attribute whose nla_len is a u16, so a message carries at most ~64 KiB of
// elements; larger lists are split over several messages (all in the same batch).

import { v4Number } from '../../base/ip.ts';
import type { OutMessage } from '../core/index.ts';
import { align4, AttrWriter, ByteWriter, NLA_F_NESTED, putAttrHeader } from '../core/index.ts';
import {
  NFT_SET_ELEM_INTERVAL_END,
  NFTA_DATA_VALUE,
  NFTA_DATA_VERDICT,
  NFTA_LIST_ELEM,
  NFTA_SET_ELEM_DATA,
  NFTA_SET_ELEM_FLAGS,
  NFTA_SET_ELEM_KEY,
  NFTA_SET_ELEM_KEY_END,
  NFTA_SET_ELEM_LIST_ELEMENTS,
  NFTA_SET_ELEM_LIST_SET,
  NFTA_SET_ELEM_LIST_SET_ID,
  NFTA_SET_ELEM_LIST_TABLE,
  NFTA_SET_ELEM_TIMEOUT,
  NFTA_SET_ELEM_USERDATA,
  NFTA_VERDICT_CHAIN,
  NFTA_VERDICT_CODE,
  VerdictCode,
} from './constants.ts';
import type { DataType, FieldValue } from './datatypes.ts';
import { concatFields, DATATYPES, encodeField, keyLength, PROTOCOLS, writeField } from './datatypes.ts';
import { cstr, nftMessage } from './message.ts';
import { isConcatInterval, isInterval } from './set-shape.ts';
import type { KeyField, NftElement, NftSetLike, Scope } from './types.ts';
import type { UdataTlv } from './udata.ts';
import {
  encodeUdata,
  SET_ELEM_F_INTERVAL_OPEN,
  udStr,
  udU32,
  UD_SET_ELEM_COMMENT,
  UD_SET_ELEM_FLAGS,
} from './udata.ts';
import { isVerdict } from './verdict.ts';

/** Room for elements in one message: the ELEMENTS attribute must stay below 64 KiB. */
export const MAX_ELEMENTS_BYTES = 60_000;

/** The [low, high] (inclusive) bytes of one key field of an interval element. */
export function fieldBounds(t: DataType, v: KeyField): [Uint8Array, Uint8Array] {
  if (Array.isArray(v)) return [encodeField(t, v[0] as FieldValue), encodeField(t, v[1] as FieldValue)];
  if (typeof v === 'string' && v.includes('/') && (t === 'ipv4_addr' || t === 'ipv6_addr')) {
    const [addr, plen] = v.split('/') as [string, string];
    const low = Uint8Array.from(encodeField(t, addr));
    const prefix = /^\d{1,3}$/.test(plen) ? Number(plen) : NaN;
    if (!(prefix >= 0 && prefix <= low.length * 8)) throw new TypeError(`${v} is not a valid ${t} prefix`);
    const high = Uint8Array.from(low);
    for (let i = 0; i < low.length; i++) {
      const bits = Math.max(0, Math.min(8, prefix - i * 8));
      const hostMask = 0xff >> bits;
      low[i]! &= ~hostMask & 0xff;
      high[i]! = low[i]! | hostMask;
    }
    return [low, high];
  }
  if (typeof v === 'string' && v.includes('-')) {
    const [a, b] = v.split('-') as [string, string];
    const num = t === 'inet_service' || t === 'mark' || t === 'integer';
    return [encodeField(t, num ? Number(a) : a), encodeField(t, num ? Number(b) : b)];
  }
  const x = encodeField(t, v as FieldValue);
  return [x, x];
}

/** bytes + 1 as a big-endian number; undefined on overflow (all ones). */
function increment(b: Uint8Array): Uint8Array | undefined {
  const out = Uint8Array.from(b);
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]! < 0xff) {
      out[i]!++;
      return out;
    }
    out[i] = 0;
  }
  return undefined;
}

export function cmpBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** Writes NFTA_DATA_VALUE with the fields' bytes (padded in a concatenation) straight into w. */
function writeValue(
  w: AttrWriter,
  types: readonly DataType[],
  values: readonly FieldValue[],
  set: NftSetLike,
  part: 'key' | 'data',
): void {
  if (values.length !== types.length)
    throw new TypeError(`${describeSet(set, part)} has ${types.length} fields, element has ${values.length}`);
  const out = w.out;
  const at = out.reserve(4);
  const concat = types.length > 1;
  for (let i = 0; i < types.length; i++) {
    writeField(out, types[i]!, values[i]!);
    if (concat) out.align4();
  }
  // The header carries the unpadded length: a single field may be 1 or 2 bytes long.
  putAttrHeader(out.buffer, at, out.length - at, NFTA_DATA_VALUE);
  out.align4();
}

/** "set NAME key", "map NAME data": named only when an element does not fit (not per element). */
const describeSet = (set: NftSetLike, part: 'key' | 'data'): string =>
  `${set.kind === 'map' && part === 'data' ? 'map' : 'set'} ${set.name} ${part}`;

function writeBytesValue(w: AttrWriter, type: number, b: Uint8Array): void {
  w.nested(type, (k) => k.bytes(NFTA_DATA_VALUE, b));
}

function writeData(w: AttrWriter, set: NftSetLike, value: NftElement['value']): void {
  if (set.kind !== 'map') {
    if (value !== undefined) throw new TypeError(`set ${set.name} is not a map: elements take no value`);
    return;
  }
  if (value === undefined) throw new TypeError(`map ${set.name}: element without a value`);
  if (set.data === 'verdict') {
    if (!isVerdict(value)) throw new TypeError(`map ${set.name} maps to verdicts`);
    // Nests opened and closed without a closure per element.
    const dataAt = w.open(NFTA_SET_ELEM_DATA);
    const verdictAt = w.open(NFTA_DATA_VERDICT);
    w.u32(NFTA_VERDICT_CODE, VerdictCode[value.verdict] >>> 0, 'net');
    if ('chain' in value) w.bytes(NFTA_VERDICT_CHAIN, cstr(value.chain));
    w.close(verdictAt).close(dataAt);
    return;
  }
  if (isVerdict(value)) throw new TypeError(`map ${set.name} maps to ${set.data.join(' . ')}, not a verdict`);
  const dataAt = w.open(NFTA_SET_ELEM_DATA);
  writeValue(w, set.data, value, set, 'data');
  w.close(dataAt);
}

export interface ChunkOptions {
  /** false for deletes: only keys (and interval ends) are sent. */
  withData: boolean;
}

/**
 * Encoded elements in one shared buffer (no per-element allocation): the start of every
 * NFTA_LIST_ELEM attribute, and where each element's attributes begin (an element is one
 * attribute, or two for a single-field interval; the two stay in the same message).
 */
export class ElementBuffer {
  readonly w: AttrWriter;
  readonly attrStarts: number[] = [];
  readonly groupStarts: number[] = [];

  /**
   * `initialBytes`: what the elements are expected to take (see estimateElementBytes), so the buffer is not regrown
   * and copied.
   */
  constructor(initialBytes = 1 << 16) {
    this.w = new AttrWriter(new ByteWriter(Math.max(256, initialBytes)));
  }

  get count(): number {
    return this.groupStarts.length;
  }
}

/** About how many bytes one element of `set` encodes to (an estimate for sizing buffers, not a bound). */
export function estimateElementBytes(set: NftSetLike, withData: boolean): number {
  let n = 12 + align4(keyLength(set.key));
  if (withData && set.kind === 'map') n += set.data === 'verdict' ? 48 : 8 + align4(keyLength(set.data));
  return isInterval(set) ? 2 * n : n;
}

/**
 * Appends one element to `buf` as the NFTA_LIST_ELEM attribute(s) it needs. Throws a
 * TypeError naming the problem when the element does not fit the set (the buffer is then
 * unusable: callers abandon it).
 */
export function encodeElementInto(buf: ElementBuffer, set: NftSetLike, el: NftElement, opts: ChunkOptions): void {
  buf.groupStarts.push(buf.attrStarts.length);
  if (isInterval(set)) {
    encodeIntervalElement(buf, set, el, opts);
    return;
  }
  if (encodePlainElement(buf.w.out, buf.attrStarts, set, el, opts.withData)) return;
  // Everything else about plain sets and maps: open()/close() rather than nested() closures,
  // and no text built per element.
  if (el.key.length !== set.key.length)
    throw new TypeError(`set ${set.name} has ${set.key.length} key fields, element has ${el.key.length}`);
  const w = buf.w;
  buf.attrStarts.push(w.out.length);
  const elemAt = w.open(NFTA_LIST_ELEM);
  if (opts.withData && el.timeoutMs !== undefined) w.u64(NFTA_SET_ELEM_TIMEOUT, BigInt(el.timeoutMs), 'net');
  const keyAt = w.open(NFTA_SET_ELEM_KEY);
  writeValue(w, set.key, el.key as readonly FieldValue[], set, 'key');
  w.close(keyAt);
  if (opts.withData) {
    writeData(w, set, el.value);
    if (el.comment !== undefined)
      w.bytes(NFTA_SET_ELEM_USERDATA, encodeUdata([udStr(UD_SET_ELEM_COMMENT, el.comment)]));
  }
  w.close(elemAt);
}

// The hot path of a sync: hundreds of thousands of elements of plain sets and maps whose
// fields are IPv4 addresses, protocols, ports and integers, without timeout or comment. Such
// an element has a size known before writing it, so it is written with one reserve and
// direct byte stores: the same bytes as the general path of encodeElementInto writes.
//   LIST_ELEM { KEY { DATA_VALUE key } [DATA { DATA_VALUE data | VERDICT { CODE [CHAIN] } }] }

const NESTED_LIST_ELEM = NFTA_LIST_ELEM | NLA_F_NESTED;
const NESTED_KEY = NFTA_SET_ELEM_KEY | NLA_F_NESTED;
const NESTED_DATA = NFTA_SET_ELEM_DATA | NLA_F_NESTED;
const NESTED_VERDICT = NFTA_DATA_VERDICT | NLA_F_NESTED;
/**
 * PROTOCOLS[name] as a switch: a keyed load whose name varies makes V8 drop the optimized
 * code of its caller again and again ("unexpected name in keyed access").
 */
function protocolNumber(name: string): number | undefined {
  switch (name) {
    case 'tcp':
      return PROTOCOLS.tcp;
    case 'udp':
      return PROTOCOLS.udp;
    case 'sctp':
      return PROTOCOLS.sctp;
    case 'icmp':
      return PROTOCOLS.icmp;
    case 'icmpv6':
      return PROTOCOLS.icmpv6;
    default:
      return undefined;
  }
}

/** Bytes a field takes in a value: its length, padded to 4 inside a concatenation. */
function fieldsLength(types: readonly DataType[]): number {
  if (types.length === 1) return DATATYPES[types[0]!].len;
  let n = 0;
  for (let i = 0; i < types.length; i++) n += align4(DATATYPES[types[i]!].len);
  return n;
}

/** Can putFields write these values (the common types, valid values)? */
function fastFields(types: readonly DataType[], values: readonly unknown[]): boolean {
  if (values.length !== types.length) return false;
  for (let i = 0; i < types.length; i++) {
    const v = values[i];
    switch (types[i]) {
      case 'ipv4_addr':
        if (typeof v !== 'string') return false;
        break;
      case 'inet_proto':
        if (
          typeof v === 'string'
            ? protocolNumber(v) === undefined
            : !(typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 255)
        )
          return false;
        break;
      case 'inet_service':
        if (!(typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff)) return false;
        break;
      case 'integer':
      case 'mark':
        if (!(typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/**
 * A DATA_VALUE attribute with the fields at `at`; returns where it ends (padded), or -1 for an invalid IPv4 address.
 */
function putValue(b: Buffer, at: number, types: readonly DataType[], values: readonly unknown[], len: number): number {
  putAttrHeader(b, at, 4 + len, NFTA_DATA_VALUE);
  let o = at + 4;
  const concat = types.length > 1;
  for (let i = 0; i < types.length; i++) {
    const t = types[i]!;
    const v = values[i];
    const start = o;
    if (t === 'ipv4_addr') {
      const n = v4Number(v as string);
      if (n < 0) return -1;
      b[o++] = n >>> 24;
      b[o++] = (n >>> 16) & 255;
      b[o++] = (n >>> 8) & 255;
      b[o++] = n & 255;
    } else if (t === 'inet_proto') b[o++] = typeof v === 'string' ? protocolNumber(v)! : (v as number);
    else if (t === 'inet_service') {
      b[o++] = (v as number) >>> 8;
      b[o++] = (v as number) & 255;
    } else {
      // integer, mark: host order (little-endian on every architecture we target).
      const n = v as number;
      b[o++] = n & 255;
      b[o++] = (n >>> 8) & 255;
      b[o++] = (n >>> 16) & 255;
      b[o++] = n >>> 24;
    }
    if (concat) while ((o - start) & 3) b[o++] = 0;
  }
  while ((o - at) & 3) b[o++] = 0;
  return o;
}

/**
 * Writes `el` by the fast path and returns true, or returns false having written nothing
 * when the element needs the general one (other types, timeouts, comments, invalid values:
 * the general path also produces the errors).
 */
function encodePlainElement(
  out: ByteWriter,
  attrStarts: number[],
  set: NftSetLike,
  el: NftElement,
  withData: boolean,
): boolean {
  if (el.timeoutMs !== undefined || el.comment !== undefined || !fastFields(set.key, el.key)) return false;
  const keyLen = fieldsLength(set.key);
  const keyAttr = 8 + align4(keyLen);
  let dataAttr = 0;
  let chain: Uint8Array | undefined;
  let code = 0;
  let dataLen = 0;
  const v = el.value;
  if (withData) {
    if (set.kind !== 'map') {
      if (v !== undefined) return false;
    } else if (set.data === 'verdict') {
      if (v === undefined || !isVerdict(v)) return false;
      code = VerdictCode[v.verdict] >>> 0;
      if ('chain' in v) chain = cstr(v.chain);
      dataAttr = 16 + (chain ? 4 + align4(chain.length) : 0);
    } else {
      if (v === undefined || isVerdict(v) || !fastFields(set.data, v)) return false;
      dataLen = fieldsLength(set.data);
      dataAttr = 8 + align4(dataLen);
    }
  }
  const total = 4 + keyAttr + dataAttr;
  const start = out.reserve(total);
  const b = out.buffer;
  putAttrHeader(b, start, total, NESTED_LIST_ELEM);
  putAttrHeader(b, start + 4, keyAttr, NESTED_KEY);
  let o = putValue(b, start + 8, set.key, el.key, keyLen);
  if (o >= 0 && dataAttr > 0) {
    putAttrHeader(b, o, dataAttr, NESTED_DATA);
    if (set.kind === 'map' && set.data !== 'verdict')
      o = putValue(b, o + 4, set.data, v as readonly unknown[], dataLen);
    else {
      putAttrHeader(b, o + 4, dataAttr - 4, NESTED_VERDICT);
      putAttrHeader(b, o + 8, 8, NFTA_VERDICT_CODE);
      b.writeUInt32BE(code, o + 12);
      o += 16;
      if (chain) {
        putAttrHeader(b, o, 4 + chain.length, NFTA_VERDICT_CHAIN);
        b.set(chain, o + 4);
        o += 4 + chain.length;
        while ((o - start) & 3) b[o++] = 0;
      }
    }
  }
  if (o < 0) {
    out.truncate(start);
    return false;
  }
  attrStarts.push(start);
  return true;
}

/** Interval sets: a concatenation is one element with KEY and KEY_END; a single field is a start and an end element. */
function encodeIntervalElement(buf: ElementBuffer, set: NftSetLike, el: NftElement, opts: ChunkOptions): void {
  const w = buf.w;
  const open = (flags: number, fill: (e: AttrWriter) => void, openEnded = false): void => {
    buf.attrStarts.push(w.out.length);
    w.nested(NFTA_LIST_ELEM, (e) => {
      if (flags) e.u32(NFTA_SET_ELEM_FLAGS, flags, 'net');
      const end = (flags & NFT_SET_ELEM_INTERVAL_END) !== 0;
      if (opts.withData && el.timeoutMs !== undefined && !end)
        e.u64(NFTA_SET_ELEM_TIMEOUT, BigInt(el.timeoutMs), 'net');
      fill(e);
      if (end) return;
      if (opts.withData) writeData(e, set, el.value);
      const t: UdataTlv[] = [];
      if (opts.withData && el.comment !== undefined) t.push(udStr(UD_SET_ELEM_COMMENT, el.comment));
      if (openEnded) t.push(udU32(UD_SET_ELEM_FLAGS, SET_ELEM_F_INTERVAL_OPEN));
      if (t.length > 0) e.bytes(NFTA_SET_ELEM_USERDATA, encodeUdata(t));
    });
  };
  if (isConcatInterval(set)) {
    if (el.key.length !== set.key.length)
      throw new TypeError(`set ${set.name} has ${set.key.length} key fields, element has ${el.key.length}`);
    const bounds = set.key.map((t, i) => fieldBounds(t, el.key[i]!));
    const low = concatFields(bounds.map((b) => b[0]));
    const high = concatFields(bounds.map((b) => b[1]));
    open(0, (e) => {
      writeBytesValue(e, NFTA_SET_ELEM_KEY, low);
      writeBytesValue(e, NFTA_SET_ELEM_KEY_END, high);
    });
    return;
  }
  if (el.key.length !== 1) throw new TypeError(`set ${set.name} has 1 key field, element has ${el.key.length}`);
  const [low, high] = fieldBounds(set.key[0]!, el.key[0]!);
  if (cmpBytes(low, high) > 0)
    throw new TypeError(`set ${set.name}: interval ${String(el.key[0])} ends before it starts`);
  const end = increment(high);
  open(0, (e) => writeBytesValue(e, NFTA_SET_ELEM_KEY, low), end === undefined);
  if (end) open(NFT_SET_ELEM_INTERVAL_END, (e) => writeBytesValue(e, NFTA_SET_ELEM_KEY, end));
}

/** One element's NFTA_LIST_ELEM attribute(s), as separate byte arrays (tests, FakeNft). */
export function encodeElement(set: NftSetLike, el: NftElement, opts: ChunkOptions): Uint8Array[] {
  const buf = new ElementBuffer();
  encodeElementInto(buf, set, el, opts);
  const all = buf.w.finish();
  return buf.attrStarts.map((s, i) => all.slice(s, buf.attrStarts[i + 1] ?? all.length));
}

/** The end element at 0 that nft sends first when filling a new single-field interval set. */
export function leadingIntervalEndInto(buf: ElementBuffer, set: NftSetLike): void {
  buf.groupStarts.push(buf.attrStarts.length);
  buf.attrStarts.push(buf.w.out.length);
  const zero = new Uint8Array(keyLength(set.key));
  buf.w.nested(NFTA_LIST_ELEM, (e) => {
    e.u32(NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END, 'net');
    e.nested(NFTA_SET_ELEM_KEY, (k) => k.bytes(NFTA_DATA_VALUE, zero));
  });
}

/**
 * Packs the buffer's elements into as few messages as fit (each ELEMENTS attribute < 64 KiB),
 * an element's attributes always in one message. Like nft, the list entries are numbered
 * 1, 2, 3 ... in their attribute type (the kernel ignores it).
 */
export function elementMessages(
  scope: Scope,
  cmd: number,
  flags: number,
  setName: string,
  setId: number | undefined,
  buf: ElementBuffer,
  label: string,
  maxBytes = MAX_ELEMENTS_BYTES,
): OutMessage[] {
  // A view, not a copy: the buffer is finished, and each message copies its part.
  const bytes = buf.w.out.view();
  const attrEnd = (i: number): number => buf.attrStarts[i + 1] ?? bytes.length;
  const groupEnd = (g: number): number => {
    const nextAttr = buf.groupStarts[g + 1];
    return nextAttr === undefined ? bytes.length : buf.attrStarts[nextAttr]!;
  };
  const out: OutMessage[] = [];
  let g = 0;
  while (g < buf.count) {
    const firstAttr = buf.groupStarts[g]!;
    const from = buf.attrStarts[firstAttr]!;
    if (groupEnd(g) - from > maxBytes)
      throw new RangeError(`one element of set ${setName} encodes to ${groupEnd(g) - from} bytes`);
    const last = lastFitting(buf, g, from + maxBytes);
    const to = groupEnd(last);
    const lastAttr = last + 1 < buf.count ? buf.groupStarts[last + 1]! : buf.attrStarts.length;
    const count = last - g + 1;
    // Room for the table and set names, the set id and the headers around the elements.
    const sizeHint = 64 + scope.table.length + setName.length + (to - from);
    const msg = nftMessage(
      cmd,
      scope.family,
      flags,
      label,
      (w) => {
        w.bytes(NFTA_SET_ELEM_LIST_TABLE, cstr(scope.table)).bytes(NFTA_SET_ELEM_LIST_SET, cstr(setName));
        if (setId !== undefined) w.u32(NFTA_SET_ELEM_LIST_SET_ID, setId, 'net');
        w.nested(NFTA_SET_ELEM_LIST_ELEMENTS, (e) => {
          const base = e.out.length;
          e.out.bytes(bytes.subarray(from, to));
          for (let a = firstAttr, n = 1; a < lastAttr; a++, n++) {
            if (attrEnd(a) > to) break;
            e.out.patchU16le(base + (buf.attrStarts[a]! - from) + 2, (n & 0x3fff) | NLA_F_NESTED);
          }
        });
      },
      sizeHint,
    );
    msg.elements = count;
    out.push(msg);
    g = last + 1;
  }
  return out;
}

/**
 * The last element group, from `first` on, that ends at or before byte `limit` of the
 * buffer. A function of its own: as a loop inside elementMessages it was compiled on the
 * stack and thrown away again for every message.
 */
function lastFitting(buf: ElementBuffer, first: number, limit: number): number {
  const { attrStarts, groupStarts } = buf;
  const total = buf.w.out.length;
  let last = first;
  for (let next = first + 1; next < groupStarts.length; next++) {
    const nextGroup = groupStarts[next + 1];
    const end = nextGroup === undefined ? total : attrStarts[nextGroup]!;
    if (end > limit) break;
    last = next;
  }
  return last;
}

/** DELSETELEM without elements: removes every element (nft's `flush set`). Attribute order as nft sends it. */
export function flushSetMessage(scope: Scope, cmd: number, setName: string, label: string): OutMessage {
  return nftMessage(cmd, scope.family, 0, label, (w) =>
    w.str(NFTA_SET_ELEM_LIST_SET, setName).str(NFTA_SET_ELEM_LIST_TABLE, scope.table),
  );
}
