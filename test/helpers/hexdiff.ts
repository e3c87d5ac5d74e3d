// Side-by-side hexdumps of two byte strings, 4 bytes per line, with `!` on lines that
// differ (after google/nftables' nftest). Used by fixture tests to show where an encoder
// departs from what the real tool sent.

const word = (b: Uint8Array, off: number): string => {
  const parts: string[] = [];
  for (let i = off; i < off + 4; i++) parts.push(i < b.length ? b[i]!.toString(16).padStart(2, '0') : '  ');
  return parts.join(' ');
};

/** Returns '' when equal, else a table: offset | got | want, `!` marking differing lines. */
export function hexdiff(got: Uint8Array, want: Uint8Array, labels: [string, string] = ['got', 'want']): string {
  if (got.length === want.length && got.every((v, i) => v === want[i])) return '';
  const lines = [`      ${labels[0].padEnd(11)}   ${labels[1]}`];
  const n = Math.max(got.length, want.length);
  for (let off = 0; off < n; off += 4) {
    const a = word(got, off);
    const b = word(want, off);
    lines.push(`${a === b ? ' ' : '!'} ${off.toString(16).padStart(4, '0')} ${a} | ${b}`);
  }
  lines.push(`(${got.length} bytes vs ${want.length} bytes)`);
  return lines.join('\n');
}

export const fromHex = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ''), 'hex'));
export const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
