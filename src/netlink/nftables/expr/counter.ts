// counter: packets and bytes. nft sends an empty nest; the kernel reports
// NFTA_COUNTER_BYTES and NFTA_COUNTER_PACKETS (be64) in dumps.
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';

const BYTES = 1,
  PACKETS = 2;

export interface CounterExpr {
  type: 'counter';
  bytes?: bigint;
  packets?: bigint;
}

export const counter: ExprCodec<CounterExpr> = {
  name: 'counter',
  encode(w: AttrWriter, e: CounterExpr): void {
    if (e.bytes !== undefined) w.u64(BYTES, e.bytes, 'net');
    if (e.packets !== undefined) w.u64(PACKETS, e.packets, 'net');
  },
  decode(a: AttrSet): CounterExpr {
    const e: CounterExpr = { type: 'counter' };
    const b = a.u64(BYTES, 'net');
    if (b !== undefined) e.bytes = b;
    const p = a.u64(PACKETS, 'net');
    if (p !== undefined) e.packets = p;
    return e;
  },
  render: (e) => `counter pkts ${e.packets ?? 0n} bytes ${e.bytes ?? 0n}`,
};
