// The numbers behind upstream's iptables-mode metrics, kept beside the sync:
// - kubeproxy_sync_proxy_rules_iptables_total{table}: the rules in our chains after a sync
//   (upstream: the rules it restored plus those of the unchanged service ports it skipped),
//   counted per owner (the skeleton, each service port) from the rules made for it;
// - kubeproxy_sync_proxy_rules_iptables_last{table}: the rules the last sync wrote. Upstream
//   restores every rule of a full sync; this mode writes only the difference, so the number is
//   what actually went to the kernel (rules added or re-added);
// - restore and partial-restore failures: a sync that failed, with whether the kernel refused
//   one of its transactions (the failed iptables-restore) and whether it was a partial sync.
//
// As upstream's, the counts leave out the jumps in the built-in chains (upstream writes those
// outside iptables-restore) and tables without rules of ours (mangle holds only the canary).

import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { IptablesSyncCounts } from '../types.ts';
import type { Op } from '../iptables-nft/groups.ts';
import { BUILTIN_CHAINS } from '../iptables-nft/units.ts';
import type { Unit } from '../iptables-nft/units.ts';
import type { BatchSender } from '../iptables-nft/writer-types.ts';

/** The tables upstream reports, always present in the counts (0 when empty). */
const REPORTED: readonly IptTable[] = ['filter', 'nat'];

type Counts = Partial<Record<IptTable, number>>;

function countRules(rules: readonly IptRule[]): Counts {
  const out: Counts = {};
  for (const r of rules) if (!BUILTIN_CHAINS.has(r.chain)) out[r.table] = (out[r.table] ?? 0) + 1;
  return out;
}

function addInto(into: Record<string, number>, c: Counts, sign = 1): void {
  for (const [t, n] of Object.entries(c)) into[t] = (into[t] ?? 0) + sign * n;
}

function zeroes(): Record<string, number> {
  return Object.fromEntries(REPORTED.map((t) => [t, 0]));
}

export class SyncTally {
  private skeletonCounts: Counts = {};
  /** Per service port: its rules by table, as last made. */
  private units = new Map<string, Counts>();
  /**
   * The sum of `units`, kept as they change: a partial sync touches a few service ports and
   * must not walk all of them (10,000 at a time) to report the totals.
   */
  private unitTotal: Record<string, number> = {};
  private next: Map<string, Counts> | undefined;
  private written: Record<string, number> = zeroes();
  private failedCommit = false;

  /** Starts a sync; `full`: the service ports not seen again by keep()/unit() are gone. */
  begin(full: boolean): void {
    this.written = zeroes();
    this.failedCommit = false;
    this.next = full ? new Map() : undefined;
  }

  skeleton<U extends Unit>(unit: U): U {
    this.skeletonCounts = countRules(unit.rules);
    return unit;
  }

  /** A service port's unit as made for this sync (returned, to wrap the maker). */
  unit(id: string, unit: Unit): Unit {
    const c = countRules(unit.rules);
    if (this.next) {
      this.next.set(id, c);
      return unit;
    }
    this.drop(id);
    this.units.set(id, c);
    addInto(this.unitTotal, c);
    return unit;
  }

  /** A full sync keeps a service port without making it again: its last counts stand. */
  keep(id: string): void {
    const had = this.units.get(id);
    if (this.next && had && !this.next.has(id)) this.next.set(id, had);
  }

  /** A service port removed by a partial sync. */
  drop(id: string): undefined {
    const had = this.units.get(id);
    if (had) addInto(this.unitTotal, had, -1);
    this.units.delete(id);
    return undefined;
  }

  /** The operations of a plan about to be sent: its new rules count as written. */
  plan(groups: readonly (readonly Op[])[]): void {
    for (const g of groups) {
      for (const op of g) {
        if (op.obj.kind !== 'rule' || (op.verb !== 'add' && op.verb !== 'insert')) continue;
        if (BUILTIN_CHAINS.has(op.obj.chain)) continue;
        this.written[op.table] = (this.written[op.table] ?? 0) + 1;
      }
    }
  }

  /** The sender, noting whether the kernel refused a transaction. */
  watch(sender: BatchSender): BatchSender {
    return {
      runMessages: async (msgs, signal, opts) => {
        try {
          return await sender.runMessages(msgs, signal, opts);
        } catch (e) {
          if (!signal?.aborted) this.failedCommit = true;
          throw e;
        }
      },
    };
  }

  get commitFailed(): boolean {
    return this.failedCommit;
  }

  /** The sync succeeded: its counts. */
  commit(): IptablesSyncCounts {
    if (this.next) {
      this.units = this.next;
      this.unitTotal = {};
      for (const c of this.units.values()) addInto(this.unitTotal, c);
    }
    this.next = undefined;
    const total = zeroes();
    addInto(total, this.skeletonCounts);
    addInto(total, this.unitTotal);
    for (const t of Object.keys(total)) if (!REPORTED.includes(t as IptTable) && total[t] === 0) delete total[t];
    return { total, written: { ...this.written } };
  }

  /** The sync failed: the next one is full and recounts every unit it makes or keeps. */
  fail(): void {
    this.next = undefined;
  }
}
