// What every expression module shares: the encode context, register names and small
// attribute helpers. Each expression lives in its own file and exports a codec with
// encode (attributes inside NFTA_EXPR_DATA), decode and a `nft --debug=netlink`-style render.

import type { AttrSet, AttrWriter } from '../../core/index.ts';
import { NetlinkDecodeError } from '../../core/index.ts';

export interface EncodeContext {
  /** The batch-local id of a set referenced by name (NFTA_*_SET_ID), when it has one. */
  setId(name: string): number | undefined;
}

export const NO_SET_IDS: EncodeContext = { setId: () => undefined };

export interface ExprCodec<E extends { type: string }> {
  /** The kernel's expression name (NFTA_EXPR_NAME). */
  readonly name: string;
  /** Writes the attributes that go inside NFTA_EXPR_DATA. */
  encode(w: AttrWriter, e: E, ctx: EncodeContext): void;
  decode(a: AttrSet): E;
  render(e: E): string;
  /** Set for expressions nft sends without an NFTA_EXPR_DATA nest at all. */
  readonly noData?: boolean;
}

/** Register numbering as in enum nft_registers: 0 verdict, 1-4 legacy 128-bit, 8-23 32-bit. */
export function regName(r: number): string {
  if (r === 0) return 'verdict';
  return `${r}`;
}

export function need<T>(a: AttrSet, type: number, v: T | undefined, what: string): T {
  if (v === undefined) throw new NetlinkDecodeError(a.where, 0, `${what}: required attribute ${type} is missing`);
  return v;
}

export function pick<K extends string>(a: AttrSet, map: Readonly<Record<K, number>>, v: number, what: string): K {
  for (const [k, n] of Object.entries(map) as [K, number][]) if (n === v) return k;
  throw new NetlinkDecodeError(a.where, 0, `${what}: unknown value ${v}`);
}

export const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

/** Renders data the way `nft --debug=netlink` does: 32-bit words in host order, 0x-prefixed. */
export function words(b: Uint8Array): string {
  const out: string[] = [];
  for (let i = 0; i < b.length; i += 4) {
    const chunk = b.subarray(i, i + 4);
    let v = 0;
    for (let j = chunk.length - 1; j >= 0; j--) v = v * 256 + chunk[j]!;
    out.push(`0x${v.toString(16).padStart(chunk.length * 2, '0')}`);
  }
  return out.join(' ');
}

/** Reads a nested NFTA_DATA_VALUE (inside cmp/immediate/bitwise data attributes). */
export function dataValue(a: AttrSet, type: number, what: string): Uint8Array {
  const n = a.nested(type);
  if (!n) throw new NetlinkDecodeError(a.where, 0, `${what}: required attribute ${type} is missing`);
  const v = n.bytes(1);
  if (!v) throw new NetlinkDecodeError(n.where, 0, `${what}: NFTA_DATA_VALUE missing`);
  return Uint8Array.from(v);
}

export function writeDataValue(w: AttrWriter, type: number, v: Uint8Array): void {
  w.nested(type, (d) => d.bytes(1, v));
}
