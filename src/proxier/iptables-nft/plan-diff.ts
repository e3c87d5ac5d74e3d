// An owned chain brought to its wanted rules one rule at a time, by handle, instead of flushed
// and refilled: the rules it already holds in the wanted order (the longest common run of
// keys) stay with their handles and counters, the others are deleted by handle, and missing
// ones are inserted right before the next rule that stays (or appended). For short chains
// whose content changes a rule or two at a time (IPVS mode's companion rules): a change sends
// only those rules, and a rule's counters survive syncs that do not change it.

import type { Plan } from './groups.ts';
import type { ListedEntry } from './kernel-state.ts';
import type { Encoded } from './plan-common.ts';
import { deleteRule, refill } from './plan-common.ts';
import type { ChainRef } from './units.ts';

/** Beyond this many key comparisons the chain is refilled instead (the table is quadratic). */
const MAX_CELLS = 1 << 20;

/** Plans `have` into `want` as one group (nothing when they are equal). */
export function diffOwned(plan: Plan, c: ChainRef, want: readonly Encoded[], have: readonly ListedEntry[]): void {
  if (want.length * have.length > MAX_CELLS) {
    refill(plan, c, want, have.length > 0);
    return;
  }
  const kept = commonRun(
    have.map((e) => e.key),
    want.map((r) => r.key),
  );
  if (kept.size === have.length && kept.size === want.length) return;
  plan.group();
  const keptHave = new Set(kept.values());
  have.forEach((e, i) => {
    if (!keptHave.has(i)) deleteRule(plan, c.table, c.name, e.handle);
  });
  // The handle of the next kept rule after each wanted position (undefined: none, append).
  let next: bigint | undefined;
  const before: (bigint | undefined)[] = new Array<bigint | undefined>(want.length);
  for (let j = want.length - 1; j >= 0; j--) {
    const h = kept.get(j);
    if (h !== undefined) next = have[h]!.handle;
    before[j] = next;
  }
  want.forEach((r, j) => {
    if (kept.has(j)) return;
    const at = before[j];
    if (at === undefined) plan.rule(c.table, 'add', r.nft);
    else plan.rule(c.table, 'insert', { ...r.nft, position: at });
  });
}

/**
 * The longest common subsequence of two key lists: wanted index → listed index. An undefined
 * listed key (a rule in a form we never write) matches nothing.
 */
export function commonRun(have: readonly (string | undefined)[], want: readonly string[]): Map<number, number> {
  const n = have.length;
  const m = want.length;
  // len[i][j]: the longest common run of have[i..] and want[j..], row-major in one array.
  const len = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number): number => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      len[at(i, j)] =
        have[i] !== undefined && have[i] === want[j]
          ? len[at(i + 1, j + 1)]! + 1
          : Math.max(len[at(i + 1, j)]!, len[at(i, j + 1)]!);
  const out = new Map<number, number>();
  for (let i = 0, j = 0; i < n && j < m;) {
    if (have[i] !== undefined && have[i] === want[j]) {
      out.set(j, i);
      i++;
      j++;
    } else if (len[at(i + 1, j)]! >= len[at(i, j + 1)]!) i++;
    else j++;
  }
  return out;
}
