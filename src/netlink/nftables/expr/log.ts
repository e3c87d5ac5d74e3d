// log: NFTA_LOG_PREFIX string, [GROUP be16, SNAPLEN be32, QTHRESHOLD be16, LEVEL be32, FLAGS be32]
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';

const GROUP = 1,
  PREFIX = 2,
  SNAPLEN = 3,
  QTHRESHOLD = 4,
  LEVEL = 5,
  FLAGS = 6;

export interface LogExpr {
  type: 'log';
  prefix?: string;
  group?: number;
  snaplen?: number;
  qthreshold?: number;
  level?: number;
  flags?: number;
}

export const log: ExprCodec<LogExpr> = {
  name: 'log',
  encode(w: AttrWriter, e: LogExpr): void {
    if (e.prefix !== undefined) w.str(PREFIX, e.prefix);
    if (e.group !== undefined) w.u16(GROUP, e.group, 'net');
    if (e.snaplen !== undefined) w.u32(SNAPLEN, e.snaplen, 'net');
    if (e.qthreshold !== undefined) w.u16(QTHRESHOLD, e.qthreshold, 'net');
    if (e.level !== undefined) w.u32(LEVEL, e.level, 'net');
    if (e.flags !== undefined) w.u32(FLAGS, e.flags, 'net');
  },
  decode(a: AttrSet): LogExpr {
    const e: LogExpr = { type: 'log' };
    const p = a.str(PREFIX);
    if (p !== undefined) e.prefix = p;
    const g = a.u16(GROUP, 'net');
    if (g !== undefined) e.group = g;
    const s = a.u32(SNAPLEN, 'net');
    if (s !== undefined) e.snaplen = s;
    const q = a.u16(QTHRESHOLD, 'net');
    if (q !== undefined) e.qthreshold = q;
    const l = a.u32(LEVEL, 'net');
    if (l !== undefined) e.level = l;
    const f = a.u32(FLAGS, 'net');
    if (f !== undefined) e.flags = f;
    return e;
  },
  render: (e) => `log${e.prefix !== undefined ? ` prefix ${e.prefix}` : ''}`,
};
