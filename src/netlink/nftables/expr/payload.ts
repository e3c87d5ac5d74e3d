// payload: loads bytes from a packet header into a register (or writes a register back).
//   load:  NFTA_PAYLOAD_DREG, BASE, OFFSET, LEN            (all be32)
//   write: NFTA_PAYLOAD_SREG, BASE, OFFSET, LEN, CSUM_TYPE, CSUM_OFFSET, CSUM_FLAGS
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const DREG = 1,
  BASE = 2,
  OFFSET = 3,
  LEN = 4,
  SREG = 5,
  CSUM_TYPE = 6,
  CSUM_OFFSET = 7,
  CSUM_FLAGS = 8;
export const PayloadBase = { ll: 0, network: 1, transport: 2, inner: 3 } as const;
export type PayloadBaseName = keyof typeof PayloadBase;

export interface PayloadExpr {
  type: 'payload';
  base: PayloadBaseName;
  offset: number;
  len: number;
  /** Load into this register (absent for a payload write). */
  dreg?: number;
  /** Write this register into the packet (payload set). */
  sreg?: number;
  csumType?: number;
  csumOffset?: number;
  csumFlags?: number;
}

export const payload: ExprCodec<PayloadExpr> = {
  name: 'payload',
  encode(w: AttrWriter, e: PayloadExpr): void {
    if (e.sreg !== undefined) w.u32(SREG, e.sreg, 'net');
    if (e.dreg !== undefined) w.u32(DREG, e.dreg, 'net');
    w.u32(BASE, PayloadBase[e.base], 'net').u32(OFFSET, e.offset, 'net').u32(LEN, e.len, 'net');
    if (e.csumType !== undefined) w.u32(CSUM_TYPE, e.csumType, 'net');
    if (e.csumOffset !== undefined) w.u32(CSUM_OFFSET, e.csumOffset, 'net');
    if (e.csumFlags !== undefined) w.u32(CSUM_FLAGS, e.csumFlags, 'net');
  },
  decode(a: AttrSet): PayloadExpr {
    const e: PayloadExpr = {
      type: 'payload',
      base: pick(a, PayloadBase, need(a, BASE, a.u32(BASE, 'net'), 'payload base'), 'payload base'),
      offset: need(a, OFFSET, a.u32(OFFSET, 'net'), 'payload offset'),
      len: need(a, LEN, a.u32(LEN, 'net'), 'payload len'),
    };
    const dreg = a.u32(DREG, 'net');
    if (dreg !== undefined) e.dreg = dreg;
    const sreg = a.u32(SREG, 'net');
    if (sreg !== undefined) e.sreg = sreg;
    const ct = a.u32(CSUM_TYPE, 'net');
    if (ct !== undefined) e.csumType = ct;
    const co = a.u32(CSUM_OFFSET, 'net');
    if (co !== undefined) e.csumOffset = co;
    const cf = a.u32(CSUM_FLAGS, 'net');
    if (cf !== undefined) e.csumFlags = cf;
    return e;
  },
  render(e: PayloadExpr): string {
    const where = `${e.len}b @ ${e.base === 'll' ? 'link' : e.base} header + ${e.offset}`;
    return e.sreg !== undefined
      ? `payload write reg ${e.sreg} => ${where}`
      : `payload load ${where} => reg ${e.dreg ?? '?'}`;
  },
};
