// Which of our iptables-nft chains someone else changed: the kernel announces every nf_tables
// change (NFNLGRP_NFTABLES, as `nft monitor` shows), naming the table and chain of each rule
// added or removed and the port id of the socket that made it. A rule of ours removed or added
// by someone else (`iptables -t nat -F`, `-F KUBE-SVC-…`, `-D KUBE-SEP-… 1`) marks its chain,
// and a repair sync is asked for at once; that full sync refills the marked chains. Listing
// every chain of ours to compare it instead costs seconds per full sync (1,000 Services,
// 11,000 chains: 4.4 s), where this costs nothing while nobody touches our chains. Used by the
// iptables mode (its chains) and the IPVS mode (its companion chains).
//
// Upstream's canary chains (iptables-nft/canary.ts) only notice a deleted chain; `iptables -t nat
// -F` leaves them. Of the built-in chains only the removal of a rule jumping to one of ours
// counts (the announcement carries the rule): others change them all the time (Docker, CNI
// plugins). Lost announcements count as drift of everything unless our own sync explains
// them (gate.ts).

import type { MulticastListener } from '../../netlink/core/index.ts';
import { monitorNftables } from '../../netlink/nftables/index.ts';
import type { NftChange, NftMonitorHandlers } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { DriftGate } from './gate.ts';
import { PausableListener } from './pausable.ts';
import type { DriftWatchOptionsOf } from './gate.ts';

const TABLES: ReadonlySet<string> = new Set(['nat', 'filter', 'mangle']);

/** What the watch tells a proxier (IptablesProxier.drifted, the IPVS companion chains). */
export interface DriftTarget {
  /**
   * `chain` of `table` was changed by someone else, or (both undefined) anything may have
   * been; `jump`: the chain a removed rule jumped to. Returns whether it concerns the proxier
   * (a chain of ours, or our jump removed from a built-in chain, after a first sync).
   */
  drifted(table?: IptTable, chain?: string, what?: 'rule' | 'chain', jump?: string): boolean;
}

export interface ChainDriftWatchOptions extends DriftWatchOptionsOf<NftMonitorHandlers> {
  /** By nf_tables family ('ip', 'ip6'). */
  readonly targets: ReadonlyMap<string, DriftTarget>;
}

export class ChainDriftWatch {
  private readonly o: ChainDriftWatchOptions;
  private readonly gate: DriftGate;
  private readonly listening: PausableListener;

  constructor(o: ChainDriftWatchOptions) {
    this.o = o;
    this.gate = new DriftGate({
      ...o,
      warning: 'our iptables chains were changed by someone else; repairing now',
      source: 'nf_tables',
    });
    this.listening = new PausableListener(() => this.open(), o.logger);
  }

  private open(): MulticastListener {
    const open = this.o.monitor ?? ((h: NftMonitorHandlers) => monitorNftables(h));
    return open({
      skip: (port) => this.gate.isOwn(port),
      onChange: (c) => this.onChange(c),
      onOverflow: () => this.onOverflow(),
      onError: (e) => this.o.logger.warn('nf_tables notification not understood; ignored', { err: e }),
    });
  }

  /** Stops listening while one of our full syncs runs (pausable.ts); counted. */
  pause(): void {
    this.listening.pause();
  }

  resume(): void {
    this.listening.resume();
  }

  private onChange(c: NftChange): void {
    if (this.gate.isOwn(c.portId) || c.family === undefined || c.table === undefined || !TABLES.has(c.table)) return;
    const target = this.o.targets.get(c.family);
    if (!target) return;
    const table = c.table as IptTable;
    let hit = false;
    if (c.kind === 'rule' && c.object !== undefined) hit = target.drifted(table, c.object, 'rule', c.jump);
    else if (c.kind === 'chain' && c.object !== undefined && !c.added) hit = target.drifted(table, c.object, 'chain');
    else if (c.kind === 'table' && !c.added) hit = target.drifted();
    if (hit)
      this.gate.report(
        `${c.added ? 'added' : 'removed'} ${c.kind} ${c.family} ${c.table} ${c.object ?? ''}${c.jump ? ` (-j ${c.jump})` : ''}`,
      );
  }

  private onOverflow(): void {
    if (this.gate.lossIsOurs()) return;
    let hit = false;
    for (const t of this.o.targets.values()) hit = t.drifted() || hit;
    if (hit) this.gate.report('nf_tables notifications were lost (receive buffer full)');
  }

  close(): void {
    this.listening.close();
  }
}
