// What the writer programs, in the shape it needs: the ruleset as owners ("units") of chains
// and rules. A service port is a unit: it owns its KUBE-SVC/SVL/EXT/FW/SEP chains whole and
// adds single rules to the long shared chains (nat KUBE-SERVICES, KUBE-NODEPORTS, filter
// KUBE-SERVICES, ...). The skeleton is the unit of everything else: the fixed chains, the
// shared chains themselves (its own rules in them stay last, e.g. the jump to KUBE-NODEPORTS
// that must end nat KUBE-SERVICES) and the jump rules in the built-in chains.
//
// The writer diffs a unit as a whole: owned chains by content, shared rules one by one.

import type { BuiltinChain, IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';

export interface ChainRef {
  readonly table: IptTable;
  readonly name: string;
}

/** One owner's part of the ruleset. */
export interface Unit {
  /** Chains the unit owns whole: created with it, holding exactly its rules, deleted when it goes. */
  readonly chains: readonly ChainRef[];
  /** In order: the content of its chains, and its rules in shared (or, for the skeleton, built-in) chains. */
  readonly rules: readonly IptRule[];
}

export interface Skeleton extends Unit {
  /** Chains every unit adds single rules to; the skeleton creates them, its rules in them stay last. */
  readonly shared: readonly ChainRef[];
}

/** A service port's unit, made only when needed. */
export interface UnitSource {
  readonly id: string;
  unit(): Unit;
  /**
   * Made from the same inputs (the same model objects, the same context) as the unit the last
   * trusted sync committed: when the kernel still holds all of it, it is kept without being made.
   */
  readonly unchanged: boolean;
}

export interface DesiredRuleset {
  readonly skeleton: Skeleton;
  /** Per service port; iterated once, so each unit is made as it is written. */
  readonly units: Iterable<UnitSource>;
}

export const BUILTIN_CHAINS: ReadonlySet<string> = new Set<BuiltinChain>([
  'PREROUTING',
  'INPUT',
  'FORWARD',
  'OUTPUT',
  'POSTROUTING',
]);

export const TABLES: readonly IptTable[] = ['nat', 'filter', 'mangle'];

export const chainId = (table: IptTable, name: string): string => `${table}/${name}`;

/**
 * Owned chains in an order where every chain comes after the chains it jumps to (leaves first),
 * so that when they are filled one batch after another no packet meets an empty target.
 */
export function leavesFirst(
  chains: readonly ChainRef[],
  rulesOf: (c: ChainRef) => readonly { readonly rule: IptRule }[],
): ChainRef[] {
  // By name, then table: no "table/name" string per lookup (a full sync orders 100,000 chains).
  const byName = new Map<string, ChainRef[]>();
  const canonical = (table: IptTable, name: string): ChainRef | undefined =>
    byName.get(name)?.find((x) => x.table === table);
  for (const c of chains) {
    const l = byName.get(c.name);
    if (!l) byName.set(c.name, [c]);
    else if (!l.some((x) => x.table === c.table)) l.push(c); // a chain listed twice is one chain
  }
  const done = new Set<ChainRef>();
  const out: ChainRef[] = [];
  const visit = (c: ChainRef, depth: number): void => {
    if (done.has(c) || depth > 64) return;
    done.add(c);
    for (const { rule: r } of rulesOf(c)) {
      if (r.target.t !== 'jump') continue;
      const t = canonical(c.table, r.target.chain);
      if (t) visit(t, depth + 1);
    }
    out.push(c);
  };
  for (const c of chains) visit(canonical(c.table, c.name)!, 0);
  return out;
}
