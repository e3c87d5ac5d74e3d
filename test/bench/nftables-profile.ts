// Per-phase profile of one nftables full sync, for finding where the time goes (issue 4):
// N Services × 10 endpoints (the nftables benchmark's workload) fed to the ChangeTracker and
// checked out (model), then NftablesProxier.sync: planning (the report's planMs) and the
// batches (encoding plus, with --kernel, the kernel's round trips). Per phase: wall and CPU
// time, GC pauses (PerformanceObserver 'gc' entries), heap used and RSS after.
//
//   node --max-semi-space-size=8 test/bench/nftables-profile.ts [N]     encoding only (a transport that drops batches)
// ip netns add p && ip netns exec p node --max-semi-space-size=8 test/bench/nftables-profile.ts N --kernel; ip netns
// del p
//   --changes=K: then K one-endpoint changes, and RSS after them (as the benchmark reads it);
//   --expose-gc settles the heap before the memory figures; --cpu-prof for a profile;
//   --alloc=FILE.heapprofile samples every allocation of the sync, collected ones included.
// (--max-semi-space-size=8: the daemon's V8 option, src/daemon/v8-options.ts, which the
// benchmark's agent uses too.)
//
// One sync per process: a daemon starts cold, so each run should too; run it several times
// and take medians (the machine is shared). Prints one JSON line (two with --changes).

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import type { PerformanceEntry } from 'node:perf_hooks';
import { connect, Protocol } from '../../src/netlink/core/index.ts';
import type { NetlinkTransport } from '../../src/netlink/core/index.ts';
import { NftClient } from '../../src/netlink/nftables/index.ts';
import { TABLE } from '../../src/proxier/nftables/index.ts';
import { Harness } from './nftables-workload.ts';

const args = process.argv.slice(2);
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 10_000);
const kernel = args.includes('--kernel');
const allocFile = args.find((a) => a.startsWith('--alloc='))?.slice('--alloc='.length);
/** --heap-phases (with --expose-gc): the settled heap at each mark too (the GCs then distort the timings). */
const heapPhases = args.includes('--heap-phases');

/** A transport that takes every batch and answers dumps with nothing (an empty table). */
const nullTransport: NetlinkTransport = {
  request: async () => [],
  batch: async () => {},
  maxBatchBytes: (8 << 21) - 32, // as an 8 MiB SO_SNDBUF request gives (the kernel doubles it)
  close: () => {},
};

const GC_KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };
const gcs: { start: number; ms: number; kind: string }[] = [];
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const detail = (e as PerformanceEntry & { detail?: { kind?: number } }).detail;
    gcs.push({ start: e.startTime, ms: e.duration, kind: GC_KINDS[detail?.kind ?? 0] ?? 'other' });
  }
});
obs.observe({ entryTypes: ['gc'] });

const conn = kernel ? connect(Protocol.NETFILTER, { timeoutMs: 300_000 }) : undefined;
/** The batch round trips alone (send to the last ACK): the kernel's share of the batches. */
const roundTrips: { ms: number; cpuMs: number }[] = [];
const transport: NetlinkTransport = !conn
  ? nullTransport
  : {
      request: (msg, opts) => conn.request(msg, opts),
      batch: async (subsys, msgs, opts) => {
        const t = performance.now();
        const c = process.cpuUsage();
        try {
          await conn.batch(subsys, msgs, opts);
        } finally {
          const d = process.cpuUsage(c);
          roundTrips.push({ ms: performance.now() - t, cpuMs: (d.user + d.system) / 1000 });
        }
      },
      get maxBatchBytes() {
        return conn.maxBatchBytes;
      },
      close: () => conn.close(),
    };
const gc = (globalThis as { gc?: () => void }).gc;
const client = new NftClient({ family: 'ip', table: TABLE, transport });

/**
 * Marks on the way through the proxier: its first kernel read ends the model phase; every
 * run() (one batch: encoding, then the kernel's round trip) is timed, wall and CPU, and
 * what is left of the sync is planning (batches are sent while planning goes on).
 */
const marks: { at: number; cpu: NodeJS.CpuUsage; heapMiB?: number }[] = [];
const runs: { from: number; to: number; cpuMs: number }[] = [];
const mark = (): void => {
  let heapMiB: number | undefined;
  if (heapPhases && gc) {
    gc();
    heapMiB = Math.round((process.memoryUsage().heapUsed / 2 ** 20) * 10) / 10;
  }
  marks.push({ at: performance.now(), cpu: process.cpuUsage(), ...(heapMiB !== undefined ? { heapMiB } : {}) });
};
const marked = new Proxy(client, {
  get(target, prop, receiver) {
    const v: unknown = Reflect.get(target, prop, receiver);
    if (typeof v !== 'function') return v;
    const f = (v as (...a: unknown[]) => unknown).bind(target);
    if (prop === 'listChains' && marks.length === 0) return (...a: unknown[]) => (mark(), f(...a));
    if (prop === 'run') {
      return async (...a: unknown[]) => {
        const from = performance.now();
        const c0 = process.cpuUsage();
        try {
          return await f(...a);
        } finally {
          const c = process.cpuUsage(c0);
          runs.push({ from, to: performance.now(), cpuMs: (c.user + c.system) / 1000 });
        }
      };
    }
    return f;
  },
});
const h = new Harness(marked, n, { maxBatchBytes: transport.maxBatchBytes });

const session = allocFile ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 16384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
}
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const r = await h.fullSync();
const t1 = performance.now();
const cpu1 = process.cpuUsage();
if (session) {
  const { profile } = await session.post('HeapProfiler.stopSampling');
  writeFileSync(allocFile!, JSON.stringify(profile));
  session.disconnect();
}
const mem = process.memoryUsage();
gc?.();
const settled = process.memoryUsage();
await new Promise((resolve) => setTimeout(resolve, 200)); // let the observer deliver
obs.disconnect();

// Phases: model (to the proxier's first kernel read), then the sync: batches (the run()s) and planning (the rest).
const m1 = marks[0]!;
const cpuMs = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage): number => (b.user - a.user + b.system - a.system) / 1000;
const inRuns = (at: number): boolean => runs.some((r) => at >= r.from && at < r.to);
const gcIn = (from: number, to: number, pick: (at: number) => boolean = () => true): number =>
  gcs.filter((g) => g.start >= from && g.start < to && pick(g.start)).reduce((s, g) => s + g.ms, 0);
const runCpu = runs.reduce((s, r) => s + r.cpuMs, 0);
const syncCpu = cpuMs(m1.cpu, cpu1);
const round = (x: number): number => Math.round(x * 10) / 10;
const MiB = 2 ** 20;
console.log(
  JSON.stringify({
    n,
    kernel,
    totalMs: round(t1 - t0),
    cpuMs: {
      total: round(cpuMs(cpu0, cpu1)),
      model: round(cpuMs(cpu0, m1.cpu)),
      plan: round(syncCpu - runCpu),
      batches: round(runCpu),
    },
    modelMs: round(r.modelMs),
    planMs: round(r.planMs),
    batchesMs: round(r.kernelMs),
    ...(kernel
      ? {
          kernelRoundTripMs: round(roundTrips.reduce((a, b) => a + b.ms, 0)),
          kernelRoundTripCpuMs: round(roundTrips.reduce((a, b) => a + b.cpuMs, 0)),
        }
      : {}),
    batches: r.batches.length,
    runCpuMs: runs.map((x) => round(x.cpuMs)),
    messages: r.batches.reduce((s, b) => s + b.messages, 0),
    gcByKind: Object.fromEntries(
      [...new Set(gcs.map((g) => g.kind))].map((k) => [
        k,
        {
          count: gcs.filter((g) => g.kind === k).length,
          ms: round(gcs.filter((g) => g.kind === k).reduce((s, g) => s + g.ms, 0)),
        },
      ]),
    ),
    gcMs: {
      model: round(gcIn(t0, m1.at)),
      plan: round(gcIn(m1.at, t1 + 1, (at) => !inRuns(at))),
      batches: round(gcIn(m1.at, t1 + 1, inRuns)),
      count: gcs.length,
    },
    heapUsedMiB: round(mem.heapUsed / MiB),
    rssMiB: round(mem.rss / MiB),
    ...(heapPhases ? { heapAtMarksMiB: marks.map((m) => m.heapMiB) } : {}),
    ...(gc ? { settledHeapMiB: round(settled.heapUsed / MiB), settledRssMiB: round(settled.rss / MiB) } : {}),
  }),
);
// --changes=N: then N one-endpoint changes (partial syncs), as the benchmark does before it reads RSS.
const changes = Number(args.find((a) => a.startsWith('--changes='))?.slice('--changes='.length) ?? 0);
if (changes > 0) {
  const ms: number[] = [];
  for (let r = 0; r < changes; r++) ms.push((await h.change(r)).totalMs);
  ms.sort((a, b) => a - b);
  const m = process.memoryUsage();
  console.log(
    JSON.stringify({
      changes,
      medianChangeMs: round(ms[ms.length >> 1]!),
      rssMiB: round(m.rss / MiB),
      heapUsedMiB: round(m.heapUsed / MiB),
      maxRssMiB: round(process.resourceUsage().maxRSS / 1024),
    }),
  );
}
if (kernel) await h.cleanup();
conn?.close();
