// A bounded churn soak (issue 18): the real daemon (nftables mode, the package's V8 flags)
// against the test API server holding N Services × 10 endpoints, under a steady stream of
// endpoint updates for a fixed time; its RSS and open file descriptors are sampled between
// rounds (/proc/<pid>/status and /proc/<pid>/fd). A leak shows as a trend across rounds
// that the first round's garbage does not explain.
//
// SOAK_SECONDS (default 120; --quick 20) and SOAK_RATE (updates per second, default 100).
// SOAK_HEAP=1 also takes a heap snapshot after the first and the last round and reports the
// live JS heap (a snapshot forces a full GC and costs memory: the RSS after it is perturbed).

import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { makeCluster } from '../helpers/cluster.ts';
import { clusterIP } from './e2e-agent.ts';
import { spawnMeasured } from './e2e.ts';
import { smapsByMapping, takeSnapshot } from './heap-summary.ts';
import type { Bench, BenchOptions, Section } from './section.ts';
import { formatCount } from './stats.ts';

const AGENT = new URL('./e2e-agent.ts', import.meta.url).href;
const N = 1000;
const ENDPOINTS = 10;
const ROUNDS = 6;

interface Sample {
  seconds: number;
  updates: number;
  rssMiB: number;
  /** Of the RSS: the malloc heap ([heap]) and anonymous mappings (V8's heap spaces, thread arenas). */
  mallocMiB: number;
  anonMiB: number;
  fds: number;
  /** The live JS heap (SOAK_HEAP=1, first and last round). */
  heapMiB?: number;
}

async function sampleOf(pid: number): Promise<Omit<Sample, 'seconds' | 'updates'>> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN) / 1024;
  const maps = smapsByMapping(await readFile(`/proc/${pid}/smaps`, 'utf8'));
  const mib = (name: string): number => (maps.find(([m]) => m === name)?.[1] ?? 0) / 1024;
  return {
    rssMiB: rss,
    mallocMiB: mib('[heap]'),
    anonMiB: mib('[anon]'),
    fds: (await readdir(`/proc/${pid}/fd`)).length,
  };
}

/** The live JS heap of the daemon, MiB, from a heap snapshot written into `dir`. */
async function liveHeapMiB(d: DaemonProcess, dir: string): Promise<number> {
  for (const f of await readdir(dir)) await rm(join(dir, f), { force: true });
  return (await takeSnapshot(() => d.signal('SIGUSR2'), dir)).total / 2 ** 20;
}

async function soak(opts: BenchOptions, seconds: number, rate: number, heap: boolean): Promise<Sample[]> {
  let destroy: (() => Promise<void>) | undefined;
  let d: DaemonProcess | undefined;
  const snapshots = await mkdtemp(join(tmpdir(), 'kpts-soak-'));
  try {
    const c = await makeCluster({ teardown: (fn) => void (destroy = fn) }, 'soak', 2);
    const pods = [0, 1].map((p) => Array.from({ length: ENDPOINTS }, (_, j) => `10.244.${p + 1}.${j + 2}`));
    const { url } = await c.nodeAgent.call<{ url: string }>(AGENT, 'startApi', N, ENDPOINTS, pods);
    d = spawnMeasured(c, url, heap ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshots}`] : []);
    const last = await c.clientAgent.call<number | undefined>(
      AGENT,
      'firstAnswer',
      clusterIP(N - 1),
      80,
      'pod',
      120_000,
    );
    if (last === undefined) throw new Error(`the daemon did not program ${N} Services:\n${d.log().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 3000));
    const samples: Sample[] = [{ seconds: 0, updates: 0, ...(await sampleOf(d.pid)) }];
    const per = Math.round((seconds * rate) / ROUNDS);
    let updates = 0;
    const t0 = Date.now();
    for (let round = 1; round <= ROUNDS; round++) {
      updates += await c.nodeAgent.call<number>(AGENT, 'churn', per, rate);
      const sample: Sample = { seconds: Math.round((Date.now() - t0) / 1000), updates, ...(await sampleOf(d.pid)) };
      if (heap && (round === 1 || round === ROUNDS)) sample.heapMiB = await liveHeapMiB(d, snapshots);
      samples.push(sample);
      opts.log(`soak: ${formatCount(updates)} updates, RSS ${samples.at(-1)!.rssMiB.toFixed(0)} MiB`);
    }
    if (d.log().includes('Sync failed')) opts.log('soak: the daemon logged failed syncs');
    await c.nodeAgent.call(AGENT, 'stopApi');
    return samples;
  } finally {
    await d?.kill();
    await destroy?.();
    await rm(snapshots, { recursive: true, force: true });
  }
}

export const bench: Bench = {
  needsRoot: true,
  async run(opts: BenchOptions): Promise<Section[]> {
    const seconds = Number(process.env['SOAK_SECONDS'] ?? (opts.quick ? 20 : 120));
    const rate = Number(process.env['SOAK_RATE'] ?? 100);
    const heap = process.env['SOAK_HEAP'] === '1';
    const s = await soak(opts, seconds, rate, heap);
    const first = s[1]!;
    const end = s.at(-1)!;
    return [
      {
        title: 'Churn soak: RSS and file descriptors under endpoint updates (issue 18)',
        description: `The real daemon (nftables mode, --min-sync-period 1s) against test/helpers/fake-apiserver.ts holding ${formatCount(N)} Services × ${ENDPOINTS} endpoints; endpoint updates of random Services at ${rate}/s for ${seconds} s in ${ROUNDS} rounds; RSS (VmRSS) and open descriptors (/proc/<pid>/fd) after the first sync and after each round.`,
        columns: [
          { title: 'after', align: 'right' },
          { title: 'updates', align: 'right' },
          { title: 'RSS', align: 'right' },
          { title: 'of it malloc / anonymous', align: 'right' },
          { title: 'open fds', align: 'right' },
          ...(heap ? [{ title: 'live JS heap', align: 'right' as const }] : []),
        ],
        rows: s.map((x) => [
          x.updates === 0 ? 'first sync' : `${x.seconds} s`,
          formatCount(x.updates),
          `${x.rssMiB.toFixed(0)} MiB`,
          `${x.mallocMiB.toFixed(0)} / ${x.anonMiB.toFixed(0)} MiB`,
          String(x.fds),
          ...(heap ? [x.heapMiB === undefined ? '-' : `${x.heapMiB.toFixed(1)} MiB`] : []),
        ]),
        notes: [
          `Trend from the first round to the last: RSS ${(end.rssMiB - first.rssMiB >= 0 ? '+' : '') + (end.rssMiB - first.rssMiB).toFixed(1)} MiB, fds ${end.fds - first.fds >= 0 ? '+' : ''}${end.fds - first.fds} over ${formatCount(end.updates - first.updates)} updates.`,
        ],
        targets: [
          {
            what: '#18 churn soak: no fd leak',
            target: 'fds flat',
            status: end.fds <= first.fds ? 'met' : 'missed',
            detail: `${first.fds} → ${end.fds}`,
          },
          {
            what: '#18 churn soak: RSS trend',
            target: 'reported',
            status: 'measured',
            detail: `${first.rssMiB.toFixed(0)} → ${end.rssMiB.toFixed(0)} MiB`,
          },
        ],
      },
    ];
  },
};
