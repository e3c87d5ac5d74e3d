// Event-driven drift repair: the kernel announces every nf_tables change (NFNLGRP_NFTABLES,
// as `nft monitor` shows), so a change to our table that we did not make (`nft delete table`,
// `nft flush ruleset`, a flushed map, a hand-added rule) asks for a repair sync at once,
// instead of waiting for the periodic full sync.
//
// Ours are told apart by the port id in each announcement: the sockets our proxiers commit
// through. Lost announcements (a full receive buffer, usually during a large sync of our
// own) count as drift unless our own sync is the likely cause: then that sync and the
// periodic one cover it.

import type { Logger } from '../../base/logger.ts';
import type { MulticastListener } from '../../netlink/core/index.ts';
import { monitorNftables } from '../../netlink/nftables/index.ts';
import type { NftChange, NftMonitorHandlers } from '../../netlink/nftables/index.ts';
import { isAffinitySet, TABLE } from './names.ts';

export interface DriftWatchOptions {
  /** The nf_tables families we program ('ip', 'ip6'). */
  readonly families: readonly string[];
  /** Port ids of the sockets our own transactions go through. */
  readonly ownPorts: ReadonlySet<number>;
  /** Asks for a full repair sync (coalesced by the caller). */
  readonly onDrift: (why: string) => void;
  /** True while a sync of ours runs. */
  readonly syncing: () => boolean;
  readonly logger: Logger;
  /** Monotonic milliseconds. */
  readonly now?: () => number;
  /** The announcement source; default a socket of its own in this namespace. */
  readonly monitor?: (h: NftMonitorHandlers) => MulticastListener;
}

/** Announcements lost this soon after one of our own are put down to our own burst. */
const OWN_BURST_MS = 2_000;
/** One log line per burst of foreign changes. */
const LOG_EVERY_MS = 1_000;

export class NftDriftWatch {
  private readonly opts: DriftWatchOptions;
  private readonly now: () => number;
  private readonly listener: MulticastListener;
  private lastOwnAt = -Infinity;
  private lastLogAt = -Infinity;
  /** Foreign changes seen, for tests and logs. */
  drifts = 0;

  constructor(opts: DriftWatchOptions) {
    this.opts = opts;
    this.now = opts.now ?? (() => performance.now());
    const open = opts.monitor ?? ((h: NftMonitorHandlers) => monitorNftables(h));
    this.listener = open({
      skip: (port) => this.isOwn(port),
      onChange: (c) => this.onChange(c),
      onOverflow: () => this.onOverflow(),
      onError: (e) => opts.logger.warn('nf_tables notification not understood; ignored', { err: e }),
    });
  }

  /** Whether a change is one of ours to repair: our table, a family we program, not made by us. */
  static isForeignChangeToUs(c: NftChange, families: readonly string[], ownPorts: ReadonlySet<number>): boolean {
    if (c.kind === 'generation' || c.table !== TABLE || c.family === undefined || !families.includes(c.family))
      return false;
    if (ownPorts.has(c.portId)) return false;
    // Affinity sets are filled by packets and empty themselves as entries time out.
    return !(c.kind === 'element' && c.object !== undefined && isAffinitySet(c.object));
  }

  /** Whether a change came through one of our sockets (remembered: a burst of ours explains lost announcements). */
  private isOwn(port: number): boolean {
    if (port === 0 || !this.opts.ownPorts.has(port)) return false;
    this.lastOwnAt = this.now();
    return true;
  }

  private onChange(c: NftChange): void {
    if (this.isOwn(c.portId)) return;
    if (!NftDriftWatch.isForeignChangeToUs(c, this.opts.families, this.opts.ownPorts)) return;
    this.drifts++;
    const why = `${c.added ? 'added' : 'removed'} ${c.kind} ${c.family} ${c.table}${c.object ? ` ${c.object}` : ''} (port ${c.portId})`;
    this.report(why);
  }

  private onOverflow(): void {
    const now = this.now();
    if (this.opts.syncing() || now - this.lastOwnAt < OWN_BURST_MS) {
      this.opts.logger.debug('nf_tables notifications lost during our own sync; the sync covers them');
      return;
    }
    this.report('nf_tables notifications were lost (receive buffer full)');
  }

  private report(why: string): void {
    const now = this.now();
    if (now - this.lastLogAt >= LOG_EVERY_MS) {
      this.lastLogAt = now;
      this.opts.logger.warn('our nftables objects were changed by someone else; repairing now', { change: why });
    }
    this.opts.onDrift(why);
  }

  close(): void {
    this.listener.close();
  }
}
