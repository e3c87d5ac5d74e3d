// Shared helpers for nf_tables messages: building an OutMessage for this subsystem and
// splitting a received one into its family and attributes.

import type { AttrWriter, InMessage, OutMessage } from '../core/index.ts';
import { AttrSet, NetlinkDecodeError, NfnlSubsys, nfMessage, splitNfPayload } from '../core/index.ts';
import type { Family } from './constants.ts';
import { familyName, NFPROTO } from './constants.ts';

/** `sizeHint`: the expected payload size (see nfMessage). */
export function nftMessage(
  cmd: number,
  family: Family,
  flags: number,
  label: string,
  fill: (w: AttrWriter) => void,
  sizeHint?: number,
): OutMessage {
  return nfMessage(NfnlSubsys.NFTABLES, cmd, NFPROTO[family], flags, label, fill, 0, sizeHint);
}

export interface Received {
  family: Family;
  attrs: AttrSet;
}

export function received(msg: Pick<InMessage, 'payload'>, where: string): Received {
  const nf = splitNfPayload(msg.payload);
  if (!nf) throw new NetlinkDecodeError(where, 0, 'payload shorter than nfgenmsg');
  const family = familyName(nf.family);
  if (!family) throw new NetlinkDecodeError(where, 0, `unknown family ${nf.family}`);
  return { family, attrs: new AttrSet(nf.attrs, where, 4) };
}

/** nft quoting for names and strings in toString(). */
export const quote = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
export const ident = (s: string): string => (/^[A-Za-z_][A-Za-z0-9_\-/.]*$/.test(s) && !RESERVED.has(s) ? s : quote(s));
const RESERVED = new Set([
  'table',
  'chain',
  'set',
  'map',
  'rule',
  'element',
  'handle',
  'position',
  'index',
  'type',
  'hook',
  'policy',
  'priority',
  'comment',
  'flags',
  'timeout',
  'counter',
  'accept',
  'drop',
  'jump',
  'goto',
  'return',
  'continue',
]);

// Encoded NUL-terminated strings, cached: a sync writes the same table, set and expression
// names thousands of times, and Buffer.from per attribute shows in profiles. Names that are
// mostly unique (a chain's, in a sync of 100,000 chains) are written with AttrWriter.str,
// which stores an ASCII string without allocating.
const CSTR_MAX = 8192;
const cstrCache = new Map<string, Uint8Array>();

/** The bytes of an NLA_STRING attribute (UTF-8 plus NUL): `w.bytes(t, cstr(s))` equals `w.str(t, s)`. */
export function cstr(s: string): Uint8Array {
  let b = cstrCache.get(s);
  if (b === undefined) {
    const enc = Buffer.from(s, 'utf8');
    b = new Uint8Array(enc.length + 1);
    b.set(enc);
    if (cstrCache.size >= CSTR_MAX) cstrCache.clear();
    cstrCache.set(s, b);
  }
  return b;
}

/** A duration as nft prints it: 1d2h3m4s5ms, 0s for zero. */
export function renderDuration(ms: number): string {
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [u, n] of units) {
    if (rest >= n) {
      out += `${Math.floor(rest / n)}${u}`;
      rest %= n;
    }
  }
  if (rest > 0) out += `${rest}ms`;
  return out;
}
