// What every drift watch shares (the nftables mode's, the iptables-nft chain watch of the
// iptables and IPVS modes, the IPVS mode's kube-ipvs0 watch): telling our own changes from
// everyone else's by the port id the kernel puts in each announcement, judging lost
// announcements, and asking for a repair with one log line per burst.
//
// Lost announcements (a full receive buffer) count as drift of everything, unless our own
// sync is the likely cause: then that sync and the periodic ones cover it.

import type { Logger } from '../../base/logger.ts';
import type { MulticastListener } from '../../netlink/core/index.ts';

/** Announcements lost this soon after one of our own are put down to our own burst. */
export const OWN_BURST_MS = 2_000;
/** One log line per burst of foreign changes. */
export const LOG_EVERY_MS = 1_000;

/** What every drift watch is given: whose changes are ours, whom to ask for a repair. */
export interface DriftWatchBase {
  /** Port ids of the sockets our own changes go through. */
  readonly ownPorts: ReadonlySet<number>;
  /** Asks for a repair sync (coalesced by the caller). */
  readonly onDrift: (why: string) => void;
  /** True while a sync of ours runs. */
  readonly syncing: () => boolean;
  readonly logger: Logger;
  /** Monotonic milliseconds. */
  readonly now?: () => number;
}

/** A watch's options: the base, and its announcement source (default: a socket of its own in this namespace). */
export interface DriftWatchOptionsOf<H> extends DriftWatchBase {
  readonly monitor?: (h: H) => MulticastListener;
}

export interface DriftGateOptions extends DriftWatchBase {
  /** The warning logged once per burst: "our nftables objects were changed by someone else; repairing now". */
  readonly warning: string;
  /** Whose announcements were lost, for the debug line: "nf_tables", "rtnetlink". */
  readonly source: string;
}

export class DriftGate {
  private readonly o: DriftGateOptions;
  private readonly now: () => number;
  private lastOwnAt = -Infinity;
  private lastLogAt = -Infinity;

  constructor(o: DriftGateOptions) {
    this.o = o;
    this.now = o.now ?? (() => performance.now());
  }

  /** Whether a change came through one of our sockets (remembered: a burst of ours explains lost announcements). */
  isOwn(port: number): boolean {
    if (port === 0 || !this.o.ownPorts.has(port)) return false;
    this.lastOwnAt = this.now();
    return true;
  }

  /** Whether lost announcements are put down to our own sync (logged), rather than counted as drift. */
  lossIsOurs(): boolean {
    if (!this.o.syncing() && this.now() - this.lastOwnAt >= OWN_BURST_MS) return false;
    this.o.logger.debug(`${this.o.source} notifications lost during our own sync; the sync covers them`);
    return true;
  }

  /** Asks for a repair sync; logs once per burst. */
  report(why: string): void {
    const now = this.now();
    if (now - this.lastLogAt >= LOG_EVERY_MS) {
      this.lastLogAt = now;
      this.o.logger.warn(this.o.warning, { change: why });
    }
    this.o.onDrift(why);
  }
}
