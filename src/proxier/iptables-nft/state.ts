// What the last successful sync committed, per owner: the chains it owns with a digest of
// their content, and its rules in shared chains with their kernel handles. A partial sync
// diffs a changed service port against this instead of reading the kernel, and deletes
// single rules of the long shared chains by handle.

import { hash } from 'node:crypto';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { ChainRef } from './units.ts';

export interface SharedEntry {
  readonly table: IptTable;
  readonly chain: string;
  readonly key: string;
  /** Learned from the kernel's echo when the rule is added; undefined only until then. */
  handle: bigint | undefined;
}

/** chainId → digest of a chain's content (a Map, or lazyDigests). */
export interface ChainDigests {
  get(chainId: string): string | undefined;
}

/**
 * Digests made the first time one is asked for. A full sync commits thousands of service ports
 * and a later sync compares the digests of a few: `make` regenerates them from the inputs the
 * unit was made from (the generator is pure) rather than every port paying for them up front.
 */
export function lazyDigests(make: () => ReadonlyMap<string, string>): ChainDigests {
  let made: ReadonlyMap<string, string> | undefined;
  return { get: (id) => (made ??= make()).get(id) };
}

export interface UnitState {
  readonly chains: readonly ChainRef[];
  /** chainId → digest of its rules, in order (skeleton: of their keys; service ports: of the rules as data). */
  readonly content: ChainDigests;
  /** Its rules in shared chains (the skeleton: its tail rules and its jumps in built-in chains). */
  readonly shared: readonly SharedEntry[];
}

export interface WriterState {
  readonly skeleton: UnitState;
  readonly units: Map<string, UnitState>;
}

export function contentDigest(keys: readonly (string | undefined)[]): string {
  if (keys.some((k) => k === undefined)) return '!';
  return hash('sha1', keys.join(' '), 'base64url');
}

/** The handle of the first skeleton rule in a shared chain (new unit rules go right above it). */
export function tailHandle(state: WriterState, table: IptTable, chain: string): bigint | undefined {
  return state.skeleton.shared.find((e) => e.table === table && e.chain === chain)?.handle;
}
