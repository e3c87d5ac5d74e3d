// masq: source NAT to the outgoing interface's address.
//   [NFTA_MASQ_FLAGS (NF_NAT_RANGE_*), REG_PROTO_MIN, REG_PROTO_MAX]  (be32); nft sends an empty nest by default
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';

const FLAGS = 1,
  PROTO_MIN = 2,
  PROTO_MAX = 3;

export interface MasqExpr {
  type: 'masq';
  flags?: number;
  regProtoMin?: number;
  regProtoMax?: number;
}

export const masq: ExprCodec<MasqExpr> = {
  name: 'masq',
  encode(w: AttrWriter, e: MasqExpr): void {
    if (e.flags !== undefined) w.u32(FLAGS, e.flags, 'net');
    if (e.regProtoMin !== undefined) w.u32(PROTO_MIN, e.regProtoMin, 'net');
    if (e.regProtoMax !== undefined) w.u32(PROTO_MAX, e.regProtoMax, 'net');
  },
  decode(a: AttrSet): MasqExpr {
    const e: MasqExpr = { type: 'masq' };
    const f = a.u32(FLAGS, 'net');
    if (f !== undefined) e.flags = f;
    const mn = a.u32(PROTO_MIN, 'net');
    if (mn !== undefined) e.regProtoMin = mn;
    const mx = a.u32(PROTO_MAX, 'net');
    if (mx !== undefined) e.regProtoMax = mx;
    return e;
  },
  render: (e) => `masq${e.flags !== undefined ? ` flags 0x${e.flags.toString(16)}` : ''}`,
};
