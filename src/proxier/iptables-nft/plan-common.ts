// Pieces both plans use: a rule encoded once with its key, owned chains refilled, and rules
// added to a shared chain right above its tail (the skeleton's last rules).

import { hash } from 'node:crypto';
import type { NftRule } from '../../netlink/nftables/index.ts';
import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { RuleCodec } from './codec.ts';
import { exprsKey } from './codec.ts';
import type { Plan } from './groups.ts';
import type { SharedEntry } from './state.ts';
import { contentDigest } from './state.ts';
import type { ChainRef, Unit } from './units.ts';
import { chainId } from './units.ts';

export interface Encoded {
  readonly rule: IptRule;
  readonly nft: NftRule;
  readonly key: string;
}

export class Encoder {
  private readonly codec: RuleCodec;

  constructor(codec: RuleCodec) {
    this.codec = codec;
  }

  one(rule: IptRule): Encoded {
    return new EncodedRule(rule, this.codec.encode(rule));
  }

  all(rules: readonly IptRule[]): Encoded[] {
    return rules.map((r) => this.one(r));
  }
}

/** A class, not an object with a getter closure: one of these per rule of a full sync. */
class EncodedRule implements Encoded {
  readonly rule: IptRule;
  readonly nft: NftRule;
  private k: string | undefined;

  constructor(rule: IptRule, nft: NftRule) {
    this.rule = rule;
    this.nft = nft;
  }

  /** Computed when asked: only rules compared with the kernel need one. */
  get key(): string {
    return (this.k ??= exprsKey(this.nft.exprs));
  }
}

/** The rules of each owned chain, from a unit's rule list. */
export function rulesByChain(chains: readonly ChainRef[], rules: readonly Encoded[]): Map<string, Encoded[]> {
  const out = new Map<string, Encoded[]>(chains.map((c) => [chainId(c.table, c.name), []]));
  for (const r of rules) out.get(chainId(r.rule.table, r.rule.chain))?.push(r);
  return out;
}

/** Digest of an owned chain's desired content, comparable with a listed chain's (by rule keys). */
export function digestOf(rules: readonly Encoded[]): string {
  return contentDigest(rules.map((r) => r.key));
}

/**
 * Digest of a service-port chain's content, compared only with the digest the generator's
 * output had at an earlier sync (never with the kernel), so the rules as data will do: no
 * second serialisation of every rule.
 */
export function unitDigest(rules: readonly Encoded[]): string {
  return rulesDigest(rules.map((r) => r.rule));
}

function rulesDigest(rules: readonly IptRule[]): string {
  return hash('sha1', JSON.stringify(rules), 'base64url');
}

/** unitDigest of each of a unit's chains, straight from its rules (nothing encoded). */
export function unitDigests(unit: Unit): Map<string, string> {
  const byChain = new Map<string, IptRule[]>(unit.chains.map((c) => [chainId(c.table, c.name), []]));
  for (const r of unit.rules) byChain.get(chainId(r.table, r.chain))?.push(r);
  const out = new Map<string, string>();
  for (const [id, rules] of byChain) out.set(id, rulesDigest(rules));
  return out;
}

/** Flushes (when it has rules) and refills an owned chain, as one group. */
export function refill(plan: Plan, c: ChainRef, rules: readonly Encoded[], flush: boolean): void {
  plan.group();
  if (flush) plan.chain(c.table, 'flush', { kind: 'chain', name: c.name });
  for (const r of rules) plan.rule(c.table, 'add', r.nft);
}

/** Rules added to shared chains per group: small enough to keep each batch's echo modest. */
export const SHARED_PER_GROUP = 256;

/**
 * Adds a rule to a shared chain above the tail rule (`before`), or at the end when the chain
 * has no tail yet; the entry learns its handle from the kernel's echo.
 */
export function addShared(plan: Plan, table: IptTable, r: Encoded, before: bigint | undefined): SharedEntry {
  const entry: SharedEntry = { table, chain: r.rule.chain, key: r.key, handle: undefined };
  const onHandle = (h: bigint): void => {
    entry.handle = h;
  };
  if (before === undefined) plan.rule(table, 'add', r.nft, onHandle);
  else plan.rule(table, 'insert', { ...r.nft, position: before }, onHandle);
  return entry;
}

export function deleteRule(plan: Plan, table: IptTable, chain: string, handle: bigint): void {
  plan.rule(table, 'delete', { kind: 'rule', chain, exprs: [], handle });
}
