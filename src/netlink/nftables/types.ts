// The typed objects of the nf_tables layer. A client and its transactions are bound to one
// (family, table), as in knftables, so objects name only what lies inside the table.
// Optional fields are absent rather than undefined (exactOptionalPropertyTypes).

import type { IPFamily } from '../../base/ip.ts';
import type { Family, Hook } from './constants.ts';
import type { DataType, FieldValue } from './datatypes.ts';
import type { NftExpr } from './expr/index.ts';
import type { Verdict } from './verdict.ts';

export interface Scope {
  family: Family;
  table: string;
}

export interface NftTable {
  kind: 'table';
  comment?: string;
  /** NFT_TABLE_F_* (dormant 1, owner 2). */
  flags?: number;
  handle?: bigint;
}

export interface BaseChainSpec {
  type: 'filter' | 'nat' | 'route';
  hook: Hook;
  priority: number;
  policy?: 'accept' | 'drop';
  /** netdev ingress only. */
  device?: string;
}

export interface NftChain {
  kind: 'chain';
  name: string;
  base?: BaseChainSpec;
  comment?: string;
  handle?: bigint;
}

/** typeof expressions nft can record in set userdata (so `nft list` prints `typeof ...`). */
export type TypeofExpr =
  | { expr: 'meta'; key: 'l4proto' | 'mark' | 'iifname' | 'oifname' | 'nfproto' }
  | { expr: 'numgen'; mode: 'random' | 'inc'; modulus: number; offset?: number }
  | { expr: 'payload'; field: PayloadField };

export type PayloadField =
  | 'ip saddr'
  | 'ip daddr'
  | 'ip6 saddr'
  | 'ip6 daddr'
  | 'tcp sport'
  | 'tcp dport'
  | 'udp sport'
  | 'udp dport'
  | 'sctp sport'
  | 'sctp dport'
  | 'th sport'
  | 'th dport';

export type SetFlag = 'constant' | 'interval' | 'timeout' | 'dynamic';

interface SetCommon {
  name: string;
  /** Key field types; more than one makes a concatenation. */
  key: readonly DataType[];
  /**
   * Declares the key with `typeof` (one expression per field) instead of `type`; the field
   * types in `key` must match what the expressions produce (numgen → integer, meta l4proto → inet_proto).
   */
  typeof?: readonly TypeofExpr[];
  flags?: readonly SetFlag[];
  /** Default element timeout (flags timeout). */
  timeoutMs?: number;
  gcIntervalMs?: number;
  size?: number;
  comment?: string;
  handle?: bigint;
}

export interface NftSet extends SetCommon {
  kind: 'set';
}

export interface NftMap extends SetCommon {
  kind: 'map';
  /** Data field types, or 'verdict' for a verdict map. */
  data: readonly DataType[] | 'verdict';
  /**
   * With a `typeof` key, how nft should print the data (`typeof numgen random mod 2 : ip
   * daddr . tcp dport`): one expression per data field. Verdict maps need none.
   */
  dataTypeof?: readonly TypeofExpr[];
}

/**
 * One element. In an interval set a key field may also be a CIDR ("10.0.0.0/8") or a range
 * ("10.0.0.1-10.0.0.9", "1000-2000", or a [from, to] pair); in a plain set it is one value.
 */
export type KeyField = FieldValue | readonly [FieldValue, FieldValue];

export interface NftElement {
  kind: 'element';
  set: string;
  key: readonly KeyField[];
  /** Map data: field values, or a verdict for a verdict map. */
  value?: readonly FieldValue[] | Verdict;
  timeoutMs?: number;
  comment?: string;
}

export interface NftRule {
  kind: 'rule';
  chain: string;
  exprs: readonly NftExpr[];
  /** nft syntax of the rule body (without "add rule ... chain"), from the rule builder; used by toString(). */
  text?: string;
  comment?: string;
  /** Kernel handle: required by replace, used by delete; for add/insert see `position`. */
  handle?: bigint;
  /** add: place after the rule with this handle; insert: before it. */
  position?: bigint;
  /**
   * NFTA_RULE_COMPAT, which iptables-nft sends with every rule: the `-p` protocol number (0 for
   * none) and NFT_RULE_COMPAT_F_* flags (INV 0x2 for `! -p`); xt matches such as `tcp` check it.
   */
  compat?: { proto: number; flags: number };
}

export type NftObject = NftTable | NftChain | NftSet | NftMap | NftElement | NftRule;
export type NftSetLike = NftSet | NftMap;

/** The nf_tables family of an IP family's tables: `ip` for IPv4, `ip6` for IPv6. */
export function nftFamilyOf(family: IPFamily): 'ip' | 'ip6' {
  return family === 'IPv4' ? 'ip' : 'ip6';
}
