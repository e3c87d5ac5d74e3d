// notrack: skip connection tracking for this packet. nft sends no NFTA_EXPR_DATA at all.
import type { ExprCodec } from './common.ts';

export interface NotrackExpr {
  type: 'notrack';
}

export const notrack: ExprCodec<NotrackExpr> = {
  name: 'notrack',
  noData: true,
  encode(): void {},
  decode: () => ({ type: 'notrack' }),
  render: () => 'notrack',
};
