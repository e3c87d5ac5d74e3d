// meta: packet metadata (mark, l4proto, interface ...) into a register, or set from one.
//   load: NFTA_META_KEY, NFTA_META_DREG      set: NFTA_META_KEY, NFTA_META_SREG   (be32)
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const DREG = 1,
  KEY = 2,
  SREG = 3;
/** enum nft_meta_keys. */
export const MetaKey = {
  len: 0,
  protocol: 1,
  priority: 2,
  mark: 3,
  iif: 4,
  oif: 5,
  iifname: 6,
  oifname: 7,
  iiftype: 8,
  oiftype: 9,
  skuid: 10,
  skgid: 11,
  nftrace: 12,
  rtclassid: 13,
  secmark: 14,
  nfproto: 15,
  l4proto: 16,
  bri_iifname: 17,
  bri_oifname: 18,
  pkttype: 19,
  cpu: 20,
  iifgroup: 21,
  oifgroup: 22,
  cgroup: 23,
  prandom: 24,
  secpath: 25,
  iifkind: 26,
  oifkind: 27,
  bri_iifpvid: 28,
  bri_iifvproto: 29,
  time_ns: 30,
  time_day: 31,
  time_hour: 32,
  sdif: 33,
  sdifname: 34,
} as const;
export type MetaKeyName = keyof typeof MetaKey;

export interface MetaExpr {
  type: 'meta';
  key: MetaKeyName;
  dreg?: number;
  sreg?: number;
}

export const meta: ExprCodec<MetaExpr> = {
  name: 'meta',
  encode(w: AttrWriter, e: MetaExpr): void {
    w.u32(KEY, MetaKey[e.key], 'net');
    if (e.dreg !== undefined) w.u32(DREG, e.dreg, 'net');
    if (e.sreg !== undefined) w.u32(SREG, e.sreg, 'net');
  },
  decode(a: AttrSet): MetaExpr {
    const e: MetaExpr = {
      type: 'meta',
      key: pick(a, MetaKey, need(a, KEY, a.u32(KEY, 'net'), 'meta key'), 'meta key'),
    };
    const d = a.u32(DREG, 'net');
    if (d !== undefined) e.dreg = d;
    const s = a.u32(SREG, 'net');
    if (s !== undefined) e.sreg = s;
    return e;
  },
  render: (e) =>
    e.sreg !== undefined ? `meta set ${e.key} with reg ${e.sreg}` : `meta load ${e.key} => reg ${e.dreg ?? '?'}`,
};
