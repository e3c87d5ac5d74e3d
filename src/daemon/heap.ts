// A collection after the first full sync, after later bursts once the daemon is quiet, and
// after a large input was applied (HeapRelease, below), when the daemon runs with --expose-gc (the
// package's V8 options, v8-options.ts). Listing every Service and EndpointSlice, building the
// model and the first ruleset leave most of the heap V8 grew into as garbage; V8's own
// collections then free it inside its pages but keep the pages, so RSS stays near the
// start-up peak while the daemon idles. The "last resort" flavour is what V8 does under
// memory pressure: repeated full collections that compact and give free pages back to the
// kernel. A plain gc() compacts too little: in a test process holding 500,000 small objects
// after 2,000,000 were made, RSS 365 MiB stayed 325 MiB with gc() and fell to 127 MiB with
// this. It blocks the event loop, the first time after READY=1: measured in a test process with the same
// flags, 0.6 s for a 155 MiB live heap and 2.9 s for 562 MiB (the daemon's live heap is about
// 106 MiB at 10,000 Services x 10 and 396 MiB at 50,000).

import type { Clock, TimerHandle } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';

/** The options of Node's gc() (--expose-gc): a blocking, compacting, memory-reducing collection. */
export const RELEASE_GC = { type: 'major', execution: 'sync', flavor: 'last-resort' } as const;

type GcFn = (options: typeof RELEASE_GC) => void;

/** Runs the collection if gc() is exposed; returns whether it ran. */
export function releaseStartupHeap(gc: unknown = (globalThis as { gc?: unknown }).gc): boolean {
  if (typeof gc !== 'function') return false;
  (gc as GcFn)(RELEASE_GC);
  return true;
}

/** What the heap release is given: time, the process's RSS, and the collection to run. */
export interface HeapReleaseOptions {
  clock: Clock;
  logger: Logger;
  /** Resident set size, bytes (process.memoryUsage.rss). */
  rss?: () => number;
  /** Node's gc() (--expose-gc); default globalThis.gc. */
  gc?: unknown;
  /** Quiet time after the last sync before RSS is looked at. Default 10 s. */
  idleMs?: number;
  /** RSS over the level after the last release that earns another. Default 1.15. */
  growth?: number;
  /** The shortest time between two releases asked for by request(); default 30 s. */
  minIntervalMs?: number;
  /**
   * malloc_trim(0) (the netlink-socket addon's mallocTrim), run right after each collection:
   * glibc keeps what Node's C++ side freed in its arenas (82 MiB of the main arena after a
   * 1,000 updates/s burst at 10,000 Services x 10, of which this gave back 70: BENCHMARKS.md,
   * Churn). Absent: not run.
   */
  trim?: () => boolean;
  /**
   * True while a sync runs (SyncLoop.isSyncing): the release waits for it to end. Quiet is
   * counted from the last sync's end, and at 1,000 updates/s one sync ran for 36 s: without this
   * the collection (1.4 s) blocked the loop in the middle of it.
   */
  busy?: () => boolean;
}

/**
 * Gives memory back after bursts, not only after start-up: a hard-won full sync, a churn
 * burst or a large relist leaves V8 holding pages it no longer needs (measured: 263 MiB
 * before a burst, 617 MiB 30 s after it). The release runs once after the first full sync,
 * then when the daemon has been quiet for `idleMs` since its last sync, or soon after a later
 * full sync (in a gap between syncs, churn or not), and RSS has grown by `growth` over what the
 * last release left. It blocks the event loop (0.6 s at 10,000 Services x 10), so not for
 * every burst of churn: a sync that follows a release waits at most once per full sync or
 * quiet spell, not per change. The level after a release becomes the new reference, so a daemon whose
 * live state grew (more Services) is not collected again and again.
 *
 * request(): a large input changed (a manifest file of a megabyte or more read or removed) and
 * the sync that applied it is done: its text, its parse trees and the sync's garbage grew the
 * heap (an 8 MB manifest: see BENCHMARKS.md, Reliability). Released soon whatever RSS says, at
 * most once per minIntervalMs (a request within it runs when it ends).
 */
export class HeapRelease {
  private readonly o: HeapReleaseOptions;
  private readonly rss: () => number;
  private readonly idleMs: number;
  private readonly growth: number;
  private released: number | undefined;
  private timer: TimerHandle | undefined;
  private closed = false;
  /**
   * What the next check is for: the first full sync or request() (released whatever RSS
   * says), or a later full sync (released if RSS grew), each soon rather than after idleMs.
   */
  private forced: 'first' | 'request' | 'full' | undefined;
  private lastAt = -Infinity;

  constructor(o: HeapReleaseOptions) {
    this.o = o;
    this.rss = o.rss ?? (() => process.memoryUsage.rss());
    this.idleMs = o.idleMs ?? 10_000;
    this.growth = o.growth ?? 1.15;
  }

  /** After every successful sync (SyncLoop's onSynced). */
  synced(done: { full: boolean }): void {
    if (this.closed) return;
    // The first full sync: at once, but after the loop has sent READY=1 (a timer of 0).
    if (this.released === undefined && done.full) this.forced ??= 'first';
    // A later full sync (hourly, after a failure or drift) read the whole table back: under
    // steady churn the daemon is never quiet for idleMs, and RSS stayed 3.5 x its steady level
    // after one at 10,000 Services x 10. Released in the next gap between syncs instead: one
    // blocked moment per full sync, not per change.
    else if (done.full) this.forced ??= 'full';
    this.schedule();
  }

  /** A large input was applied: release soon (at most once per minIntervalMs). */
  request(): void {
    if (this.closed) return;
    this.forced = 'request';
    this.schedule();
  }

  close(): void {
    this.closed = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  private schedule(): void {
    this.timer?.cancel();
    const now = this.o.clock.now();
    const wait = this.forced ? Math.max(0, this.lastAt + (this.o.minIntervalMs ?? 30_000) - now) : this.idleMs;
    this.timer = this.o.clock.setTimer(wait, () => this.check());
  }

  private check(): void {
    this.timer = undefined;
    const why = this.forced;
    if (this.released === undefined && !why) return;
    if (this.o.busy?.() === true) {
      this.timer = this.o.clock.setTimer(why ? 1_000 : this.idleMs, () => this.check());
      return;
    }
    const before = this.rss();
    this.forced = undefined;
    if ((!why || why === 'full') && before <= this.released! * this.growth) return;
    const t0 = this.o.clock.now();
    this.lastAt = t0;
    if (!releaseStartupHeap(this.o.gc ?? (globalThis as { gc?: unknown }).gc)) {
      this.released = before;
      return;
    }
    const trimmed = this.o.trim?.() ?? false;
    this.released = this.rss();
    const mib = (b: number): number => Math.round(b / 2 ** 20);
    const fields = {
      rssMiBBefore: mib(before),
      rssMiBAfter: mib(this.released),
      ms: this.o.clock.now() - t0,
      ...(this.o.trim ? { mallocTrimmed: trimmed } : {}),
    };
    if (why === 'request') this.o.logger.info('Gave memory back after a large input change', fields);
    else if (why === 'full') this.o.logger.debug('Heap released after a full sync', fields);
    else this.o.logger.debug('Heap released', fields);
  }
}
