// One collection after the first full sync, when the daemon runs with --expose-gc (the
// package's V8 options, v8-options.ts). Listing every Service and EndpointSlice, building the
// model and the first ruleset leave most of the heap V8 grew into as garbage; V8's own
// collections then free it inside its pages but keep the pages, so RSS stays near the
// start-up peak while the daemon idles. The "last resort" flavour is what V8 does under
// memory pressure: repeated full collections that compact and give free pages back to the
// kernel. A plain gc() compacts too little: in a test process holding 500,000 small objects
// after 2,000,000 were made, RSS 365 MiB stayed 325 MiB with gc() and fell to 127 MiB with
// this. It blocks the event loop once, after READY=1: measured in a test process with the same
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

/**
 * The same collection after a large input changed (a manifest file of a megabyte or more
 * read or removed), once the sync that applied it is done: the file's text, its parse trees
 * and the sync's garbage grew the heap, and without this RSS stays at that peak (an 8 MB
 * manifest: see BENCHMARKS.md, Reliability). At most once per minIntervalMs, since it blocks
 * the event loop (0.6 s for a 155 MiB live heap); a request within that time runs when it ends.
 */
export class HeapRelease {
  private lastAt = -Infinity;
  private pending: TimerHandle | undefined;
  private readonly o: HeapReleaseOptions;

  constructor(o: HeapReleaseOptions) {
    this.o = o;
  }

  request(): void {
    if (this.pending !== undefined) return;
    const wait = this.lastAt + (this.o.minIntervalMs ?? 30_000) - this.o.clock.now();
    if (wait > 0) this.pending = this.o.clock.setTimer(wait, () => this.run());
    else this.run();
  }

  /** Cancels a pending collection (the daemon stops). */
  close(): void {
    this.pending?.cancel();
    this.pending = undefined;
  }

  private run(): void {
    this.pending = undefined;
    this.lastAt = this.o.clock.now();
    const before = this.o.rss();
    if (!releaseStartupHeap(this.o.gc ?? (globalThis as { gc?: unknown }).gc)) return;
    const mib = (b: number): number => Math.round(b / 2 ** 20);
    this.o.logger.info('Gave memory back after a large input change', {
      rssMiBBefore: mib(before),
      rssMiBAfter: mib(this.o.rss()),
    });
  }
}

export interface HeapReleaseOptions {
  clock: Clock;
  logger: Logger;
  /** Default 30 s. */
  minIntervalMs?: number;
  /** The process's resident set in bytes (process.memoryUsage.rss). */
  rss: () => number;
  /** gc() when exposed (--expose-gc); default globalThis.gc. */
  gc?: unknown;
}
