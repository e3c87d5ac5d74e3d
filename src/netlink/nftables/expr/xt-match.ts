// match: an xtables match run by nft_compat (what iptables-nft emits for `-m set`, `-m comment`,
// `-m addrtype` ...). The kernel looks the match up by name and revision and hands it the
// binary info struct as is; netlink/nftables/iptables/xt-info.ts builds those structs.
//   NFTA_MATCH_NAME  string   "set"
//   NFTA_MATCH_REV   be32     4
//   NFTA_MATCH_INFO  bytes    struct xt_set_info_match_v4, XT_ALIGNed (48 bytes)
// (include/uapi/linux/netfilter/nf_tables_compat.h)
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { hex, need } from './common.ts';
import { cstr } from '../message.ts';

const NAME = 1,
  REV = 2,
  INFO = 3;

export interface XtMatchExpr {
  type: 'xtmatch';
  name: string;
  rev: number;
  info: Uint8Array;
}

export const xtMatch: ExprCodec<XtMatchExpr> = {
  name: 'match',
  encode(w: AttrWriter, e: XtMatchExpr): void {
    w.bytes(NAME, cstr(e.name)).u32(REV, e.rev, 'net').bytes(INFO, e.info);
  },
  decode(a: AttrSet): XtMatchExpr {
    return {
      type: 'xtmatch',
      name: need(a, NAME, a.str(NAME), 'match name'),
      rev: need(a, REV, a.u32(REV, 'net'), 'match rev'),
      info: Uint8Array.from(need(a, INFO, a.bytes(INFO), 'match info')),
    };
  },
  // nft prints only name and revision; the info bytes follow for tests and logs.
  render: (e) => `match name ${e.name} rev ${e.rev} info ${hex(e.info)}`,
};
