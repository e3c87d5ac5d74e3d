// Links and addresses someone else removed: the kernel announces every link and address
// change on rtnetlink's RTNLGRP_LINK / RTNLGRP_*_IFADDR groups (netlink/route/monitor.ts), with
// the port id of the socket that asked for it. A removal the target calls ours (the IPVS mode:
// kube-ipvs0, or a VIP still wanted on it; ipvs/drift.ts) asks for a repair sync at once.
// Lost announcements count as drift unless our own sync explains them (gate.ts).

import type { MulticastListener } from '../../netlink/core/index.ts';
import { monitorRoute } from '../../netlink/route/index.ts';
import type { RouteChange, RouteMonitorHandlers } from '../../netlink/route/index.ts';
import { DriftGate } from './gate.ts';
import type { DriftWatchOptionsOf } from './gate.ts';

/** What the watch asks a proxier. */
export interface LinkDriftTarget {
  /**
   * Whether `c` (made by someone else) undid something of ours: a short description of it,
   * else undefined. Without `c` (announcements lost): anything may have changed, a
   * description if the target has anything to repair.
   */
  linkDrifted(c?: RouteChange): string | undefined;
}

export interface LinkDriftWatchOptions extends DriftWatchOptionsOf<RouteMonitorHandlers> {
  readonly targets: readonly LinkDriftTarget[];
  /** The address families whose announcements to join. */
  readonly families: readonly ('IPv4' | 'IPv6')[];
}

/**
 * Receive buffer of the listening socket, forced past net.core.rmem_max (CAP_NET_ADMIN; else
 * capped): a cold sync binding thousands of VIPs announces each one, and each counts against
 * the buffer with its whole skb (about 1 KiB), whether or not it is then skipped as ours. An
 * overflow during or just after our own sync is put down to that sync (gate.ts).
 */
const RECV_BYTES = 1 << 20;

export class LinkDriftWatch {
  private readonly o: LinkDriftWatchOptions;
  private readonly gate: DriftGate;
  private readonly listener: MulticastListener;

  constructor(o: LinkDriftWatchOptions) {
    this.o = o;
    this.gate = new DriftGate({
      ...o,
      warning: 'our links or addresses were removed by someone else; repairing now',
      source: 'rtnetlink',
    });
    const open =
      o.monitor ??
      ((h: RouteMonitorHandlers) =>
        monitorRoute(h, { families: o.families, recvBufferBytes: RECV_BYTES, forceBuffers: true }));
    this.listener = open({
      skip: (port) => this.gate.isOwn(port),
      onChange: (c) => this.onChange(c),
      onOverflow: () => this.onOverflow(),
      onError: (e) => o.logger.warn('rtnetlink notification not understood; ignored', { err: e }),
    });
  }

  private onChange(c: RouteChange): void {
    if (this.gate.isOwn(c.portId)) return;
    for (const t of this.o.targets) {
      const why = t.linkDrifted(c);
      if (why !== undefined) {
        this.gate.report(why);
        return;
      }
    }
  }

  private onOverflow(): void {
    if (this.gate.lossIsOurs()) return;
    for (const t of this.o.targets) {
      if (t.linkDrifted() !== undefined) {
        this.gate.report('rtnetlink notifications were lost (receive buffer full)');
        return;
      }
    }
  }

  close(): void {
    this.listener.close();
  }
}
