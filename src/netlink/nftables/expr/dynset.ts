// dynset: add/update/delete the key in sreg_key (and data in sreg_data) in a set from the
// datapath, e.g. `update @affinity { ip saddr timeout 3h }` for session affinity.
//   NFTA_DYNSET_SREG_KEY, [SREG_DATA], OP, [TIMEOUT be64 ms], SET_NAME, SET_ID, [FLAGS]
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { EncodeContext, ExprCodec } from './common.ts';
import { need, pick } from './common.ts';
import { cstr } from '../message.ts';

const SET_NAME = 1,
  SET_ID = 2,
  OP = 3,
  SREG_KEY = 4,
  SREG_DATA = 5,
  TIMEOUT = 6,
  FLAGS = 9;
export const DynsetOp = { add: 0, update: 1, delete: 2 } as const;

export interface DynsetExpr {
  type: 'dynset';
  set: string;
  op: keyof typeof DynsetOp;
  sregKey: number;
  sregData?: number;
  timeoutMs?: bigint;
  invert?: boolean;
}

export const dynset: ExprCodec<DynsetExpr> = {
  name: 'dynset',
  encode(w: AttrWriter, e: DynsetExpr, ctx: EncodeContext): void {
    w.u32(SREG_KEY, e.sregKey, 'net');
    if (e.sregData !== undefined) w.u32(SREG_DATA, e.sregData, 'net');
    w.u32(OP, DynsetOp[e.op], 'net');
    if (e.timeoutMs !== undefined) w.u64(TIMEOUT, e.timeoutMs, 'net');
    w.bytes(SET_NAME, cstr(e.set));
    const id = ctx.setId(e.set);
    if (id !== undefined) w.u32(SET_ID, id, 'net');
    if (e.invert) w.u32(FLAGS, 1, 'net');
  },
  decode(a: AttrSet): DynsetExpr {
    const e: DynsetExpr = {
      type: 'dynset',
      set: need(a, SET_NAME, a.str(SET_NAME), 'dynset set'),
      op: pick(a, DynsetOp, need(a, OP, a.u32(OP, 'net'), 'dynset op'), 'dynset op'),
      sregKey: need(a, SREG_KEY, a.u32(SREG_KEY, 'net'), 'dynset sreg_key'),
    };
    const d = a.u32(SREG_DATA, 'net');
    if (d !== undefined) e.sregData = d;
    const t = a.u64(TIMEOUT, 'net');
    if (t !== undefined) e.timeoutMs = t;
    const f = a.u32(FLAGS, 'net');
    if (f !== undefined && f & 1) e.invert = true;
    return e;
  },
  render: (e) =>
    `dynset ${e.op} reg_key ${e.sregKey}${e.sregData !== undefined ? ` reg_data ${e.sregData}` : ''} set ${e.set}${e.timeoutMs !== undefined ? ` timeout ${e.timeoutMs}ms` : ''}`,
};
