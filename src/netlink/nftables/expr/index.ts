// The expression registry: the NftExpr union and the list codec used by rules.
//
//   NFTA_RULE_EXPRESSIONS (nested)
//     NFTA_LIST_ELEM (nested)            one per expression, in order
//       NFTA_EXPR_NAME  string           "payload", "cmp", ...
//       NFTA_EXPR_DATA  (nested)         the expression's own attributes (absent for notrack)

import { errorMessage } from '../../../base/errors.ts';
import type { AttrWriter } from '../../core/index.ts';
import { AttrSet, NetlinkDecodeError } from '../../core/index.ts';
import { NFTA_EXPR_DATA, NFTA_EXPR_NAME, NFTA_LIST_ELEM } from '../constants.ts';
import { bitwise } from './bitwise.ts';
import type { BitwiseExpr } from './bitwise.ts';
import { cmp } from './cmp.ts';
import type { CmpExpr } from './cmp.ts';
import type { EncodeContext, ExprCodec } from './common.ts';
import { hex } from './common.ts';
import { cstr } from '../message.ts';
import { counter } from './counter.ts';
import type { CounterExpr } from './counter.ts';
import { ct } from './ct.ts';
import type { CtExpr } from './ct.ts';
import { dynset } from './dynset.ts';
import type { DynsetExpr } from './dynset.ts';
import { fib } from './fib.ts';
import type { FibExpr } from './fib.ts';
import { hash } from './hash.ts';
import type { HashExpr } from './hash.ts';
import { immediate } from './immediate.ts';
import type { ImmediateExpr } from './immediate.ts';
import { limit } from './limit.ts';
import type { LimitExpr } from './limit.ts';
import { log } from './log.ts';
import type { LogExpr } from './log.ts';
import { lookup } from './lookup.ts';
import type { LookupExpr } from './lookup.ts';
import { masq } from './masq.ts';
import type { MasqExpr } from './masq.ts';
import { meta } from './meta.ts';
import type { MetaExpr } from './meta.ts';
import { nat } from './nat.ts';
import type { NatExpr } from './nat.ts';
import { notrack } from './notrack.ts';
import type { NotrackExpr } from './notrack.ts';
import { numgen } from './numgen.ts';
import type { NumgenExpr } from './numgen.ts';
import { payload } from './payload.ts';
import type { PayloadExpr } from './payload.ts';
import { reject } from './reject.ts';
import type { RejectExpr } from './reject.ts';
import { xtMatch } from './xt-match.ts';
import type { XtMatchExpr } from './xt-match.ts';
import { xtTarget } from './xt-target.ts';
import type { XtTargetExpr } from './xt-target.ts';

/** An expression the codec does not know; kept verbatim so a decoded rule can be re-sent. */
export interface UnknownExpr {
  type: 'unknown';
  name: string;
  data?: Uint8Array;
}

export type NftExpr =
  | PayloadExpr
  | MetaExpr
  | CmpExpr
  | BitwiseExpr
  | LookupExpr
  | ImmediateExpr
  | NumgenExpr
  | HashExpr
  | NatExpr
  | MasqExpr
  | RejectExpr
  | CtExpr
  | FibExpr
  | CounterExpr
  | DynsetExpr
  | LimitExpr
  | LogExpr
  | NotrackExpr
  | XtMatchExpr
  | XtTargetExpr
  | UnknownExpr;

type Known = Exclude<NftExpr, UnknownExpr>;
const CODECS: { [K in Known['type']]: ExprCodec<Extract<Known, { type: K }>> } = {
  payload,
  meta,
  cmp,
  bitwise,
  lookup,
  immediate,
  numgen,
  hash,
  nat,
  masq,
  reject,
  ct,
  fib,
  counter,
  dynset,
  limit,
  log,
  notrack,
  xtmatch: xtMatch,
  xttarget: xtTarget,
};
const BY_NAME = new Map<string, ExprCodec<Known>>(Object.values(CODECS).map((c) => [c.name, c as ExprCodec<Known>]));

function codecOf(e: Known): ExprCodec<Known> {
  return CODECS[e.type] as ExprCodec<Known>;
}

/** Writes one NFTA_LIST_ELEM for the expression. */
export function writeExpr(w: AttrWriter, e: NftExpr, ctx: EncodeContext): void {
  // open/close rather than nested(): no closure per expression (a full sync writes millions).
  const elem = w.open(NFTA_LIST_ELEM);
  if (e.type === 'unknown') {
    w.str(NFTA_EXPR_NAME, e.name);
    const data = e.data;
    if (data) w.nested(NFTA_EXPR_DATA, (d) => void d.out.bytes(data));
    w.close(elem);
    return;
  }
  const c = codecOf(e);
  w.bytes(NFTA_EXPR_NAME, cstr(c.name));
  if (!c.noData) {
    const data = w.open(NFTA_EXPR_DATA);
    c.encode(w, e, ctx);
    w.close(data);
  }
  w.close(elem);
}

/** Writes the expressions as the contents of a list attribute (the caller opens the nest). */
export function writeExprs(w: AttrWriter, exprs: readonly NftExpr[], ctx: EncodeContext): void {
  for (const e of exprs) writeExpr(w, e, ctx);
}

/** Decodes the contents of NFTA_RULE_EXPRESSIONS. */
export function readExprs(list: AttrSet): NftExpr[] {
  const out: NftExpr[] = [];
  for (const el of list.all) {
    if (el.type !== NFTA_LIST_ELEM)
      throw new NetlinkDecodeError(list.where, el.offset, `expected NFTA_LIST_ELEM, got ${el.type}`);
    const a = new AttrSet(el.data, `${list.where}/expr`, el.offset + 4);
    out.push(readExpr(a));
  }
  return out;
}

export function readExpr(a: AttrSet): NftExpr {
  const name = a.str(NFTA_EXPR_NAME);
  if (name === undefined) throw new NetlinkDecodeError(a.where, 0, 'expression without NFTA_EXPR_NAME');
  const c = BY_NAME.get(name);
  const dataAttr = a.get(NFTA_EXPR_DATA);
  if (!c) return dataAttr ? { type: 'unknown', name, data: Uint8Array.from(dataAttr.data) } : { type: 'unknown', name };
  const data = a.nested(NFTA_EXPR_DATA) ?? new AttrSet(new Uint8Array(0), `${a.where}/${name}`);
  try {
    return c.decode(data);
  } catch (err) {
    if (err instanceof NetlinkDecodeError) throw err;
    throw new NetlinkDecodeError(`${a.where}/${name}`, 0, errorMessage(err));
  }
}

/** One expression in `nft --debug=netlink` style, without the brackets. */
export function renderExpr(e: NftExpr): string {
  if (e.type === 'unknown') return `${e.name}${e.data ? ` ${hex(e.data)}` : ''}`;
  return codecOf(e).render(e);
}

export type { EncodeContext } from './common.ts';
export { NO_SET_IDS } from './common.ts';
export type {
  PayloadExpr,
  MetaExpr,
  CmpExpr,
  BitwiseExpr,
  LookupExpr,
  ImmediateExpr,
  NumgenExpr,
  HashExpr,
  NatExpr,
  MasqExpr,
  RejectExpr,
  CtExpr,
  FibExpr,
  CounterExpr,
  DynsetExpr,
  LimitExpr,
  LogExpr,
  NotrackExpr,
  XtMatchExpr,
  XtTargetExpr,
};
export { PayloadBase } from './payload.ts';
export { MetaKey } from './meta.ts';
export { CmpOp } from './cmp.ts';
export { CtKey, CtState, CtDirection } from './ct.ts';
export { FibFlag, FibResult, RTN_LOCAL } from './fib.ts';
export { RejectType } from './reject.ts';
export { NatType } from './nat.ts';
export { HashType } from './hash.ts';

/**
 * The expression as the kernel reports it back in a dump: nat fills in the range maxima and
 * NF_NAT_RANGE_* flags, bitwise gains its op, log its default level, counters carry values.
 * Lets a caller compare desired rules with listed ones (counters compare without values).
 */
export function kernelForm(e: NftExpr): NftExpr {
  switch (e.type) {
    case 'nat': {
      const out: NatExpr = { ...e };
      let flags = e.flags ?? 0;
      if (e.regAddrMin !== undefined) {
        out.regAddrMax ??= e.regAddrMin;
        flags |= 1; // NF_NAT_RANGE_MAP_IPS
      }
      if (e.regProtoMin !== undefined) {
        out.regProtoMax ??= e.regProtoMin;
        flags |= 2; // NF_NAT_RANGE_PROTO_SPECIFIED
      }
      if (flags !== 0) out.flags = flags;
      return out;
    }
    case 'bitwise':
      return e.op === undefined ? { ...e, op: 'bool' } : e;
    case 'log':
      return e.level === undefined ? { ...e, level: 4 } : e;
    case 'counter':
      return { type: 'counter' };
    default:
      return e;
  }
}
