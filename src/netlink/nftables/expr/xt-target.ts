// target: an xtables target run by nft_compat (iptables-nft's `-j MARK`, `-j MASQUERADE`,
// `-j REJECT`); verdict targets (ACCEPT, RETURN, jumps) are native immediates instead.
//   NFTA_TARGET_NAME  string   "MARK"
//   NFTA_TARGET_REV   be32     2
//   NFTA_TARGET_INFO  bytes    struct xt_mark_tginfo2 (8 bytes)
// (include/uapi/linux/netfilter/nf_tables_compat.h)
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { hex, need } from './common.ts';
import { cstr } from '../message.ts';

const NAME = 1,
  REV = 2,
  INFO = 3;

export interface XtTargetExpr {
  type: 'xttarget';
  name: string;
  rev: number;
  info: Uint8Array;
}

export const xtTarget: ExprCodec<XtTargetExpr> = {
  name: 'target',
  encode(w: AttrWriter, e: XtTargetExpr): void {
    w.bytes(NAME, cstr(e.name)).u32(REV, e.rev, 'net').bytes(INFO, e.info);
  },
  decode(a: AttrSet): XtTargetExpr {
    return {
      type: 'xttarget',
      name: need(a, NAME, a.str(NAME), 'target name'),
      rev: need(a, REV, a.u32(REV, 'net'), 'target rev'),
      info: Uint8Array.from(need(a, INFO, a.bytes(INFO), 'target info')),
    };
  },
  render: (e) => `target name ${e.name} rev ${e.rev} info ${hex(e.info)}`,
};
