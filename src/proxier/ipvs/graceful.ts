// Graceful termination of real servers (upstream graceful_termination.go, with a bound).
//
// A real server whose endpoint went away first gets weight 0: the scheduler sends it no new
// connection, established ones keep flowing. A periodic check (driven by the injected Clock)
// deletes it once the kernel reports no active and no inactive connection, or when the grace
// period is over, whichever comes first; upstream had no bound, so a server with a stuck
// connection stayed forever. UDP real servers are deleted at once (as upstream), and their
// conntrack entries are the conntrack flusher's business.

import type { IpvsAddrKey, IpvsDestination } from '../../netlink/ipvs/index.ts';

export interface Terminating {
  readonly vsKey: string;
  readonly vs: IpvsAddrKey;
  readonly destKey: string;
  readonly address: string;
  readonly port: number;
  /** Clock time when it was set to weight 0 (or found at 0 after a restart). */
  readonly since: number;
}

export type GracefulVerdict = 'delete' | 'wait' | 'gone';

/** What to do with one terminating real server, given what the kernel reports now. */
export function gracefulVerdict(
  d: IpvsDestination | undefined,
  t: Terminating,
  now: number,
  graceMs: number,
): GracefulVerdict {
  if (!d) return 'gone';
  if (d.activeConns + d.inactiveConns === 0) return 'delete';
  if (now - t.since >= graceMs) return 'delete';
  return 'wait';
}

export class GracefulQueue {
  private readonly items = new Map<string, Terminating>();

  private static id(vsKey: string, destKey: string): string {
    return `${vsKey}/${destKey}`;
  }

  get size(): number {
    return this.items.size;
  }

  has(vsKey: string, destKey: string): boolean {
    return this.items.has(GracefulQueue.id(vsKey, destKey));
  }

  add(t: Terminating): void {
    this.items.set(GracefulQueue.id(t.vsKey, t.destKey), t);
  }

  /** The endpoint is back (or the server was deleted): stop tracking it. */
  delete(vsKey: string, destKey: string): boolean {
    return this.items.delete(GracefulQueue.id(vsKey, destKey));
  }

  /** The whole virtual server went away. */
  dropVs(vsKey: string): void {
    for (const [id, t] of this.items) if (t.vsKey === vsKey) this.items.delete(id);
  }

  clear(): void {
    this.items.clear();
  }

  /** Terminating servers grouped by virtual server (one destination dump per VS per check). */
  byVs(): Map<string, Terminating[]> {
    const out = new Map<string, Terminating[]>();
    for (const t of this.items.values()) {
      const l = out.get(t.vsKey);
      if (l) l.push(t);
      else out.set(t.vsKey, [t]);
    }
    return out;
  }

  list(): Terminating[] {
    return [...this.items.values()];
  }
}
