// nftnl "udata": the TLV format nft stores in NFTA_*_USERDATA (comments, set key byte
// order, typeof expressions). Unlike netlink attributes: type u8, len u8, value, no padding.
//
//   +--------+--------+----------------+
//   | type u8| len u8 | value (len)    |  ... repeated; a nest's value is more TLVs
//   +--------+--------+----------------+
// Integers are host order (little-endian u32). Strings include their trailing NUL.

import { NetlinkDecodeError } from '../core/index.ts';

export type UdataValue = Uint8Array | UdataTlv[];
export interface UdataTlv {
  type: number;
  value: UdataValue;
}

export const udU32 = (type: number, v: number): UdataTlv => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, true);
  return { type, value: b };
};
export const udStr = (type: number, s: string): UdataTlv => ({
  type,
  value: Uint8Array.from([...Buffer.from(s, 'utf8'), 0]),
});
export const udNest = (type: number, children: UdataTlv[]): UdataTlv => ({ type, value: children });

function size(t: UdataTlv): number {
  return 2 + (t.value instanceof Uint8Array ? t.value.length : t.value.reduce((s, c) => s + size(c), 0));
}

export function encodeUdata(tlvs: readonly UdataTlv[]): Uint8Array {
  const total = tlvs.reduce((s, t) => s + size(t), 0);
  const out = new Uint8Array(total);
  let off = 0;
  const put = (t: UdataTlv): void => {
    const len = size(t) - 2;
    if (len > 255) throw new RangeError(`udata value of type ${t.type} too long: ${len} bytes`);
    out[off++] = t.type;
    out[off++] = len;
    if (t.value instanceof Uint8Array) {
      out.set(t.value, off);
      off += t.value.length;
    } else t.value.forEach(put);
  };
  tlvs.forEach(put);
  return out;
}

/** Parses one level of TLVs (values stay bytes; parse a nest again with decodeUdata). */
export function decodeUdata(b: Uint8Array, where = 'udata'): { type: number; value: Uint8Array }[] {
  const out: { type: number; value: Uint8Array }[] = [];
  let off = 0;
  while (off < b.length) {
    if (b.length - off < 2) throw new NetlinkDecodeError(where, off, 'truncated udata header');
    const type = b[off]!;
    const len = b[off + 1]!;
    if (off + 2 + len > b.length)
      throw new NetlinkDecodeError(
        where,
        off,
        `udata type ${type} claims ${len} bytes, only ${b.length - off - 2} left`,
      );
    out.push({ type, value: b.subarray(off + 2, off + 2 + len) });
    off += 2 + len;
  }
  return out;
}

export const udGet = (tlvs: readonly { type: number; value: Uint8Array }[], type: number): Uint8Array | undefined =>
  tlvs.find((t) => t.type === type)?.value;

export function udReadStr(v: Uint8Array): string {
  const nul = v.indexOf(0);
  return Buffer.from(v.subarray(0, nul < 0 ? v.length : nul)).toString('utf8');
}

export function udReadU32(v: Uint8Array, where = 'udata'): number {
  if (v.length < 4) throw new NetlinkDecodeError(where, 0, `u32 udata value has ${v.length} bytes`);
  return new DataView(v.buffer, v.byteOffset, 4).getUint32(0, true);
}

/**
 * Comments: NFTNL_UDATA_{TABLE,CHAIN,RULE}_COMMENT = 0, NFTNL_UDATA_SET_COMMENT = 7, NFTNL_UDATA_SET_ELEM_COMMENT =
 * 0.
 */
export const UD_COMMENT = 0;
export const UD_SET_KEYBYTEORDER = 0;
export const UD_SET_DATABYTEORDER = 1;
export const UD_SET_MERGE_ELEMENTS = 2;
export const UD_SET_KEY_TYPEOF = 3;
export const UD_SET_DATA_TYPEOF = 4;
export const UD_SET_DATA_INTERVAL = 6;
export const UD_SET_COMMENT = 7;
export const UD_SET_ELEM_COMMENT = 0;
export const UD_SET_ELEM_FLAGS = 1;
/** NFTNL_SET_ELEM_F_INTERVAL_OPEN: an interval running to the end of the key space (no end element). */
export const SET_ELEM_F_INTERVAL_OPEN = 1;

/** Encodes a comment-only userdata (tables, chains, rules, elements). */
export const commentUdata = (comment: string, type = UD_COMMENT): Uint8Array => encodeUdata([udStr(type, comment)]);

export function commentOf(b: Uint8Array | undefined, type = UD_COMMENT, where = 'udata'): string | undefined {
  if (!b) return undefined;
  const v = udGet(decodeUdata(b, where), type);
  return v ? udReadStr(v) : undefined;
}
