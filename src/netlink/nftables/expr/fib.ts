// fib: a routing lookup (e.g. `fib daddr type` = the address type of the destination).
//   NFTA_FIB_FLAGS, NFTA_FIB_RESULT, NFTA_FIB_DREG (be32, in that order as nft sends them)
// The addrtype result is a host-order u32 RTN_* value (RTN_LOCAL = 2).
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const DREG = 1,
  RESULT = 2,
  FLAGS = 3;
export const FibResult = { oif: 1, oifname: 2, type: 3 } as const;
export const FibFlag = { saddr: 1, daddr: 2, mark: 4, iif: 8, oif: 16, present: 32 } as const;
export type FibFlagName = keyof typeof FibFlag;
export const RTN_LOCAL = 2;

export interface FibExpr {
  type: 'fib';
  result: keyof typeof FibResult;
  flags: FibFlagName[];
  dreg: number;
}

export const fib: ExprCodec<FibExpr> = {
  name: 'fib',
  encode(w: AttrWriter, e: FibExpr): void {
    const flags = e.flags.reduce((acc, f) => acc | FibFlag[f], 0);
    w.u32(FLAGS, flags, 'net').u32(RESULT, FibResult[e.result], 'net').u32(DREG, e.dreg, 'net');
  },
  decode(a: AttrSet): FibExpr {
    const bits = need(a, FLAGS, a.u32(FLAGS, 'net'), 'fib flags');
    return {
      type: 'fib',
      result: pick(a, FibResult, need(a, RESULT, a.u32(RESULT, 'net'), 'fib result'), 'fib result'),
      flags: (Object.keys(FibFlag) as FibFlagName[]).filter((f) => bits & FibFlag[f]),
      dreg: need(a, DREG, a.u32(DREG, 'net'), 'fib dreg'),
    };
  },
  render: (e) => `fib ${e.flags.join(' . ')} ${e.result} => reg ${e.dreg}`,
};
