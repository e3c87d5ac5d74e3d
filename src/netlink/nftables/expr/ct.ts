// ct: conntrack state of the packet's flow into a register (or set from one).
//   NFTA_CT_KEY be32, NFTA_CT_DREG be32 | NFTA_CT_SREG be32, [NFTA_CT_DIRECTION u8]
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const DREG = 1,
  KEY = 2,
  DIRECTION = 3,
  SREG = 4;
/** enum nft_ct_keys. */
export const CtKey = {
  state: 0,
  direction: 1,
  status: 2,
  mark: 3,
  secmark: 4,
  expiration: 5,
  helper: 6,
  l3protocol: 7,
  src: 8,
  dst: 9,
  protocol: 10,
  'proto-src': 11,
  'proto-dst': 12,
  label: 13,
  packets: 14,
  bytes: 15,
  avgpkt: 16,
  zone: 17,
  event: 18,
  'ip saddr': 19,
  'ip daddr': 20,
  'ip6 saddr': 21,
  'ip6 daddr': 22,
  id: 23,
} as const;
export type CtKeyName = keyof typeof CtKey;
export const CtDirection = { original: 0, reply: 1 } as const;

/** Bits of the ct state value (NF_CT_STATE_*). */
export const CtState = { invalid: 1, established: 2, related: 4, new: 8, untracked: 64 } as const;

export interface CtExpr {
  type: 'ct';
  key: CtKeyName;
  dreg?: number;
  sreg?: number;
  direction?: keyof typeof CtDirection;
}

export const ct: ExprCodec<CtExpr> = {
  name: 'ct',
  encode(w: AttrWriter, e: CtExpr): void {
    w.u32(KEY, CtKey[e.key], 'net');
    if (e.dreg !== undefined) w.u32(DREG, e.dreg, 'net');
    if (e.sreg !== undefined) w.u32(SREG, e.sreg, 'net');
    if (e.direction !== undefined) w.u8(DIRECTION, CtDirection[e.direction]);
  },
  decode(a: AttrSet): CtExpr {
    const e: CtExpr = { type: 'ct', key: pick(a, CtKey, need(a, KEY, a.u32(KEY, 'net'), 'ct key'), 'ct key') };
    const d = a.u32(DREG, 'net');
    if (d !== undefined) e.dreg = d;
    const s = a.u32(SREG, 'net');
    if (s !== undefined) e.sreg = s;
    const dir = a.u8(DIRECTION);
    if (dir !== undefined) e.direction = pick(a, CtDirection, dir, 'ct direction');
    return e;
  },
  render: (e) =>
    e.sreg !== undefined
      ? `ct set ${e.key} with reg ${e.sreg}`
      : `ct load ${e.key} => reg ${e.dreg ?? '?'}${e.direction !== undefined ? `, dir ${e.direction}` : ''}`,
};
