// numgen: a number in [offset, offset + modulus) into a register, random or round robin.
//   NFTA_NG_DREG, NFTA_NG_MODULUS, NFTA_NG_TYPE, NFTA_NG_OFFSET (be32)
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const DREG = 1,
  MODULUS = 2,
  TYPE = 3,
  OFFSET = 4;
export const NumgenType = { inc: 0, random: 1 } as const;

export interface NumgenExpr {
  type: 'numgen';
  mode: keyof typeof NumgenType;
  modulus: number;
  offset?: number;
  dreg: number;
}

export const numgen: ExprCodec<NumgenExpr> = {
  name: 'numgen',
  encode(w: AttrWriter, e: NumgenExpr): void {
    w.u32(DREG, e.dreg, 'net')
      .u32(MODULUS, e.modulus, 'net')
      .u32(TYPE, NumgenType[e.mode], 'net')
      .u32(OFFSET, e.offset ?? 0, 'net');
  },
  decode(a: AttrSet): NumgenExpr {
    const e: NumgenExpr = {
      type: 'numgen',
      dreg: need(a, DREG, a.u32(DREG, 'net'), 'numgen dreg'),
      modulus: need(a, MODULUS, a.u32(MODULUS, 'net'), 'numgen modulus'),
      mode: pick(a, NumgenType, need(a, TYPE, a.u32(TYPE, 'net'), 'numgen type'), 'numgen type'),
    };
    const o = a.u32(OFFSET, 'net');
    if (o !== undefined) e.offset = o;
    return e;
  },
  render: (e) => `numgen reg ${e.dreg} = ${e.mode} mod ${e.modulus}${e.offset ? ` offset ${e.offset}` : ''}`,
};
