// immediate: loads constant data into a register, or sets the verdict (dreg 0).
//   NFTA_IMMEDIATE_DREG be32, NFTA_IMMEDIATE_DATA { NFTA_DATA_VALUE | NFTA_DATA_VERDICT { CODE, CHAIN } }
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import { NetlinkDecodeError } from '../../core/index.ts';
import { NFT_REG_VERDICT } from '../constants.ts';
import type { Verdict } from '../verdict.ts';
import { readVerdict, renderVerdict, writeVerdict } from '../verdict.ts';
import type { ExprCodec } from './common.ts';
import { need, words } from './common.ts';

const DREG = 1,
  DATA = 2;

export type ImmediateExpr =
  { type: 'immediate'; dreg: number; data: Uint8Array } | { type: 'immediate'; verdict: Verdict };

export const immediate: ExprCodec<ImmediateExpr> = {
  name: 'immediate',
  encode(w: AttrWriter, e: ImmediateExpr): void {
    if ('verdict' in e) {
      w.u32(DREG, NFT_REG_VERDICT, 'net');
      w.nested(DATA, (d) => writeVerdict(d, e.verdict));
    } else {
      w.u32(DREG, e.dreg, 'net');
      w.nested(DATA, (d) => d.bytes(1, e.data));
    }
  },
  decode(a: AttrSet): ImmediateExpr {
    const dreg = need(a, DREG, a.u32(DREG, 'net'), 'immediate dreg');
    const data = a.nested(DATA);
    if (!data) throw new NetlinkDecodeError(a.where, 0, 'immediate data missing');
    if (dreg === NFT_REG_VERDICT) return { type: 'immediate', verdict: readVerdict(data) };
    const v = data.bytes(1);
    if (!v) throw new NetlinkDecodeError(data.where, 0, 'immediate value missing');
    return { type: 'immediate', dreg, data: Uint8Array.from(v) };
  },
  render: (e) =>
    'verdict' in e ? `immediate reg 0 ${renderVerdict(e.verdict)}` : `immediate reg ${e.dreg} ${words(e.data)}`,
};
