// nat: snat/dnat to the address (and port) held in registers.
//   NFTA_NAT_TYPE, FAMILY (NFPROTO), [REG_ADDR_MIN, REG_ADDR_MAX, REG_PROTO_MIN, REG_PROTO_MAX, FLAGS]  (be32)
// nft sets FLAGS = NF_NAT_RANGE_PROTO_SPECIFIED for `dnat to addr:port` but sends no FLAGS
// for `dnat to ... map @m` with a port, so flags are kept as given.
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import { NFPROTO } from '../constants.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const TYPE = 1,
  FAMILY = 2,
  ADDR_MIN = 3,
  ADDR_MAX = 4,
  PROTO_MIN = 5,
  PROTO_MAX = 6,
  FLAGS = 7;
export const NatType = { snat: 0, dnat: 1 } as const;
const NatFamily = { ip: NFPROTO.ip, ip6: NFPROTO.ip6 } as const;

export interface NatExpr {
  type: 'nat';
  nat: keyof typeof NatType;
  family: keyof typeof NatFamily;
  regAddrMin?: number;
  regAddrMax?: number;
  regProtoMin?: number;
  regProtoMax?: number;
  /** NF_NAT_RANGE_* bits. */
  flags?: number;
}

export const nat: ExprCodec<NatExpr> = {
  name: 'nat',
  encode(w: AttrWriter, e: NatExpr): void {
    w.u32(TYPE, NatType[e.nat], 'net').u32(FAMILY, NatFamily[e.family], 'net');
    if (e.regAddrMin !== undefined) w.u32(ADDR_MIN, e.regAddrMin, 'net');
    if (e.regAddrMax !== undefined) w.u32(ADDR_MAX, e.regAddrMax, 'net');
    if (e.regProtoMin !== undefined) w.u32(PROTO_MIN, e.regProtoMin, 'net');
    if (e.regProtoMax !== undefined) w.u32(PROTO_MAX, e.regProtoMax, 'net');
    if (e.flags !== undefined) w.u32(FLAGS, e.flags, 'net');
  },
  decode(a: AttrSet): NatExpr {
    const e: NatExpr = {
      type: 'nat',
      nat: pick(a, NatType, need(a, TYPE, a.u32(TYPE, 'net'), 'nat type'), 'nat type'),
      family: pick(a, NatFamily, need(a, FAMILY, a.u32(FAMILY, 'net'), 'nat family'), 'nat family'),
    };
    const opt = (t: number, k: 'regAddrMin' | 'regAddrMax' | 'regProtoMin' | 'regProtoMax' | 'flags'): void => {
      const v = a.u32(t, 'net');
      if (v !== undefined) e[k] = v;
    };
    opt(ADDR_MIN, 'regAddrMin');
    opt(ADDR_MAX, 'regAddrMax');
    opt(PROTO_MIN, 'regProtoMin');
    opt(PROTO_MAX, 'regProtoMax');
    opt(FLAGS, 'flags');
    return e;
  },
  render(e: NatExpr): string {
    let s = `nat ${e.nat} ${e.family}`;
    if (e.regAddrMin !== undefined) s += ` addr_min reg ${e.regAddrMin}`;
    if (e.regAddrMax !== undefined) s += ` addr_max reg ${e.regAddrMax}`;
    if (e.regProtoMin !== undefined) s += ` proto_min reg ${e.regProtoMin}`;
    if (e.regProtoMax !== undefined) s += ` proto_max reg ${e.regProtoMax}`;
    if (e.flags !== undefined) s += ` flags 0x${e.flags.toString(16)}`;
    return s;
  },
};
