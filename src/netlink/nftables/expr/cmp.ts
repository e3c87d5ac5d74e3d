// cmp: compares a register with constant data.
//   NFTA_CMP_SREG be32, NFTA_CMP_OP be32, NFTA_CMP_DATA { NFTA_DATA_VALUE bytes }
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { dataValue, need, pick, words, writeDataValue } from './common.ts';

const SREG = 1,
  OP = 2,
  DATA = 3;
export const CmpOp = { eq: 0, neq: 1, lt: 2, lte: 3, gt: 4, gte: 5 } as const;
export type CmpOpName = keyof typeof CmpOp;

export interface CmpExpr {
  type: 'cmp';
  sreg: number;
  op: CmpOpName;
  data: Uint8Array;
}

export const cmp: ExprCodec<CmpExpr> = {
  name: 'cmp',
  encode(w: AttrWriter, e: CmpExpr): void {
    w.u32(SREG, e.sreg, 'net').u32(OP, CmpOp[e.op], 'net');
    writeDataValue(w, DATA, e.data);
  },
  decode(a: AttrSet): CmpExpr {
    return {
      type: 'cmp',
      sreg: need(a, SREG, a.u32(SREG, 'net'), 'cmp sreg'),
      op: pick(a, CmpOp, need(a, OP, a.u32(OP, 'net'), 'cmp op'), 'cmp op'),
      data: dataValue(a, DATA, 'cmp data'),
    };
  },
  render: (e) => `cmp ${e.op} reg ${e.sreg} ${words(e.data)}`,
};
