// Reads hex fixtures captured from the real tools (test/fixtures/netlink/**, see CAPTURE.md).
import { readFileSync } from 'node:fs';
import { fromHex } from './naive-bytes.ts';

export function fixture(path: string): Uint8Array {
  return fromHex(readFileSync(new URL(`../fixtures/netlink/${path}`, import.meta.url), 'utf8'));
}

/** Splits a captured datagram into messages with seq and pid zeroed (they vary per run). */
export function maskSeqPid(buf: Uint8Array): Uint8Array {
  const out = Uint8Array.from(buf);
  const dv = new DataView(out.buffer);
  for (let off = 0; off + 16 <= out.length;) {
    const len = dv.getUint32(off, true);
    if (len < 16) break;
    dv.setUint32(off + 8, 0, true);
    dv.setUint32(off + 12, 0, true);
    off += (len + 3) & ~3;
  }
  return out;
}

/** Side-by-side 4-bytes-per-line hexdump of two buffers, `!` on lines that differ. */
export function hexdiff(actual: Uint8Array, expected: Uint8Array): string {
  const lines: string[] = ['    actual        expected'];
  const n = Math.max(actual.length, expected.length);
  const word = (b: Uint8Array, i: number): string =>
    Array.from({ length: 4 }, (_, k) => (i + k < b.length ? b[i + k]!.toString(16).padStart(2, '0') : '  ')).join(' ');
  for (let i = 0; i < n; i += 4) {
    const a = word(actual, i);
    const e = word(expected, i);
    lines.push(`${a === e ? ' ' : '!'} ${i.toString().padStart(4)}  ${a}   ${e}`);
  }
  return lines.join('\n');
}

/**
 * Zeroes the padding after every attribute of buf[start, end), recursing into nested ones
 * (NLA_F_NESTED): libnetfilter_conntrack and iptables-nft leave stack garbage there.
 */
export function zeroAttrPadding(buf: Uint8Array, start: number, end: number): void {
  let off = start;
  while (off + 4 <= end) {
    const len = buf[off]! | (buf[off + 1]! << 8);
    const type = buf[off + 2]! | (buf[off + 3]! << 8);
    if (len < 4 || off + len > end) return;
    if (type & 0x8000) zeroAttrPadding(buf, off + 4, off + len);
    const padded = (len + 3) & ~3;
    for (let i = off + len; i < Math.min(off + padded, end); i++) buf[i] = 0;
    off += padded;
  }
}
