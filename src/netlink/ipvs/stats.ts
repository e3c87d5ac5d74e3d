// IPVS_SVC_ATTR_STATS / _STATS64 and the same for destinations: nested counters. STATS has
// u32 fields except INBYTES/OUTBYTES (u64); STATS64 (kernel 4.x+) has every field as u64 and
// is preferred when present.

import type { AttrSet, AttrWriter } from '../core/index.ts';
import { NetlinkDecodeError, readU32, readU64 } from '../core/index.ts';
import { IpvsStatsAttr as S } from './constants.ts';
import { nestedNoFlag } from './fields.ts';
import type { IpvsStats } from './types.ts';

const FIELDS: ReadonlyArray<readonly [keyof IpvsStats, number]> = [
  ['conns', S.CONNS],
  ['inPkts', S.INPKTS],
  ['outPkts', S.OUTPKTS],
  ['inBytes', S.INBYTES],
  ['outBytes', S.OUTBYTES],
  ['cps', S.CPS],
  ['inPps', S.INPPS],
  ['outPps', S.OUTPPS],
  ['inBps', S.INBPS],
  ['outBps', S.OUTBPS],
];

export const zeroStats = (): IpvsStats => ({
  conns: 0n,
  inPkts: 0n,
  outPkts: 0n,
  inBytes: 0n,
  outBytes: 0n,
  cps: 0n,
  inPps: 0n,
  outPps: 0n,
  inBps: 0n,
  outBps: 0n,
});

/** Reads a stats nest; each counter is taken at the width it arrives in (4 or 8 bytes). */
export function decodeStats(set: AttrSet): IpvsStats {
  const st = zeroStats();
  for (const [name, type] of FIELDS) {
    const a = set.get(type);
    if (!a) continue;
    if (a.data.length >= 8) st[name] = readU64(a.data);
    else if (a.data.length >= 4) st[name] = BigInt(readU32(a.data));
    else throw new NetlinkDecodeError(set.where, a.offset, `stats attribute ${type} has ${a.data.length} bytes`);
  }
  return st;
}

/** Prefers STATS64 over STATS; zeros when neither is present. */
export function pickStats(attrs: AttrSet, statsType: number, stats64Type: number): IpvsStats {
  const s64 = attrs.nested(stats64Type);
  if (s64) return decodeStats(s64);
  const s = attrs.nested(statsType);
  return s ? decodeStats(s) : zeroStats();
}

const WIDE32 = new Set<number>([S.INBYTES, S.OUTBYTES]);

/** Writes both nests as the kernel does (ip_vs_genl_fill_stats and _stats64). */
export function encodeStats(w: AttrWriter, statsType: number, stats64Type: number, st: IpvsStats): void {
  nestedNoFlag(w, statsType, (n) => {
    for (const [name, type] of FIELDS) {
      if (WIDE32.has(type)) n.u64(type, st[name]);
      else n.u32(type, Number(BigInt.asUintN(32, st[name])));
    }
  });
  nestedNoFlag(w, stats64Type, (n) => {
    for (const [name, type] of FIELDS) n.u64(type, BigInt.asUintN(64, st[name]));
  });
}
