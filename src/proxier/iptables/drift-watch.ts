// Which of our chains someone else changed: the kernel announces every nf_tables change
// (NFNLGRP_NFTABLES, as `nft monitor` shows), naming the table and chain of each rule added or
// removed and the port id of the socket that made it. A rule of ours removed or added by
// someone else (`iptables -t nat -F`, `-F KUBE-SVC-…`, `-D KUBE-SEP-… 1`) marks its chain, and
// a repair sync is asked for at once; that full sync refills the marked chains. Listing every
// chain of ours to compare it instead costs seconds per full sync (1,000 Services, 11,000
// chains: 4.4 s), where this costs nothing while nobody touches our chains.
//
// Upstream's canary chains (canary.ts) only notice a deleted chain; `iptables -t nat -F` leaves
// them. Changes in the built-in chains are not watched: others change them all the time
// (Docker, CNI plugins), and every full sync reads them anyway. Lost announcements (a full
// receive buffer) count as drift of everything, unless our own sync is the likely cause: then
// that sync and the periodic ones cover it, as in the nftables mode (nftables/drift-watch.ts).

import type { Logger } from '../../base/logger.ts';
import type { MulticastListener } from '../../netlink/core/index.ts';
import { monitorNftables } from '../../netlink/nftables/index.ts';
import type { NftChange, NftMonitorHandlers } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';

const TABLES: ReadonlySet<string> = new Set(['nat', 'filter', 'mangle']);
/** Announcements lost this soon after one of our own are put down to our own burst. */
const OWN_BURST_MS = 2_000;
const LOG_EVERY_MS = 1_000;

/** What the watch tells a proxier (IptablesProxier.drifted). */
export interface DriftTarget {
  /**
   * `chain` of `table` was changed by someone else, or (both undefined) anything may have
   * been. Returns whether it concerns the proxier (a chain of ours, after a first sync).
   */
  drifted(table?: IptTable, chain?: string, what?: 'rule' | 'chain'): boolean;
}

export interface IptDriftWatchOptions {
  /** By nf_tables family ('ip', 'ip6'). */
  readonly targets: ReadonlyMap<string, DriftTarget>;
  /** Port ids of the sockets our own transactions go through. */
  readonly ownPorts: ReadonlySet<number>;
  /** Asks for a repair sync (coalesced by the caller). */
  readonly onDrift: (why: string) => void;
  /** True while a sync of ours runs. */
  readonly syncing: () => boolean;
  readonly logger: Logger;
  readonly now?: () => number;
  /** The announcement source; default a socket of its own in this namespace. */
  readonly monitor?: (h: NftMonitorHandlers) => MulticastListener;
}

export class IptDriftWatch {
  private readonly o: IptDriftWatchOptions;
  private readonly now: () => number;
  private listener: MulticastListener | undefined;
  private paused = 0;
  private closed = false;
  private lastOwnAt = -Infinity;
  private lastLogAt = -Infinity;

  constructor(o: IptDriftWatchOptions) {
    this.o = o;
    this.now = o.now ?? (() => performance.now());
    this.listener = this.open();
  }

  private open(): MulticastListener {
    const open = this.o.monitor ?? ((h: NftMonitorHandlers) => monitorNftables(h));
    return open({
      skip: (port) => this.isOwn(port),
      onChange: (c) => this.onChange(c),
      onOverflow: () => this.onOverflow(),
      onError: (e) => this.o.logger.warn('nf_tables notification not understood; ignored', { err: e }),
    });
  }

  /**
   * Stops listening while one of our full syncs runs: it announces every rule it writes (a
   * cold start at 1,000 Services overflows any receive buffer, and the kernel builds every
   * announcement only while someone listens). A change by someone else meanwhile goes unseen,
   * as announcements lost during our own sync would. Counted: resume() after as many calls.
   */
  pause(): void {
    if (this.paused++ > 0) return;
    this.listener?.close();
    this.listener = undefined;
  }

  resume(): void {
    if (this.paused === 0 || --this.paused > 0 || this.closed) return;
    try {
      this.listener = this.open();
    } catch (err) {
      this.o.logger.warn('Cannot listen to nf_tables changes again; drift is repaired by the periodic sync only', {
        err,
      });
    }
  }

  private isOwn(port: number): boolean {
    if (port === 0 || !this.o.ownPorts.has(port)) return false;
    this.lastOwnAt = this.now();
    return true;
  }

  private onChange(c: NftChange): void {
    if (this.isOwn(c.portId) || c.family === undefined || c.table === undefined || !TABLES.has(c.table)) return;
    const target = this.o.targets.get(c.family);
    if (!target) return;
    const table = c.table as IptTable;
    let hit = false;
    if (c.kind === 'rule' && c.object !== undefined) hit = target.drifted(table, c.object, 'rule');
    else if (c.kind === 'chain' && c.object !== undefined && !c.added) hit = target.drifted(table, c.object, 'chain');
    else if (c.kind === 'table' && !c.added) hit = target.drifted();
    if (hit) this.report(`${c.added ? 'added' : 'removed'} ${c.kind} ${c.family} ${c.table} ${c.object ?? ''}`);
  }

  private onOverflow(): void {
    if (this.o.syncing() || this.now() - this.lastOwnAt < OWN_BURST_MS) {
      this.o.logger.debug('nf_tables notifications lost during our own sync; the sync covers them');
      return;
    }
    let hit = false;
    for (const t of this.o.targets.values()) hit = t.drifted() || hit;
    if (hit) this.report('nf_tables notifications were lost (receive buffer full)');
  }

  private report(why: string): void {
    const now = this.now();
    if (now - this.lastLogAt >= LOG_EVERY_MS) {
      this.lastLogAt = now;
      this.o.logger.warn('our iptables chains were changed by someone else; repairing now', { change: why });
    }
    this.o.onDrift(why);
  }

  close(): void {
    this.closed = true;
    this.listener?.close();
    this.listener = undefined;
  }
}
