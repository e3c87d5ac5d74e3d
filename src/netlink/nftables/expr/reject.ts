// reject: answer with an ICMP error or a TCP reset.
//   NFTA_REJECT_TYPE be32 (icmp 0, tcp-reset 1, icmpx 2), NFTA_REJECT_ICMP_CODE u8
// Codes: icmp (ip) port-unreachable 3, host-unreachable 1; icmpv6 port-unreachable 4;
// icmpx port-unreachable 1 (enum nft_reject_inet_code).
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const TYPE = 1,
  CODE = 2;
export const RejectType = { icmp: 0, 'tcp-reset': 1, icmpx: 2 } as const;

export interface RejectExpr {
  type: 'reject';
  reject: keyof typeof RejectType;
  code: number;
}

export const reject: ExprCodec<RejectExpr> = {
  name: 'reject',
  encode(w: AttrWriter, e: RejectExpr): void {
    w.u32(TYPE, RejectType[e.reject], 'net').u8(CODE, e.code);
  },
  decode(a: AttrSet): RejectExpr {
    return {
      type: 'reject',
      reject: pick(a, RejectType, need(a, TYPE, a.u32(TYPE, 'net'), 'reject type'), 'reject type'),
      code: a.u8(CODE) ?? 0,
    };
  },
  render: (e) => `reject type ${RejectType[e.reject]} code ${e.code}`,
};
