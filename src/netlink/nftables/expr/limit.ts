// limit: token bucket. NFTA_LIMIT_RATE be64, UNIT be64 (seconds), BURST be32, TYPE be32, FLAGS be32
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const RATE = 1,
  UNIT = 2,
  BURST = 3,
  TYPE = 4,
  FLAGS = 5;
export const LimitType = { packets: 0, bytes: 1 } as const;

export interface LimitExpr {
  type: 'limit';
  rate: bigint;
  /** Seconds per unit: 1 second, 60 minute, 3600 hour, 86400 day. */
  unit: bigint;
  burst: number;
  kind: keyof typeof LimitType;
  invert?: boolean;
}

export const limit: ExprCodec<LimitExpr> = {
  name: 'limit',
  encode(w: AttrWriter, e: LimitExpr): void {
    w.u64(RATE, e.rate, 'net')
      .u64(UNIT, e.unit, 'net')
      .u32(BURST, e.burst, 'net')
      .u32(TYPE, LimitType[e.kind], 'net')
      .u32(FLAGS, e.invert ? 1 : 0, 'net');
  },
  decode(a: AttrSet): LimitExpr {
    const e: LimitExpr = {
      type: 'limit',
      rate: need(a, RATE, a.u64(RATE, 'net'), 'limit rate'),
      unit: need(a, UNIT, a.u64(UNIT, 'net'), 'limit unit'),
      burst: a.u32(BURST, 'net') ?? 0,
      kind: pick(a, LimitType, a.u32(TYPE, 'net') ?? 0, 'limit type'),
    };
    if ((a.u32(FLAGS, 'net') ?? 0) & 1) e.invert = true;
    return e;
  },
  render: (e) => `limit rate ${e.rate}/${e.unit}s burst ${e.burst} type ${e.kind}${e.invert ? ' inv' : ''}`,
};
