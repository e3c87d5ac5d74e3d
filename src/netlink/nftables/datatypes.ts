// nft's datatypes as stored in set metadata: NFTA_SET_KEY_TYPE / NFTA_SET_DATA_TYPE carry
// nft's datatype id (concatenations pack ids 6 bits apart: ipv4_addr . inet_proto .
// inet_service = 7<<12 | 12<<6 | 13), and the userdata records each type's byte order.
// Ids, lengths and byte orders were read from what nft 1.0.6 sends for `add set ... { type T; }`.
//
// Values are encoded here too: a key field is padded to 4 bytes inside a concatenation.

import { ipFromBytes, parseIP, v4Number } from '../../base/ip.ts';
import type { ByteWriter } from '../core/index.ts';
import { align4 } from '../core/index.ts';

/** nft's enum byteorder: stored in NFTNL_UDATA_SET_{KEY,DATA}BYTEORDER. */
export const BYTEORDER_INVALID = 0;
export const BYTEORDER_HOST = 1;
export const BYTEORDER_BIG = 2;

export const DATATYPES = {
  nf_proto: { id: 2, len: 1, order: BYTEORDER_INVALID },
  integer: { id: 4, len: 4, order: BYTEORDER_HOST },
  ipv4_addr: { id: 7, len: 4, order: BYTEORDER_BIG },
  ipv6_addr: { id: 8, len: 16, order: BYTEORDER_BIG },
  ether_addr: { id: 9, len: 6, order: BYTEORDER_BIG },
  inet_proto: { id: 12, len: 1, order: BYTEORDER_INVALID },
  inet_service: { id: 13, len: 2, order: BYTEORDER_BIG },
  mark: { id: 19, len: 4, order: BYTEORDER_HOST },
  iface_index: { id: 20, len: 4, order: BYTEORDER_HOST },
  ct_state: { id: 26, len: 4, order: BYTEORDER_HOST },
  ifname: { id: 41, len: 16, order: BYTEORDER_HOST },
} as const;
export type DataType = keyof typeof DATATYPES;
export const TYPE_BITS = 6;

export const isDataType = (s: unknown): s is DataType => typeof s === 'string' && Object.hasOwn(DATATYPES, s);

/** The id nft stores for a key of these field types (concat ids shifted 6 bits per field). */
export function typeId(fields: readonly DataType[]): number {
  let id = 0;
  for (const f of fields) id = ((id << TYPE_BITS) | DATATYPES[f].id) >>> 0;
  return id;
}

/** Splits a concat id back into field types; undefined when one of them is unknown. */
export function typesOfId(id: number, keyLen: number): DataType[] | undefined {
  const ids: number[] = [];
  let v = id;
  while (v > 0) {
    ids.unshift(v & ((1 << TYPE_BITS) - 1));
    v = Math.floor(v / (1 << TYPE_BITS));
  }
  const out: DataType[] = [];
  for (const n of ids) {
    const name = (Object.keys(DATATYPES) as DataType[]).find((k) => DATATYPES[k].id === n);
    if (!name) return undefined;
    out.push(name);
  }
  if (out.length === 0 || keyLen !== keyLength(out)) return undefined;
  return out;
}

/** A length padded to 4 bytes, as fields are in a concatenation (core's align4). */
export const pad4 = align4;

/** NFTA_SET_KEY_LEN: a single field's length, or the sum of the padded field lengths. */
export const keyLength = (fields: readonly DataType[]): number =>
  fields.length === 1 ? DATATYPES[fields[0]!].len : fields.reduce((s, f) => s + align4(DATATYPES[f].len), 0);

export const PROTOCOLS = { icmp: 1, tcp: 6, udp: 17, icmpv6: 58, sctp: 132 } as const;

/** One key or data field: text/number as nft prints it, or raw bytes of the field's length. */
export type FieldValue = string | number | bigint | Uint8Array;

function parseV4(s: string): Uint8Array | undefined {
  const n = v4Number(s);
  if (n < 0) return undefined;
  return Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
}

/** IPv6 text to bytes, through the one parser in base/ip.ts (IPv4 keeps its fast path above). */
function parseV6(s: string): Uint8Array | undefined {
  const ip = parseIP(s);
  return ip?.family === 'IPv6' ? ip.bytes : undefined;
}

/** RFC 5952 text of 16 bytes. */
export const formatV6 = (b: Uint8Array): string => ipFromBytes(b).text;

export const parseAddr = (s: string): Uint8Array | undefined => parseV4(s) ?? parseV6(s);

function u32host(n: number | bigint): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, Number(n) >>> 0, true);
  return b;
}

/** Encodes one field value (exactly the type's length, unpadded). Throws a TypeError naming the problem. */
export function encodeField(t: DataType, v: FieldValue): Uint8Array {
  const len = DATATYPES[t].len;
  if (v instanceof Uint8Array) {
    if (v.length !== len) throw new TypeError(`${t} takes ${len} bytes, got ${v.length}`);
    return v;
  }
  const bad = (): never => {
    throw new TypeError(`${String(v)} is not a valid ${t}`);
  };
  switch (t) {
    case 'ipv4_addr':
      return (typeof v === 'string' && parseV4(v)) || bad();
    case 'ipv6_addr':
      return (typeof v === 'string' && parseV6(v)) || bad();
    case 'inet_proto':
    case 'nf_proto': {
      const n =
        typeof v === 'string'
          ? ((PROTOCOLS as Record<string, number>)[v] ?? (t === 'nf_proto' ? { ipv4: 2, ipv6: 10 }[v] : undefined))
          : Number(v);
      if (n === undefined || !Number.isInteger(n) || n < 0 || n > 255) bad();
      return Uint8Array.of(n!);
    }
    case 'inet_service': {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0 || n > 0xffff) bad();
      return Uint8Array.of(n >> 8, n & 0xff);
    }
    case 'mark':
    case 'integer':
    case 'iface_index':
    case 'ct_state': {
      const n = typeof v === 'string' ? Number(v) : v;
      if (typeof n === 'number' && (!Number.isInteger(n) || n < 0 || n > 0xffffffff)) bad();
      return u32host(n);
    }
    case 'ifname': {
      const s = Buffer.from(String(v), 'utf8');
      if (s.length >= 16) bad();
      const b = new Uint8Array(16);
      b.set(s);
      return b;
    }
    case 'ether_addr': {
      const parts = String(v).split(':');
      if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{1,2}$/.test(p))) bad();
      return Uint8Array.from(parts.map((p) => parseInt(p, 16)));
    }
  }
  return bad();
}

const isHostU32 = (t: DataType): boolean => t === 'integer' || t === 'mark' || t === 'iface_index' || t === 'ct_state';

/** Writes one field's bytes (unpadded) straight into `out`; the fast path of encodeField for bulk elements. */
export function writeField(out: ByteWriter, t: DataType, v: FieldValue): void {
  if (t === 'ipv4_addr' && typeof v === 'string') {
    const n = v4Number(v);
    if (n < 0) throw new TypeError(`${v} is not a valid ipv4_addr`);
    out.u32be(n);
    return;
  }
  if (t === 'inet_service' && typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0 || v > 0xffff) throw new TypeError(`${v} is not a valid inet_service`);
    out.u16be(v);
    return;
  }
  if (t === 'inet_proto' && typeof v === 'string') {
    const n = (PROTOCOLS as Record<string, number | undefined>)[v];
    if (n !== undefined) {
      out.u8(n);
      return;
    }
  }
  // Host-order u32s (the slot number of an endpoints map key): encodeField would allocate.
  if (typeof v === 'number' && isHostU32(t) && Number.isInteger(v) && v >= 0 && v <= 0xffffffff) {
    out.u32le(v);
    return;
  }
  out.bytes(encodeField(t, v));
}

/** Decodes one field value to the form nft prints (addresses as text, numbers as numbers). */
export function decodeField(t: DataType, b: Uint8Array): string | number {
  switch (t) {
    case 'ipv4_addr':
      return Array.from(b.subarray(0, 4)).join('.');
    case 'ipv6_addr':
      return formatV6(b);
    case 'inet_proto': {
      const n = b[0]!;
      const name = (Object.keys(PROTOCOLS) as (keyof typeof PROTOCOLS)[]).find((k) => PROTOCOLS[k] === n);
      return name ?? n;
    }
    case 'nf_proto':
      return b[0] === 2 ? 'ipv4' : b[0] === 10 ? 'ipv6' : b[0]!;
    case 'inet_service':
      return (b[0]! << 8) | b[1]!;
    case 'ifname': {
      const nul = b.indexOf(0);
      return Buffer.from(b.subarray(0, nul < 0 ? b.length : nul)).toString('utf8');
    }
    case 'ether_addr':
      return Array.from(b)
        .map((x) => x.toString(16).padStart(2, '0'))
        .join(':');
    default:
      return new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true);
  }
}

/** Concatenates field encodings, each padded to 4 bytes when there are several fields. */
export function concatFields(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((s, p) => s + align4(p.length), 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += align4(p.length);
  }
  return out;
}

/** Splits a key into its fields (inverse of concatFields). */
export function splitFields(types: readonly DataType[], b: Uint8Array): Uint8Array[] {
  if (types.length === 1) return [b];
  const out: Uint8Array[] = [];
  let off = 0;
  for (const t of types) {
    out.push(b.subarray(off, off + DATATYPES[t].len));
    off += align4(DATATYPES[t].len);
  }
  return out;
}
