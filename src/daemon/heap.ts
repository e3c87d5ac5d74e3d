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

/** The options of Node's gc() (--expose-gc): a blocking, compacting, memory-reducing collection. */
export const RELEASE_GC = { type: 'major', execution: 'sync', flavor: 'last-resort' } as const;

type GcFn = (options: typeof RELEASE_GC) => void;

/** Runs the collection if gc() is exposed; returns whether it ran. */
export function releaseStartupHeap(gc: unknown = (globalThis as { gc?: unknown }).gc): boolean {
  if (typeof gc !== 'function') return false;
  (gc as GcFn)(RELEASE_GC);
  return true;
}
