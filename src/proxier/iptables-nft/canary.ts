// Canary chains (an empty chain of ours in each table, created by the mode's skeleton): when
// one disappears, someone flushed or reloaded the tables (`iptables -t nat -F` then `-X`, a
// firewalld reload) and the rules must be written again in full. Checked with one GETCHAIN
// per table (not a dump: cheap however many chains the table holds). Upstream keeps its
// Monitor beside its iptables utility in the same way.

import type { Clock, TimerHandle } from '../../base/clock.ts';
import type { Logger } from '../../base/logger.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { MirrorTrust } from './trust.ts';

export interface CanaryProbe {
  getChain(name: string): Promise<unknown>;
}

/** True while every table's canary chain exists. */
export async function canaryPresent(clients: ReadonlyMap<IptTable, CanaryProbe>, chain: string): Promise<boolean> {
  for (const client of clients.values()) if ((await client.getChain(chain)) === undefined) return false;
  return true;
}

export interface CanaryOptions {
  /** The canary chain's name (the same in every table). */
  readonly chain: string;
  readonly probe: ReadonlyMap<IptTable, CanaryProbe>;
  readonly clock: Clock;
  /** How often the canary chains are checked. */
  readonly intervalMs: number;
}

/** Checks the canary chains every interval while the mirror is trusted; one check at a time. */
export class Canary {
  private readonly o: CanaryOptions;
  private readonly trust: MirrorTrust;
  private readonly log: Logger;
  private timer: TimerHandle | undefined;
  private polling = false;
  private onGone: (() => void) | undefined;

  constructor(o: CanaryOptions, trust: MirrorTrust, log: Logger) {
    this.o = o;
    this.trust = trust;
    this.log = log;
  }

  /** Asks for a full resync through `kick` when a canary disappears. */
  watch(kick: () => void): void {
    this.onGone = kick;
  }

  /** At the start of a sync: true (and the mirror lost) when a canary went missing while trusted. */
  async checkGone(): Promise<boolean> {
    if (!this.trust.trusted || (await canaryPresent(this.o.probe, this.o.chain))) return false;
    this.trust.lost();
    return true;
  }

  start(): void {
    if (this.timer) return;
    const tick = (): void => {
      this.timer = this.o.clock.setTimer(this.o.intervalMs, tick);
      if (this.polling || this.trust.fullDue) return;
      this.polling = true;
      canaryPresent(this.o.probe, this.o.chain)
        .then((ok) => {
          if (ok || this.trust.fullDue) return;
          this.log.info('Canary chain gone (someone flushed our tables); asking for a full resync');
          this.trust.lost();
          this.onGone?.();
        })
        .catch((e: unknown) => this.log.warn('Canary check failed', { err: e }))
        .finally(() => (this.polling = false));
    };
    this.timer = this.o.clock.setTimer(this.o.intervalMs, tick);
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }
}
