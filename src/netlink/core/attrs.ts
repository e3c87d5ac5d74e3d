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

import { ByteWriter } from './bytes.ts';
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
    this.out.u16le(len).u16le(type);
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
    const b = Buffer.from(s, 'utf8');
    this.header(type, b.length + 1);
    this.out.bytes(b).u8(0).align4();
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
    const at = this.out.reserve(NLA_HDRLEN);
    this.out.patchU16le(at + 2, type | NLA_F_NESTED);
    fill(this);
    const len = this.out.length - at;
    if (len > 0xffff) throw new RangeError(`nested attribute ${type} too long: ${len} bytes`);
    this.out.patchU16le(at, len);
    return this;
  }

  finish(): Uint8Array {
    return this.out.toBytes();
  }
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
  let off = 0;
  while (off < buf.length) {
    if (buf.length - off < NLA_HDRLEN) {
      throw new NetlinkDecodeError(where, base + off, `${buf.length - off} trailing bytes, too short for an attribute header`);
    }
    const len = buf[off]! | (buf[off + 1]! << 8);
    const rawType = buf[off + 2]! | (buf[off + 3]! << 8);
    if (len < NLA_HDRLEN) throw new NetlinkDecodeError(where, base + off, `attribute length ${len} is below the header size`);
    if (off + len > buf.length) {
      throw new NetlinkDecodeError(where, base + off, `attribute type ${rawType & NLA_TYPE_MASK} claims ${len} bytes, only ${buf.length - off} left`);
    }
    yield {
      type: rawType & NLA_TYPE_MASK,
      nested: (rawType & NLA_F_NESTED) !== 0,
      netOrder: (rawType & NLA_F_NET_BYTEORDER) !== 0,
      data: buf.subarray(off + NLA_HDRLEN, off + len),
      offset: base + off,
    };
    off += (len + 3) & ~3;
  }
}

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
    for (const a of readAttrs(buf, where, base)) {
      all.push(a);
      const list = this.byType.get(a.type);
      if (list) list.push(a);
      else this.byType.set(a.type, [a]);
    }
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
      throw new NetlinkDecodeError(this.where, a.offset, `attribute ${type} has ${a.data.length} bytes, expected ${size}`);
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
