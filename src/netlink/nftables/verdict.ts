// Verdicts as data (NFTA_DATA_VERDICT): used by the immediate expression and by the data
// of verdict-map elements.
//
//   NFTA_DATA_VERDICT (nested)
//     NFTA_VERDICT_CODE  be32 (NF_DROP 0, NF_ACCEPT 1, NFT_JUMP -3, NFT_GOTO -4, ...)
//     NFTA_VERDICT_CHAIN string (jump/goto only)

import type { AttrCursor, AttrSet, AttrWriter } from '../core/index.ts';
import { NetlinkDecodeError } from '../core/index.ts';
import { NFTA_DATA_VERDICT, NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE, VerdictCode } from './constants.ts';
import { ident } from './message.ts';

export type Verdict =
  { verdict: 'accept' | 'drop' | 'continue' | 'return' | 'break' } | { verdict: 'jump' | 'goto'; chain: string };

export const accept: Verdict = { verdict: 'accept' };
export const drop: Verdict = { verdict: 'drop' };
export const ret: Verdict = { verdict: 'return' };
export const jump = (chain: string): Verdict => ({ verdict: 'jump', chain });
export const goTo = (chain: string): Verdict => ({ verdict: 'goto', chain });

export function isVerdict(v: unknown): v is Verdict {
  return typeof v === 'object' && v !== null && 'verdict' in v;
}

/** Writes NFTA_DATA_VERDICT { CODE, CHAIN? } at the writer's current position. */
export function writeVerdict(w: AttrWriter, v: Verdict): void {
  w.nested(NFTA_DATA_VERDICT, (n) => {
    n.u32(NFTA_VERDICT_CODE, VerdictCode[v.verdict] >>> 0, 'net');
    if ('chain' in v) n.str(NFTA_VERDICT_CHAIN, v.chain);
  });
}

/** Reads the verdict inside an NFTA_DATA_* nest (the set holding NFTA_DATA_VERDICT). */
export function readVerdict(data: AttrSet): Verdict {
  const v = data.nested(NFTA_DATA_VERDICT);
  if (!v) throw new NetlinkDecodeError(data.where, 0, 'NFTA_DATA_VERDICT missing');
  return verdictOf(v.u32(NFTA_VERDICT_CODE, 'net'), v.str(NFTA_VERDICT_CHAIN), v.where, 0);
}

/** Reads the NFTA_DATA_VERDICT nest the cursor is on (an nfnetlink cursor: network order). */
export function verdictAt(c: AttrCursor): Verdict {
  const at = c.offset;
  let code: number | undefined;
  let chain: string | undefined;
  const outer = c.enter();
  while (c.next()) {
    if (c.type() === NFTA_VERDICT_CODE) code ??= c.u32();
    else if (c.type() === NFTA_VERDICT_CHAIN) chain ??= c.str();
  }
  c.exit(outer);
  c.check();
  return verdictOf(code, chain, c.where, at);
}

function verdictOf(raw: number | undefined, chain: string | undefined, where: string, offset: number): Verdict {
  if (raw === undefined) throw new NetlinkDecodeError(where, offset, 'NFTA_VERDICT_CODE missing');
  const code = raw | 0;
  const name = (Object.keys(VerdictCode) as (keyof typeof VerdictCode)[]).find((k) => VerdictCode[k] === code);
  if (!name) throw new NetlinkDecodeError(where, offset, `unknown verdict code ${code}`);
  if (name === 'jump' || name === 'goto') {
    if (chain === undefined) throw new NetlinkDecodeError(where, offset, `${name} without NFTA_VERDICT_CHAIN`);
    return { verdict: name, chain };
  }
  return { verdict: name };
}

export const renderVerdict = (v: Verdict): string => ('chain' in v ? `${v.verdict} ${ident(v.chain)}` : v.verdict);
