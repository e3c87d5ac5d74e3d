// Rules: NFTA_RULE_TABLE, CHAIN, [HANDLE be64 (replace/delete)], EXPRESSIONS { ... },
// [USERDATA: comment TLV, as nft stores `comment "..."`], [POSITION be64 (add after / insert before)].
import type { InMessage, OutMessage } from '../core/index.ts';
import type { Family } from './constants.ts';
import { NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_HANDLE, NFTA_RULE_POSITION, NFTA_RULE_TABLE, NFTA_RULE_USERDATA } from './constants.ts';
import type { EncodeContext } from './expr/index.ts';
import { readExprs, renderExpr, writeExprs } from './expr/index.ts';
import { cstr, nftMessage, received } from './message.ts';
import type { NftRule, Scope } from './types.ts';
import { commentOf, commentUdata } from './udata.ts';

// NFTA_RULE_COMPAT { PROTO be32, FLAGS be32 } (nf_tables.h), sent by iptables-nft.
const NFTA_RULE_COMPAT = 5, NFTA_RULE_COMPAT_PROTO = 1, NFTA_RULE_COMPAT_FLAGS = 2;

export function ruleMessage(
  scope: Scope,
  cmd: number,
  flags: number,
  r: NftRule,
  label: string,
  parts: { handle: boolean; body: boolean },
  ctx: EncodeContext,
): OutMessage {
  return nftMessage(cmd, scope.family, flags, label, (w) => {
    w.bytes(NFTA_RULE_TABLE, cstr(scope.table)).bytes(NFTA_RULE_CHAIN, cstr(r.chain));
    if (parts.handle && r.handle !== undefined) w.u64(NFTA_RULE_HANDLE, r.handle, 'net');
    if (!parts.body) return;
    w.nested(NFTA_RULE_EXPRESSIONS, (l) => writeExprs(l, r.exprs, ctx));
    const compat = r.compat;
    if (compat) w.nested(NFTA_RULE_COMPAT, (c) => c.u32(NFTA_RULE_COMPAT_PROTO, compat.proto, 'net').u32(NFTA_RULE_COMPAT_FLAGS, compat.flags, 'net'));
    if (r.comment !== undefined) w.bytes(NFTA_RULE_USERDATA, commentUdata(r.comment));
    if (r.position !== undefined) w.u64(NFTA_RULE_POSITION, r.position, 'net');
  });
}

export interface ListedRule {
  family: Family;
  table: string;
  rule: NftRule;
}

export function decodeRule(msg: Pick<InMessage, 'payload'>): ListedRule {
  const { family, attrs: a } = received(msg, 'rule');
  const rule: NftRule = { kind: 'rule', chain: a.require(NFTA_RULE_CHAIN, a.str(NFTA_RULE_CHAIN)), exprs: [] };
  const list = a.nested(NFTA_RULE_EXPRESSIONS);
  if (list) rule.exprs = readExprs(list);
  const handle = a.u64(NFTA_RULE_HANDLE, 'net');
  if (handle !== undefined) rule.handle = handle;
  const compat = a.nested(NFTA_RULE_COMPAT);
  if (compat) rule.compat = { proto: compat.u32(NFTA_RULE_COMPAT_PROTO, 'net') ?? 0, flags: compat.u32(NFTA_RULE_COMPAT_FLAGS, 'net') ?? 0 };
  const comment = commentOf(a.bytes(NFTA_RULE_USERDATA), 0, 'rule userdata');
  if (comment !== undefined) rule.comment = comment;
  return { family, table: a.require(NFTA_RULE_TABLE, a.str(NFTA_RULE_TABLE)), rule };
}

/** The rule body in nft syntax when the builder recorded it, else its expressions as `nft --debug=netlink` shows them. */
export function renderRuleBody(r: NftRule): string {
  let s = r.text ?? `# ${r.exprs.map((e) => `[ ${renderExpr(e)} ]`).join(' ')}`;
  if (r.comment !== undefined && r.text !== undefined) s += ` comment "${r.comment.replace(/"/g, '\\"')}"`;
  return s;
}
