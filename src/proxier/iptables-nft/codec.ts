// How the writer turns rules into kernel expressions and recognises them again when it lists
// the kernel: a rule's identity ("key") is a digest of the expressions iptables-nft would
// send for it. A listed rule is decoded to a rule and encoded again before it is keyed, so
// the kernel's normal form (counter values, the order iptables-nft puts matches in, a bare
// address for a /32) never makes two equal rules differ.

import { hash } from 'node:crypto';
import type { IPFamily } from '../../base/ip.ts';
import { decodeIptRule } from '../../netlink/nftables/iptables/decode.ts';
import { iptNftRule } from '../../netlink/nftables/iptables/encode.ts';
import { AttrWriter } from '../../netlink/core/index.ts';
import { writeExprs } from '../../netlink/nftables/index.ts';
import type { NftExpr, NftRule } from '../../netlink/nftables/index.ts';
import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';

export interface RuleCodec {
  /** The rule as iptables-nft sends it (expressions, NFTA_RULE_COMPAT). */
  encode(rule: IptRule): NftRule;
  /** A short stable identity of what the rule does (equal keys: the same rule). */
  key(rule: IptRule): string;
  /** The key of a listed rule, or undefined when it is not in a form we write (then it is not ours to keep). */
  kernelKey(listed: NftRule, table: IptTable): string | undefined;
  /** The chain a listed rule jumps or goes to, if any (recognises our jumps in the built-in chains). */
  jumpTarget(listed: NftRule): string | undefined;
}

const NO_SETS = { setId: (): number => 0 };

/**
 * A digest of an expression list: its netlink encoding, hashed. Counters carry no values here
 * (rules are keyed as encoded, and listed rules are decoded and encoded again first).
 */
export function exprsKey(exprs: readonly NftExpr[]): string {
  // One writer for every key (a full sync keys every rule of the shared chains): hashed, then reused.
  keyWriter.out.truncate(0);
  writeExprs(keyWriter, exprs, NO_SETS);
  return hash('sha1', keyWriter.out.view(), 'base64url');
}

const keyWriter = new AttrWriter();

export function listedJumpTarget(listed: NftRule): string | undefined {
  for (const e of listed.exprs) {
    if (e.type !== 'immediate' || !('verdict' in e)) continue;
    const v = e.verdict;
    if ((v.verdict === 'jump' || v.verdict === 'goto') && 'chain' in v) return v.chain;
  }
  return undefined;
}

/** A codec from an encoder and a decoder of one family's rules. */
export function makeCodec(
  encode: (rule: IptRule) => NftRule,
  decode: (listed: NftRule, table: IptTable) => IptRule | undefined,
): RuleCodec {
  const key = (rule: IptRule): string => exprsKey(encode(rule).exprs);
  return {
    encode,
    key,
    kernelKey(listed, table) {
      let rule: IptRule | undefined;
      try {
        rule = decode(listed, table);
      } catch {
        return undefined;
      }
      return rule && key(rule);
    },
    jumpTarget: listedJumpTarget,
  };
}

/** The codec of the iptables-nft dialect (netlink/nftables/iptables encode.ts and decode.ts). */
export function iptablesNftCodec(family: IPFamily): RuleCodec {
  const ctx = {
    setIndex(name: string): number {
      throw new Error(`-m set ${name}: the iptables mode uses no ipsets`);
    },
  };
  return makeCodec(
    (r) => iptNftRule(r, family, ctx),
    (listed, table) => decodeIptRule(listed, table, family),
  );
}
