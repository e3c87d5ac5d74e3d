// Rules: NFTA_RULE_TABLE, CHAIN, [HANDLE be64 (replace/delete)], EXPRESSIONS { ... },
// [USERDATA: comment TLV, as nft stores `comment "..."`], [POSITION be64 (add after / insert before)].
import type { InMessage, OutMessage } from '../core/index.ts';
import { NLM_F_APPEND, NLM_F_CREATE, NLM_F_REPLACE } from '../core/index.ts';
import type { Family } from './constants.ts';
import {
  NFTA_RULE_CHAIN,
  NFTA_RULE_EXPRESSIONS,
  NFTA_RULE_HANDLE,
  NFTA_RULE_POSITION,
  NFTA_RULE_TABLE,
  NFTA_RULE_USERDATA,
  NftMsg,
} from './constants.ts';
import type { EncodeContext } from './expr/index.ts';
import { readExprs, renderExpr, writeExprs } from './expr/index.ts';
import { cstr, ident, nftMessage, received } from './message.ts';
import type { ObjectCodec } from './object.ts';
import { isRemoval, needsDestroy, opLabel, removalCmd, scopeText } from './object.ts';
import type { NftRule, Scope } from './types.ts';
import { commentOf, commentUdata } from './udata.ts';

// NFTA_RULE_COMPAT { PROTO be32, FLAGS be32 } (nf_tables.h), sent by iptables-nft.
const NFTA_RULE_COMPAT = 5,
  NFTA_RULE_COMPAT_PROTO = 1,
  NFTA_RULE_COMPAT_FLAGS = 2;

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
    w.bytes(NFTA_RULE_TABLE, cstr(scope.table)).str(NFTA_RULE_CHAIN, r.chain);
    if (parts.handle && r.handle !== undefined) w.u64(NFTA_RULE_HANDLE, r.handle, 'net');
    if (!parts.body) return;
    w.nested(NFTA_RULE_EXPRESSIONS, (l) => writeExprs(l, r.exprs, ctx));
    const compat = r.compat;
    if (compat)
      w.nested(NFTA_RULE_COMPAT, (c) =>
        c.u32(NFTA_RULE_COMPAT_PROTO, compat.proto, 'net').u32(NFTA_RULE_COMPAT_FLAGS, compat.flags, 'net'),
      );
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
  if (compat)
    rule.compat = {
      proto: compat.u32(NFTA_RULE_COMPAT_PROTO, 'net') ?? 0,
      flags: compat.u32(NFTA_RULE_COMPAT_FLAGS, 'net') ?? 0,
    };
  const comment = commentOf(a.bytes(NFTA_RULE_USERDATA), 0, 'rule userdata');
  if (comment !== undefined) rule.comment = comment;
  return { family, table: a.require(NFTA_RULE_TABLE, a.str(NFTA_RULE_TABLE)), rule };
}

/**
 * The rule body in nft syntax when the builder recorded it, else its expressions as `nft --debug=netlink` shows them.
 */
export function renderRuleBody(r: NftRule): string {
  let s = r.text ?? `# ${r.exprs.map((e) => `[ ${renderExpr(e)} ]`).join(' ')}`;
  if (r.comment !== undefined && r.text !== undefined) s += ` comment "${r.comment.replace(/"/g, '\\"')}"`;
  return s;
}

/** DELRULE naming only the table (every rule of it) or the table and a chain: nft's `flush table/chain`. */
export function flushRulesMessage(scope: Scope, chain: string | undefined, label: string): OutMessage {
  return nftMessage(NftMsg.DELRULE, scope.family, 0, label, (w) => {
    w.str(NFTA_RULE_TABLE, scope.table);
    if (chain !== undefined) w.str(NFTA_RULE_CHAIN, chain);
  });
}

const BODY = { handle: false, body: true };
const HANDLE_AND_BODY = { handle: true, body: true };
const HANDLE = { handle: true, body: false };

/** Rules: NEWRULE (append, insert, replace by handle) and DELRULE by handle. */
export const ruleCodec: ObjectCodec<NftRule, ListedRule> = {
  validate(verb, r) {
    if (verb === 'flush') return 'cannot flush a rule';
    if (verb === 'create') return 'cannot create a rule (use add)';
    if (!r.chain) return 'rule needs a chain';
    if ((verb === 'replace' || isRemoval(verb)) && r.handle === undefined)
      return `${verb} rule in ${r.chain} needs a handle`;
    if ((verb === 'add' || verb === 'insert' || verb === 'replace') && !Array.isArray(r.exprs))
      return `rule in ${r.chain} needs expressions`;
    return undefined;
  },

  encode(st, verb, r) {
    const { scope, ctx } = st;
    const label = opLabel(st, verb, r);
    const byHandle = `${label} handle ${r.handle}`;
    if (verb === 'add')
      st.out.push(ruleMessage(scope, NftMsg.NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r, label, BODY, ctx));
    else if (verb === 'insert') st.out.push(ruleMessage(scope, NftMsg.NEWRULE, NLM_F_CREATE, r, label, BODY, ctx));
    else if (verb === 'replace')
      st.out.push(ruleMessage(scope, NftMsg.NEWRULE, NLM_F_REPLACE, r, byHandle, HANDLE_AND_BODY, ctx));
    else
      st.out.push(
        ruleMessage(scope, removalCmd(verb, NftMsg.DELRULE, NftMsg.DESTROYRULE), 0, r, byHandle, HANDLE, ctx),
      );
  },

  render(scope, verb, r) {
    const where = `${scopeText(scope)} ${ident(r.chain)}`;
    if (isRemoval(verb)) return `${verb} rule ${where} handle ${r.handle}`;
    if (verb === 'replace') return `replace rule ${where} handle ${r.handle} ${renderRuleBody(r)}`;
    return `${verb} rule ${where}${r.position !== undefined ? ` position ${r.position}` : ''} ${renderRuleBody(r)}`;
  },

  decode: decodeRule,

  emulateDestroy: (r) => needsDestroy(`rule ${r.chain} handle ${r.handle}`),
};
