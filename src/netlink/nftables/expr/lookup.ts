// lookup: is the key in sreg an element of a set? For maps, also load the element's data
// into dreg (dreg 0 = verdict register, which makes a verdict map).
//   NFTA_LOOKUP_SREG, [DREG], SET (string), SET_ID (be32, batch-local), [FLAGS: NFT_LOOKUP_F_INV]
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { EncodeContext, ExprCodec } from './common.ts';
import { need } from './common.ts';
import { cstr } from '../message.ts';

const SET = 1,
  SREG = 2,
  DREG = 3,
  SET_ID = 4,
  FLAGS = 5;
const F_INV = 1;

export interface LookupExpr {
  type: 'lookup';
  set: string;
  sreg: number;
  dreg?: number;
  invert?: boolean;
}

export const lookup: ExprCodec<LookupExpr> = {
  name: 'lookup',
  encode(w: AttrWriter, e: LookupExpr, ctx: EncodeContext): void {
    w.u32(SREG, e.sreg, 'net');
    if (e.dreg !== undefined) w.u32(DREG, e.dreg, 'net');
    w.bytes(SET, cstr(e.set));
    const id = ctx.setId(e.set);
    if (id !== undefined) w.u32(SET_ID, id, 'net');
    if (e.invert) w.u32(FLAGS, F_INV, 'net');
  },
  decode(a: AttrSet): LookupExpr {
    const e: LookupExpr = {
      type: 'lookup',
      set: need(a, SET, a.str(SET), 'lookup set'),
      sreg: need(a, SREG, a.u32(SREG, 'net'), 'lookup sreg'),
    };
    const d = a.u32(DREG, 'net');
    if (d !== undefined) e.dreg = d;
    const f = a.u32(FLAGS, 'net');
    if (f !== undefined && f & F_INV) e.invert = true;
    return e;
  },
  render: (e) =>
    `lookup reg ${e.sreg} set ${e.set}${e.dreg !== undefined ? ` dreg ${e.dreg}` : ''}${e.invert ? ' 0x1' : ''}`,
};
