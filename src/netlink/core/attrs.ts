// Netlink attributes (struct nlattr): encoding and decoding.
//
//   0               2               4
//   +---------------+---------------+----------------------+---------+
//   | nla_len (u16) | nla_type (u16)| payload              | pad to 4|
//   +---------------+---------------+----------------------+---------+
//   nla_len counts header + payload, not the padding. nla_type carries two flag bits:
//   NLA_F_NESTED (payload is more attributes) and NLA_F_NET_BYTEORDER (payload is big-endian).
//
// nfnetlink families (nf_tables, ipset, ctnetlink) put integers in network byte order;
// generic netlink (IPVS) and rtnetlink use host order. The writer takes the order per call.

import { align4, ByteWriter } from './bytes.ts';
import { NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_HDRLEN, NLA_TYPE_MASK } from './constants.ts';
import { NetlinkDecodeError } from './errors.ts';

export type ByteOrder = 'host' | 'net';

/** Writes attributes into a ByteWriter; chainable; nested() patches the length at the end. */
export class AttrWriter {
  readonly out: ByteWriter;

  constructor(out: ByteWriter = new ByteWriter()) {
    this.out = out;
  }

  private header(type: number, payloadLen: number): void {
    const len = NLA_HDRLEN + payloadLen;
    if (len > 0xffff) throw new RangeError(`attribute ${type} too long: ${payloadLen} bytes`);
    if (type > 0xffff || type < 0) throw new RangeError(`attribute type ${type} is not a u16`);
    const at = this.out.reserve(NLA_HDRLEN);
    putAttrHeader(this.out.buffer, at, len, type);
  }

  u8(type: number, v: number): this {
    this.header(type, 1);
    this.out.u8(v).align4();
    return this;
  }

  u16(type: number, v: number, order: ByteOrder = 'host'): this {
    this.header(type, 2);
    if (order === 'net') this.out.u16be(v);
    else this.out.u16le(v);
    this.out.align4();
    return this;
  }

  u32(type: number, v: number, order: ByteOrder = 'host'): this {
    this.header(type, 4);
    if (order === 'net') this.out.u32be(v);
    else this.out.u32le(v);
    return this;
  }

  u64(type: number, v: bigint, order: ByteOrder = 'host'): this {
    this.header(type, 8);
    if (order === 'net') this.out.u64be(v);
    else this.out.u64le(v);
    return this;
  }

  /** A NUL-terminated string, as the kernel's NLA_STRING/NLA_NUL_STRING policies expect. */
  str(type: number, s: string): this {
    const n = s.length;
    let ascii = true;
    for (let i = 0; i < n && ascii; i++) ascii = s.charCodeAt(i) < 0x80;
    if (!ascii) {
      const b = Buffer.from(s, 'utf8');
      this.header(type, b.length + 1);
      this.out.bytes(b).u8(0).align4();
      return this;
    }
    // ASCII (every kernel object name we write): stored char by char, no Buffer per string.
    this.header(type, n + 1);
    const at = this.out.reserve(n + 1);
    const buf = this.out.buffer;
    for (let i = 0; i < n; i++) buf[at + i] = s.charCodeAt(i);
    buf[at + n] = 0;
    this.out.align4();
    return this;
  }

  bytes(type: number, b: Uint8Array): this {
    this.header(type, b.length);
    this.out.bytes(b).align4();
    return this;
  }

  /** A zero-length attribute (NLA_FLAG). */
  flag(type: number): this {
    this.header(type, 0);
    return this;
  }

  nested(type: number, fill: (w: AttrWriter) => void): this {
    const at = this.open(type);
    fill(this);
    return this.close(at);
  }

  /**
   * Opens a nested attribute without a callback, for bulk encoders that write many small
   * nests: returns where its header is, which close() takes once its children are written.
   */
  open(type: number): number {
    const at = this.out.reserve(NLA_HDRLEN);
    this.out.patchU16le(at + 2, type | NLA_F_NESTED);
    return at;
  }

  /** Closes the nest open() started at `at`: its length becomes everything written since. */
  close(at: number): this {
    const len = this.out.length - at;
    if (len > 0xffff) {
      const type = this.out.buffer.readUInt16LE(at + 2) & NLA_TYPE_MASK;
      throw new RangeError(`nested attribute ${type} too long: ${len} bytes`);
    }
    this.out.patchU16le(at, len);
    return this;
  }

  finish(): Uint8Array {
    return this.out.toBytes();
  }
}

/**
 * Stores an attribute header (length including the header, type with any flag bits) at `at`,
 * for encoders that reserve a run of bytes and fill it with direct stores.
 */
export function putAttrHeader(b: Uint8Array, at: number, len: number, type: number): void {
  b[at] = len & 255;
  b[at + 1] = len >>> 8;
  b[at + 2] = type & 255;
  b[at + 3] = type >>> 8;
}

/** One decoded attribute. `data` is a view into the buffer it came from (no copy). */
export interface Attr {
  type: number;
  nested: boolean;
  netOrder: boolean;
  data: Uint8Array;
  /** Offset of the attribute header within the buffer handed to readAttrs. */
  offset: number;
}

/**
 * Iterates the attributes in buf. Every length is checked against the buffer before a view
 * is taken, so hostile input ends in a NetlinkDecodeError naming `where`, never a crash.
 */
export function* readAttrs(buf: Uint8Array, where: string, base = 0): Generator<Attr> {
  const c = new AttrCursor(buf, where, base);
  while (c.next()) {
    const data = buf.subarray(c.at, c.at + c.len);
    yield { type: c.type(), nested: c.nested, netOrder: c.netOrder, data, offset: c.offset };
  }
  c.check();
}

/**
 * A cursor over the attributes of a buffer, as mdlayher/netlink's AttributeDecoder: next()
 * steps to the following attribute (false at the end of the level or after an error), the
 * accessors read the current one, enter()/exit() walk into a nested attribute and back out.
 * Errors are latched, not thrown: the first one (a short or overlong header, a payload too
 * small for the value asked for, or one the caller reports with fail()) stops the walk, the
 * accessors then return 0, and err()/check() report it once at the end:
 *
 *   const c = new AttrCursor(buf, 'conntrack entry', 0, 'net');
 *   while (c.next()) {
 *     if (c.type() === CTA.MARK) mark = c.u32();
 *     else if (c.type() === CTA.TUPLE_ORIG) {
 *       const outer = c.enter();
 *       while (c.next()) { ... }
 *       c.exit(outer);
 *     }
 *   }
 *   c.check();
 *
 * Walking allocates nothing (bytes() and str() make what they return), so the hot
 * decoders (conntrack dumps, set elements) walk their bytes with it directly; reset() lets a
 * decoder reuse one cursor for every message. Offsets in errors are `base` plus the offset in `buf`.
 */
export class AttrCursor {
  buf: Uint8Array;
  where: string;
  base: number;
  /** Byte order of u16/u32/u64 (nfnetlink: 'net'; genetlink, rtnetlink: 'host'). */
  readonly order: ByteOrder;
  private readonly net: boolean;
  /** The current attribute's payload: offset in `buf` and length. */
  at = 0;
  len = 0;
  /** The current attribute's type field, flag bits included. */
  private raw = 0;
  private pos: number;
  private end: number;
  private error: NetlinkDecodeError | undefined;
  /** Where the first level starts: headers sit at multiples of 4 from here. */
  private origin: number;

  constructor(buf: Uint8Array, where: string, base = 0, order: ByteOrder = 'host', start = 0, end = buf.length) {
    this.buf = buf;
    this.where = where;
    this.base = base;
    this.order = order;
    this.net = order === 'net';
    this.pos = start;
    this.end = end;
    this.origin = start;
  }

  /** Points the cursor at buf[start, end) and clears its state and error. */
  reset(buf: Uint8Array, where: string, base = 0, start = 0, end = buf.length): this {
    this.buf = buf;
    this.where = where;
    this.base = base;
    this.pos = start;
    this.end = end;
    this.at = this.len = this.raw = 0;
    this.error = undefined;
    this.origin = start;
    return this;
  }

  /** Steps to the next attribute of the current level; false at its end or after an error. */
  next(): boolean {
    const off = this.pos;
    const rest = this.end - off;
    if (rest <= 0) return false;
    const b = this.buf;
    if (rest < NLA_HDRLEN) return this.badHeader(off);
    const len = b[off]! | (b[off + 1]! << 8);
    if (len < NLA_HDRLEN || len > rest) return this.badHeader(off);
    this.raw = b[off + 2]! | (b[off + 3]! << 8);
    this.at = off + NLA_HDRLEN;
    this.len = len - NLA_HDRLEN;
    this.pos = off + align4(len);
    return true;
  }

  /** Latches why the header at `off` does not fit (next() checked it fails); cold, out of next(). */
  private badHeader(off: number): false {
    const b = this.buf;
    const rest = this.end - off;
    if (rest < NLA_HDRLEN) return this.failAt(off, `${rest} trailing bytes, too short for an attribute header`);
    const len = b[off]! | (b[off + 1]! << 8);
    if (len < NLA_HDRLEN) return this.failAt(off, `attribute length ${len} is below the header size`);
    const type = (b[off + 2]! | (b[off + 3]! << 8)) & NLA_TYPE_MASK;
    return this.failAt(off, `attribute type ${type} claims ${len} bytes, only ${rest} left`);
  }

  /**
   * The current attribute's type, without the NESTED and NET_BYTEORDER flags. A method, not
   * a field: TypeScript would keep a comparison's narrowing of a field across next().
   */
  type(): number {
    return this.raw & NLA_TYPE_MASK;
  }

  /** NLA_F_NESTED is set on the current attribute. */
  get nested(): boolean {
    return (this.raw & NLA_F_NESTED) !== 0;
  }

  get netOrder(): boolean {
    return (this.raw & NLA_F_NET_BYTEORDER) !== 0;
  }

  /** Offset of the current attribute's header, as errors name it (base included). */
  get offset(): number {
    return this.base + this.at - NLA_HDRLEN;
  }

  /**
   * Walks into the current attribute: next() then iterates its children. Returns what exit()
   * needs to come back out after it (a number, so that walking allocates nothing).
   */
  enter(): number {
    const outerEnd = this.end;
    this.pos = this.at;
    this.end = this.at + this.len;
    return outerEnd;
  }

  /** Back to the level enter() left, after the attribute it entered (`outerEnd`: enter()'s result). */
  exit(outerEnd: number): void {
    if (this.error !== undefined) return;
    // The entered attribute ended at this.end; the next one starts at the following 4-byte
    // boundary, counted from the first level's start as every attribute header is.
    const end = this.end;
    this.pos = end + ((4 - ((end - this.origin) & 3)) & 3);
    this.end = outerEnd;
  }

  /** True when the payload holds at least `size` bytes; else latches an error and returns false. */
  has(size: number): boolean {
    if (this.len >= size) return true;
    this.failAt(this.at - NLA_HDRLEN, `attribute ${this.type()} has ${this.len} bytes, expected ${size}`);
    return false;
  }

  u8(): number {
    return this.has(1) ? this.buf[this.at]! : 0;
  }

  u16(): number {
    if (!this.has(2)) return 0;
    const b = this.buf;
    const o = this.at;
    return this.net ? (b[o]! << 8) | b[o + 1]! : b[o]! | (b[o + 1]! << 8);
  }

  u32(): number {
    if (!this.has(4)) return 0;
    return u32At(this.buf, this.at, this.net);
  }

  u64(): bigint {
    if (!this.has(8)) return 0n;
    const hi = u32At(this.buf, this.net ? this.at : this.at + 4, this.net);
    const lo = u32At(this.buf, this.net ? this.at + 4 : this.at, this.net);
    return (BigInt(hi) << 32n) | BigInt(lo);
  }

  /** The payload as a view of the buffer (no copy: copy it to keep it past the buffer's life). */
  bytes(): Uint8Array {
    const b = this.buf;
    return new Uint8Array(b.buffer, b.byteOffset + this.at, this.len);
  }

  /** A string payload without its trailing NUL (and anything after it). */
  str(): string {
    return attrString(this.bytes());
  }

  /** Latches `reason` as an error at the current attribute (a value the caller cannot accept); returns false. */
  fail(reason: string): false {
    return this.failAt(this.at - NLA_HDRLEN, reason);
  }

  private failAt(off: number, reason: string): false {
    this.error ??= new NetlinkDecodeError(this.where, this.base + off, reason);
    // Every level ends here: next() returns false from now on, exit() keeps it so.
    this.pos = 0;
    this.end = -1;
    return false;
  }

  /** The first error met, if any. */
  err(): NetlinkDecodeError | undefined {
    return this.error;
  }

  /** Throws the first error met, if any. */
  check(): void {
    if (this.error !== undefined) throw this.error;
  }
}

const u32At = (b: Uint8Array, o: number, net: boolean): number =>
  net
    ? ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0
    : (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;

/**
 * The attributes of one level, indexed by type, with typed accessors that check sizes.
 * Every attribute is kept in `all`, known or not, so unknown ones survive a round trip.
 */
export class AttrSet {
  readonly all: readonly Attr[];
  readonly where: string;
  private readonly byType = new Map<number, Attr[]>();

  constructor(buf: Uint8Array, where: string, base = 0) {
    this.where = where;
    const all: Attr[] = [];
    // The cursor directly, as readAttrs walks it: a generator's step per attribute shows when
    // every rule of a long chain is decoded.
    const c = new AttrCursor(buf, where, base);
    while (c.next()) {
      const a: Attr = {
        type: c.type(),
        nested: c.nested,
        netOrder: c.netOrder,
        data: buf.subarray(c.at, c.at + c.len),
        offset: c.offset,
      };
      all.push(a);
      const list = this.byType.get(a.type);
      if (list) list.push(a);
      else this.byType.set(a.type, [a]);
    }
    c.check();
    this.all = all;
  }

  has(type: number): boolean {
    return this.byType.has(type);
  }

  get(type: number): Attr | undefined {
    return this.byType.get(type)?.[0];
  }

  getAll(type: number): readonly Attr[] {
    return this.byType.get(type) ?? [];
  }

  private sized(type: number, size: number): Attr | undefined {
    const a = this.get(type);
    if (a && a.data.length < size) {
      throw new NetlinkDecodeError(
        this.where,
        a.offset,
        `attribute ${type} has ${a.data.length} bytes, expected ${size}`,
      );
    }
    return a;
  }

  u8(type: number): number | undefined {
    const a = this.sized(type, 1);
    return a ? a.data[0]! : undefined;
  }

  u16(type: number, order: ByteOrder = 'host'): number | undefined {
    const a = this.sized(type, 2);
    return a ? readU16(a.data, order) : undefined;
  }

  u32(type: number, order: ByteOrder = 'host'): number | undefined {
    const a = this.sized(type, 4);
    return a ? readU32(a.data, order) : undefined;
  }

  u64(type: number, order: ByteOrder = 'host'): bigint | undefined {
    const a = this.sized(type, 8);
    return a ? readU64(a.data, order) : undefined;
  }

  /** A string attribute, with the trailing NUL (and anything after it) removed. */
  str(type: number): string | undefined {
    const a = this.get(type);
    return a ? attrString(a.data) : undefined;
  }

  bytes(type: number): Uint8Array | undefined {
    return this.get(type)?.data;
  }

  nested(type: number): AttrSet | undefined {
    const a = this.get(type);
    return a ? new AttrSet(a.data, `${this.where}/${type}`, a.offset + NLA_HDRLEN) : undefined;
  }

  /** Throws a NetlinkDecodeError when a required attribute is missing. */
  require<T>(type: number, value: T | undefined): T {
    if (value === undefined) throw new NetlinkDecodeError(this.where, 0, `required attribute ${type} is missing`);
    return value;
  }
}

const view = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

export const readU16 = (b: Uint8Array, order: ByteOrder = 'host'): number => view(b).getUint16(0, order === 'host');
export const readU32 = (b: Uint8Array, order: ByteOrder = 'host'): number => view(b).getUint32(0, order === 'host');
export const readU64 = (b: Uint8Array, order: ByteOrder = 'host'): bigint => view(b).getBigUint64(0, order === 'host');

export function attrString(data: Uint8Array): string {
  const nul = data.indexOf(0);
  return Buffer.from(data.buffer, data.byteOffset, nul < 0 ? data.length : nul).toString('utf8');
}
