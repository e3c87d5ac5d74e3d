// Event-driven drift repair: the kernel announces every nf_tables change (NFNLGRP_NFTABLES,
// as `nft monitor` shows), so a change to our table that we did not make (`nft delete table`,
// `nft flush ruleset`, a flushed map, a hand-added rule) asks for a repair sync at once,
// instead of waiting for the periodic full sync.
//
// Ours are told apart by the port id in each announcement: the sockets our proxiers commit
// through. Lost announcements (a full receive buffer, usually during a large sync of our
// own) count as drift unless our own sync is the likely cause (../drift/gate.ts).

import { monitorNftables } from '../../netlink/nftables/index.ts';
import type { NftChange, NftMonitorHandlers } from '../../netlink/nftables/index.ts';
import { DriftGate } from '../drift/gate.ts';
import type { DriftWatchOptionsOf } from '../drift/gate.ts';
import { PausableListener } from '../drift/pausable.ts';
import { isAffinitySet, TABLE } from './names.ts';

export interface DriftWatchOptions extends DriftWatchOptionsOf<NftMonitorHandlers> {
  /** The nf_tables families we program ('ip', 'ip6'). */
  readonly families: readonly string[];
}

export class NftDriftWatch {
  private readonly opts: DriftWatchOptions;
  private readonly gate: DriftGate;
  private readonly listening: PausableListener;
  /** Foreign changes seen, for tests and logs. */
  drifts = 0;

  constructor(opts: DriftWatchOptions) {
    this.opts = opts;
    this.gate = new DriftGate({
      ...opts,
      warning: 'our nftables objects were changed by someone else; repairing now',
      source: 'nf_tables',
    });
    const open = opts.monitor ?? ((h: NftMonitorHandlers) => monitorNftables(h));
    const handlers: NftMonitorHandlers = {
      skip: (port) => this.gate.isOwn(port),
      onChange: (c) => this.onChange(c),
      onOverflow: () => this.onOverflow(),
      onError: (e) => opts.logger.warn('nf_tables notification not understood; ignored', { err: e }),
    };
    this.listening = new PausableListener(() => open(handlers), opts.logger);
  }

  /** Stops listening while one of our full syncs runs (pausable.ts); counted. */
  pause(): void {
    this.listening.pause();
  }

  resume(): void {
    this.listening.resume();
  }

  /** Whether a change is one of ours to repair: our table, a family we program, not made by us. */
  static isForeignChangeToUs(c: NftChange, families: readonly string[], ownPorts: ReadonlySet<number>): boolean {
    if (c.kind === 'generation' || c.table !== TABLE || c.family === undefined || !families.includes(c.family))
      return false;
    if (ownPorts.has(c.portId)) return false;
    // Affinity sets are filled by packets and empty themselves as entries time out.
    return !(c.kind === 'element' && c.object !== undefined && isAffinitySet(c.object));
  }

  private onChange(c: NftChange): void {
    if (this.gate.isOwn(c.portId)) return;
    if (!NftDriftWatch.isForeignChangeToUs(c, this.opts.families, this.opts.ownPorts)) return;
    this.drifts++;
    const why = `${c.added ? 'added' : 'removed'} ${c.kind} ${c.family} ${c.table}${c.object ? ` ${c.object}` : ''} (port ${c.portId})`;
    this.gate.report(why);
  }

  private onOverflow(): void {
    if (!this.gate.lossIsOurs()) this.gate.report('nf_tables notifications were lost (receive buffer full)');
  }

  close(): void {
    this.listening.close();
  }
}
