// bitwise: dreg = (sreg & mask) ^ xor, or a shift of sreg by data.
//   NFTA_BITWISE_SREG, DREG, [OP], LEN (be32), MASK/XOR or DATA { NFTA_DATA_VALUE }
// nft sends OP only for some forms (`meta mark & 0x4000 == 0x4000` has it, the ct state
// flag test does not), so `op` is kept exactly as given or received.
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { dataValue, need, pick, words, writeDataValue } from './common.ts';

const SREG = 1,
  DREG = 2,
  LEN = 3,
  MASK = 4,
  XOR = 5,
  OP = 6,
  DATA = 7;
export const BitwiseOp = { bool: 0, lshift: 1, rshift: 2 } as const;
export type BitwiseOpName = keyof typeof BitwiseOp;

export interface BitwiseExpr {
  type: 'bitwise';
  sreg: number;
  dreg: number;
  len: number;
  op?: BitwiseOpName;
  mask?: Uint8Array;
  xor?: Uint8Array;
  /** Shift amount for lshift/rshift. */
  data?: Uint8Array;
}

export const bitwise: ExprCodec<BitwiseExpr> = {
  name: 'bitwise',
  encode(w: AttrWriter, e: BitwiseExpr): void {
    w.u32(SREG, e.sreg, 'net').u32(DREG, e.dreg, 'net');
    if (e.op !== undefined) w.u32(OP, BitwiseOp[e.op], 'net');
    w.u32(LEN, e.len, 'net');
    if (e.mask) writeDataValue(w, MASK, e.mask);
    if (e.xor) writeDataValue(w, XOR, e.xor);
    if (e.data) writeDataValue(w, DATA, e.data);
  },
  decode(a: AttrSet): BitwiseExpr {
    const e: BitwiseExpr = {
      type: 'bitwise',
      sreg: need(a, SREG, a.u32(SREG, 'net'), 'bitwise sreg'),
      dreg: need(a, DREG, a.u32(DREG, 'net'), 'bitwise dreg'),
      len: need(a, LEN, a.u32(LEN, 'net'), 'bitwise len'),
    };
    const op = a.u32(OP, 'net');
    if (op !== undefined) e.op = pick(a, BitwiseOp, op, 'bitwise op');
    if (a.has(MASK)) e.mask = dataValue(a, MASK, 'bitwise mask');
    if (a.has(XOR)) e.xor = dataValue(a, XOR, 'bitwise xor');
    if (a.has(DATA)) e.data = dataValue(a, DATA, 'bitwise data');
    return e;
  },
  render(e: BitwiseExpr): string {
    if (e.op === 'lshift' || e.op === 'rshift')
      return `bitwise reg ${e.dreg} = ( reg ${e.sreg} ${e.op === 'lshift' ? '<<' : '>>'} ${words(e.data ?? new Uint8Array())} )`;
    return `bitwise reg ${e.dreg} = ( reg ${e.sreg} & ${words(e.mask ?? new Uint8Array())} ) ^ ${words(e.xor ?? new Uint8Array())}`;
  },
};
