// End to end, as a new user meets it: the real daemon process (bin/kube-proxy-ts.js with the
// package's V8 flags) in each proxy mode against the project's test API server holding
// N Services × E endpoints, timed from outside with packets from a client namespace.
//
//   cold start      process spawned → the first and the last Service answer a TCP connect
//   list serving    the test server's own time to serve every list page (reported apart)
//   new Service     API write → the new ClusterIP answers (median of a few, spaced > min sync)
//   endpoint move   API write → Service 0 answers from the other pod
//   RSS             after the first sync (settled), after a bounded churn loop of endpoint
//                   updates, and the peak (VmHWM), read from /proc/<pid>/status
//
// N = 0 gives the idle daemon's RSS. --quick: nftables mode at 0 and 1,000 only, a short churn.
// A full run measures nftables mode at 0, 1,000, 5,000, 10,000 and 50,000 × 10 (50,000 takes
// ~6 min on 2 CPUs) and at the shapes upstream published figures for, 10,000 × 2 (kubernetes PR
// 126013) and 5,000 × 50 (250,000 endpoints, kubernetes issue 135639); iptables mode at 0,
// 1,000 and 10,000 × 10; userspace mode at 0 and 1,000 × 10 (a listening socket per Service).
// E2E_SIZES=0,10000,10000x2 chooses the shapes instead (× 10 unless given), E2E_MODES=iptables
// the modes (IPVS needs a kernel with IPVS: not on this machine's; see the ipvs module).
// E2E_CHURN_S=600 churns for 10 minutes (default 60 s, 3,000 updates), RSS and open fds
// sampled every E2E_SAMPLE_S (default a tenth of the churn, at least 5 s).
// E2E_V8_VARIANTS='--max-semi-space-size=8;--max-semi-space-size=4 --optimize-for-size' runs
// every size once per set of V8 options, one after the other (default: the package's own).
// The daemon runs with Node's compile cache, as the packaged unit does (NODE_COMPILE_CACHE in
// its CacheDirectory=), filled before the first size by importing the daemon's modules, so every
// start measured is a warm one as on a node after its first start; E2E_COMPILE_CACHE=0 measures
// cold starts instead (every module type-stripped and compiled again).

import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { makeCluster } from '../helpers/cluster.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { BIN, spawnDaemon } from '../helpers/daemon-process.ts';
import { clusterIP } from './e2e-agent.ts';
import type { HeapBreakdown } from './heap-snapshot-reader.ts';
import { smapsByMapping, takeSnapshot } from './heap-summary.ts';
import type { Figure, Metric } from './figures.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, median } from './stats.ts';

const AGENT = new URL('./e2e-agent.ts', import.meta.url).href;
const ENDPOINTS = 10;
/** The probed Services' endpoints are pod addresses: a pod holds at most this many. */
const POD_ADDRS = 10;
const PODS = 2;
const MIN_SYNC = '1s';
const CHURN_PER_SECOND = 50;
/** "No growth": what RSS after the churn may exceed RSS after the first sync by (allocator noise). */
const GROWTH_MARGIN_MIB = 10;

/** A cluster shape: N Services × `per` endpoints each. */
interface Shape {
  n: number;
  per: number;
}

type E2eMode = 'nftables' | 'iptables' | 'userspace';
const E2E_MODES: readonly E2eMode[] = ['nftables', 'iptables', 'userspace'];

interface SizeResult {
  mode: E2eMode;
  n: number;
  per: number;
  coldFirstMs?: number;
  coldLastMs?: number;
  /** The daemon's CPU time (user + system) from its start to the first and last Service answering. */
  coldCpuMs?: number;
  servingMs?: number;
  newServiceMs: number[];
  moveMs: number[];
  rssSyncMiB: number;
  rssChurnMiB: number;
  peakMiB: number;
  churned: number;
  /** RSS and open fds during the churn: seconds since it began, MiB, fds. */
  trend: [number, number, number][];
  /** The V8 options the daemon ran with. */
  v8: readonly string[];
  /** Where the memory is at the end of the run (the largest size only). */
  breakdown?: { rssMiB: number; mappings: [string, number][]; heap: HeapBreakdown };
}

const wallNow = (): number => performance.timeOrigin + performance.now();

/** utime + stime of a process, ms (/proc/<pid>/stat fields 14 and 15, in clock ticks of 10 ms). */
export async function cpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export async function memoryOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, hwm: kib('VmHWM') / 1024 };
}

async function fdsOf(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/fd`)).length;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** pod p's 10 addresses: 10.244.(p+1).2 … .11 (the first is the cluster helper's own). */
export const podAddrs = (p: number): string[] =>
  Array.from({ length: POD_ADDRS }, (_, j) => `10.244.${p + 1}.${j + 2}`);

export async function cluster(): Promise<Cluster> {
  let destroy: (() => Promise<void>) | undefined;
  try {
    const c = await makeCluster({ teardown: (fn) => void (destroy = fn) }, 'e2e', PODS);
    for (let p = 0; p < PODS; p++) {
      for (const a of podAddrs(p).slice(1)) await c.pods[p]!.run('ip', 'addr', 'add', `${a}/24`, 'dev', 'eth0');
    }
    return c;
  } catch (e) {
    await destroy?.();
    throw e;
  }
}

export function daemonArgs(url: string, mode: string = 'nftables'): string[] {
  return [
    '--master',
    url,
    '--proxy-mode',
    mode,
    '--hostname-override',
    'node-a',
    '--cluster-cidr',
    '10.244.0.0/16',
    '--healthz-bind-address',
    '127.0.0.1:10256',
    '--metrics-bind-address',
    '127.0.0.1:10249',
    '--min-sync-period',
    MIN_SYNC,
  ];
}

export function spawnMeasured(
  c: Cluster,
  url: string,
  extraNodeOptions: readonly string[] = [],
  v8: readonly string[] = DAEMON_V8_OPTIONS,
  env?: NodeJS.ProcessEnv,
  mode: string = 'nftables',
): DaemonProcess {
  // On Node's command line, as /usr/bin/kube-proxy-ts passes them (NODE_OPTIONS refuses some V8 flags).
  return spawnDaemon(c.node, daemonArgs(url, mode), {
    command: [process.execPath, ...v8, ...extraNodeOptions, BIN],
    ...(env ? { env } : {}),
  });
}

/** The daemon's modules, its dynamic imports included: what a warm compile cache holds. */
const DAEMON_MODULES = ['daemon/main.ts', 'daemon/build.ts', 'sources/index.ts'].map(
  (m) => new URL(`../../src/${m}`, import.meta.url).href,
);

let compileCache: Promise<NodeJS.ProcessEnv | undefined> | undefined;

/** NODE_COMPILE_CACHE for the daemons of this run, filled once (undefined: E2E_COMPILE_CACHE=0). */
function compileCacheEnv(): Promise<NodeJS.ProcessEnv | undefined> {
  compileCache ??= (async () => {
    if (process.env['E2E_COMPILE_CACHE'] === '0') return undefined;
    const env = { NODE_COMPILE_CACHE: await mkdtemp(join(tmpdir(), 'kpts-e2e-cache-')) };
    const imports = DAEMON_MODULES.map((m) => `await import(${JSON.stringify(m)});`).join(' ');
    await promisify(execFile)(process.execPath, ['--input-type=module', '-e', imports], {
      env: { ...process.env, ...env },
    });
    return env;
  })();
  return compileCache;
}

/** The run's compile cache is a directory in /tmp: removed when the module ends, whatever happened. */
async function removeCompileCache(): Promise<void> {
  const env = compileCache && (await compileCache.catch(() => undefined));
  compileCache = undefined;
  const dir = env?.['NODE_COMPILE_CACHE'];
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}

/** Endpoint updates for `seconds` while RSS and open fds are sampled every `everyS`. */
async function churnSampled(
  api: Cluster['nodeAgent'],
  pid: number,
  seconds: number,
  everyS: number,
): Promise<{ churned: number; trend: [number, number, number][] }> {
  const trend: [number, number, number][] = [];
  const t0 = performance.now();
  let done = false;
  const churned = api.call<number>(AGENT, 'churn', Math.round(seconds * CHURN_PER_SECOND), CHURN_PER_SECOND);
  void churned.finally(() => (done = true)).catch(() => undefined);
  while (!done) {
    trend.push([(performance.now() - t0) / 1000, (await memoryOf(pid)).rss, await fdsOf(pid)]);
    for (let waited = 0; waited < everyS * 1000 && !done; waited += 250) await sleep(250);
  }
  const count = await churned;
  trend.push([(performance.now() - t0) / 1000, (await memoryOf(pid)).rss, await fdsOf(pid)]);
  return { churned: count, trend };
}

/** Cold start gets 120 s, and 5 ms more per Service (a loaded 2-CPU machine at 50,000). */
const coldLimitMs = (n: number): number => 120_000 + 5 * n;

async function measureSize(
  mode: E2eMode,
  { n, per }: Shape,
  opts: BenchOptions,
  breakdown: boolean,
  v8: readonly string[],
): Promise<SizeResult> {
  const c = await cluster();
  const label = `e2e: ${mode} ${formatCount(n)} × ${per}`;
  const snapshots = await mkdtemp(join(tmpdir(), 'kpts-e2e-'));
  let d: DaemonProcess | undefined;
  try {
    const api = c.nodeAgent;
    const { url, seedMs } = await api.call<{ url: string; seedMs: number }>(AGENT, 'startApi', n, per, [
      podAddrs(0),
      podAddrs(1),
    ]);
    const servingMs = n > 0 ? await api.call<number>(AGENT, 'listServingMs') : undefined;
    opts.log(
      `${label}: server seeded in ${formatMs(seedMs)}, lists served in ${servingMs === undefined ? '-' : formatMs(servingMs)}`,
    );
    const answer = (ip: string, prefix: string, limitMs: number) =>
      c.clientAgent.call<number | undefined>(AGENT, 'firstAnswer', ip, 80, prefix, limitMs);
    const started = wallNow();
    const env = await compileCacheEnv();
    d = spawnMeasured(c, url, ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshots}`], v8, env, mode);
    const out: SizeResult = {
      mode,
      n,
      per,
      newServiceMs: [],
      moveMs: [],
      rssSyncMiB: NaN,
      rssChurnMiB: NaN,
      peakMiB: NaN,
      churned: 0,
      trend: [],
      v8,
    };
    if (servingMs !== undefined) out.servingMs = servingMs;
    if (n > 0) {
      const [first, last] = await Promise.all([
        answer(clusterIP(0), 'pod1', coldLimitMs(n)),
        answer(clusterIP(n - 1), 'pod1', coldLimitMs(n)),
      ]);
      if (first === undefined || last === undefined)
        throw new Error(
          `the daemon did not program ${n} Services within ${coldLimitMs(n) / 1000} s:\n${d.log().slice(-3000)}`,
        );
      out.coldFirstMs = first - started;
      out.coldLastMs = last - started;
      out.coldCpuMs = await cpuMsOf(d.pid);
    }
    // Settled: the daemon's collection after its first full sync (heap.ts) takes seconds at 50,000.
    await sleep(n > 0 ? 3000 + n / 5 : 5000);
    out.rssSyncMiB = (await memoryOf(d.pid)).rss;
    const repeats = opts.quick ? 2 : 4;
    for (let k = 0; k < repeats; k++) {
      await sleep(1500);
      const w = await api.call<{ at: number; ip: string }>(AGENT, 'addService', k);
      const at = await answer(w.ip, 'pod1', 30_000);
      if (at !== undefined) out.newServiceMs.push(at - w.at);
    }
    if (n > 0) {
      for (let k = 0; k < repeats; k++) {
        await sleep(1500);
        const to = (k + 1) % PODS;
        const wrote = await api.call<number>(AGENT, 'moveEndpoints', to);
        const at = await answer(clusterIP(0), `pod${to + 1}`, 30_000);
        if (at !== undefined) out.moveMs.push(at - wrote);
      }
      const seconds = opts.quick ? 4 : Number(process.env['E2E_CHURN_S'] ?? 60);
      const everyS = Number(process.env['E2E_SAMPLE_S'] ?? Math.max(5, seconds / 10));
      if (!(seconds > 0) || !(everyS > 0)) throw new Error('E2E_CHURN_S and E2E_SAMPLE_S must be positive seconds');
      opts.log(`${label}: churn for ${seconds} s at ${CHURN_PER_SECOND}/s`);
      ({ churned: out.churned, trend: out.trend } = await churnSampled(api, d.pid, seconds, everyS));
      opts.log(
        `${label}: churn trend (s, MiB, fds): ${out.trend.map((x) => `${x[0].toFixed(0)}s ${x[1].toFixed(0)}/${x[2]}`).join(', ')}`,
      );
      await sleep(3000);
    }
    const m = await memoryOf(d.pid);
    out.rssChurnMiB = m.rss;
    out.peakMiB = m.hwm;
    await api.call(AGENT, 'stopApi');
    if (breakdown) {
      // Last: a snapshot costs the daemon memory of its own (the peak above is read before).
      opts.log(`${label}: heap snapshot`);
      const mappings = smapsByMapping(await readFile(`/proc/${d.pid}/smaps`, 'utf8'));
      const daemon = d;
      try {
        out.breakdown = {
          rssMiB: m.rss,
          mappings,
          heap: await takeSnapshot(() => daemon.signal('SIGUSR2'), snapshots),
        };
      } catch (e) {
        opts.log(`${label}: no heap breakdown (${(e as Error).message})`);
      }
    }
    return out;
  } finally {
    await d?.kill();
    await c.destroy();
    await rm(snapshots, { recursive: true, force: true });
  }
}

/** Shapes per mode (see the top of the file); E2E_SIZES and E2E_MODES override. */
function plan(quick: boolean): [E2eMode, Shape][] {
  const env = process.env['E2E_SIZES'];
  const chosen = env?.split(',').map((x) => {
    const m = /^(\d+)(?:x(\d+))?$/.exec(x.trim());
    if (!m) throw new Error(`E2E_SIZES: "${x}" is not N or NxE (Services × endpoints)`);
    return { n: Number(m[1]), per: m[2] ? Number(m[2]) : ENDPOINTS };
  });
  const modes =
    process.env['E2E_MODES']?.split(',').map((m) => {
      if (!E2E_MODES.includes(m as E2eMode)) throw new Error(`E2E_MODES: "${m}" is not one of ${E2E_MODES.join(', ')}`);
      return m as E2eMode;
    }) ?? (quick ? ['nftables' as const] : E2E_MODES);
  const x10 = (...ns: number[]): Shape[] => ns.map((n) => ({ n, per: ENDPOINTS }));
  const defaults: Record<E2eMode, Shape[]> = quick
    ? { nftables: x10(0, 1000), iptables: x10(0, 1000), userspace: x10(0, 1000) }
    : {
        nftables: [...x10(0, 1000, 5000, 10_000, 50_000), { n: 10_000, per: 2 }, { n: 5000, per: 50 }],
        iptables: x10(0, 1000, 10_000),
        userspace: x10(0, 1000),
      };
  return modes.flatMap((m) => (chosen ?? defaults[m]).map((s): [E2eMode, Shape] => [m, s]));
}

const mib = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(0)} MiB` : '-');
const ms = (x: number | undefined): string => (x === undefined ? '-' : formatMs(x));
const med = (xs: number[]): string => (xs.length === 0 ? '-' : `${formatMs(median(xs))} (${xs.length})`);

export const bench: Bench = {
  needsRoot: true,
  async run(opts: BenchOptions): Promise<Section[]> {
    const planned = plan(opts.quick);
    const failures: string[] = [];
    const variants = (process.env['E2E_V8_VARIANTS'] ?? '')
      .split(';')
      .map((v) => v.trim().split(/\s+/).filter(Boolean))
      .filter((v) => v.length > 0);
    if (variants.length === 0) variants.push([...DAEMON_V8_OPTIONS]);
    const results: SizeResult[] = [];
    const largest = Math.max(...planned.map(([, s]) => s.n));
    try {
      for (const v8 of variants) {
        for (const [mode, shape] of planned) {
          const what = `e2e: ${mode} ${formatCount(shape.n)} × ${shape.per}${variants.length > 1 ? ` (${v8.join(' ')})` : ''}`;
          opts.log(what);
          // The memory breakdown: nftables mode, idle and the largest × 10 size.
          const breakdown =
            variants.length === 1 &&
            mode === 'nftables' &&
            shape.per === ENDPOINTS &&
            (shape.n === largest || shape.n === 0);
          try {
            results.push(await measureSize(mode, shape, opts, breakdown, v8));
          } catch (e) {
            // One mode or set of options failing (a flag Node refuses, a heap cap too small) leaves the others' rows.
            if (planned.length === 1 && variants.length === 1) throw e;
            opts.log(`${what} failed: ${(e as Error).message.split('\n')[0]}`);
            failures.push(`${what.slice(5)}: ${(e as Error).message.split('\n')[0]!.slice(0, 300)}`);
          }
        }
      }
    } finally {
      await removeCompileCache();
    }
    const label = (r: SizeResult): string =>
      `${r.n === 0 ? '0 (idle)' : `${formatCount(r.n)} × ${r.per}`}${variants.length > 1 ? ` (${r.v8.join(' ')})` : ''}`;
    // The goals are nftables mode's (the recommended one), at × 10.
    const nft = results.filter((r) => r.mode === 'nftables');
    const at10k = nft.find((r) => r.n === 10_000 && r.per === ENDPOINTS);
    const idle = nft.find((r) => r.n === 0);
    const targets: Target[] = [
      idle
        ? {
            what: '#17 idle RSS',
            target: '≤ 60 MiB',
            status: idle.rssSyncMiB <= 60 ? 'met' : 'missed',
            detail: mib(idle.rssSyncMiB),
          }
        : { what: '#17 idle RSS', target: '≤ 60 MiB', status: 'not measured', detail: 'no idle run' },
      at10k
        ? {
            what: '#17 10,000 × 10 cold start',
            target: '≤ 1 s',
            status: (at10k.coldLastMs ?? Infinity) <= 1000 ? 'met' : 'missed',
            detail: ms(at10k.coldLastMs),
          }
        : { what: '#17 10,000 × 10 cold start', target: '≤ 1 s', status: 'not measured', detail: 'not in this run' },
      at10k
        ? {
            what: '#17 10,000 × 10 steady RSS / peak',
            target: '≤ 160 MiB / ≤ 256 MiB',
            status: at10k.rssChurnMiB <= 160 && at10k.peakMiB <= 256 ? 'met' : 'missed',
            detail: `${mib(at10k.rssChurnMiB)} / ${mib(at10k.peakMiB)}`,
          }
        : {
            what: '#17 10,000 × 10 steady RSS / peak',
            target: '≤ 160 MiB / ≤ 256 MiB',
            status: 'not measured',
            detail: 'not in this run',
          },
      at10k
        ? {
            what: `#17 10,000 × 10 no growth under churn (${formatCount(at10k.churned)} updates)`,
            target: `RSS after ≤ after the first sync + ${GROWTH_MARGIN_MIB} MiB`,
            status: at10k.rssChurnMiB <= at10k.rssSyncMiB + GROWTH_MARGIN_MIB ? 'met' : 'missed',
            detail: `${mib(at10k.rssSyncMiB)} → ${mib(at10k.rssChurnMiB)}`,
          }
        : { what: '#17 10,000 × 10 churn', target: 'no growth', status: 'not measured', detail: 'not in this run' },
    ];
    return [
      {
        title: 'End to end: the daemon process against a test API server',
        description: `The real daemon (\`node ${variants.map((v) => v.join(' ')).join(' or ')} bin/kube-proxy-ts.js\`, --proxy-mode as the row says, --min-sync-period ${MIN_SYNC}) in a node namespace, against test/helpers/fake-apiserver.ts (in the same namespace, another process) holding N Services × E endpoints (the two probed Services' endpoints are the pods' ${POD_ADDRS} addresses, at most ${POD_ADDRS}); a client namespace connects to ClusterIPs. Cold start: spawn → first answer of Service 0 and of Service N-1, and the daemon's CPU time (user + system, /proc) until then, the steadier figure on a shared machine; the server's own time to serve the same list pages, one after the other, is beside it. Changes: API write → first answer (medians; spaced beyond min-sync-period). RSS from /proc; peak is VmHWM. Churn: endpoint updates of random Services at ${CHURN_PER_SECOND}/s.`,
        columns: [
          { title: 'mode' },
          { title: 'Services × endpoints' },
          { title: 'cold start: first / last Service answers', align: 'right' },
          { title: 'daemon CPU to then', align: 'right' },
          { title: 'server list serving', align: 'right' },
          { title: 'new Service', align: 'right' },
          { title: 'endpoint move', align: 'right' },
          { title: 'RSS after first sync', align: 'right' },
          { title: 'RSS after churn (updates)', align: 'right' },
          { title: 'peak RSS', align: 'right' },
        ],
        rows: results.map((r) => [
          r.mode,
          label(r),
          r.coldFirstMs === undefined ? '-' : `${formatMs(r.coldFirstMs)} / ${ms(r.coldLastMs)}`,
          ms(r.coldCpuMs),
          ms(r.servingMs),
          med(r.newServiceMs),
          med(r.moveMs),
          mib(r.rssSyncMiB),
          `${mib(r.rssChurnMiB)} (${formatCount(r.churned)})`,
          mib(r.peakMiB),
        ]),
        targets,
        notes: [
          ...failures.map((f) => `**failed**: ${f}`),
          ...results
            .filter((r) => r.trend.length > 0)
            .map(
              (r) =>
                `${r.mode} ${label(r)}: RSS / open fds during the churn: ${r.trend.map(([t, rss, fds]) => `${t.toFixed(0)} s ${rss.toFixed(0)} MiB / ${fds}`).join(', ')}.`,
            ),
        ],
        figures: variants.length === 1 ? results.flatMap(figuresOf) : [],
      },
      ...results.filter((r) => r.breakdown).map((r) => breakdownSection(r.n, r.breakdown!)),
    ];
  },
};

/** The summary's figures of one daemon: cold start, changes and RSS, end to end. */
function figuresOf(r: SizeResult): Figure[] {
  const at = { mode: r.mode, series: OURS, services: r.n, endpoints: r.n === 0 ? 0 : r.per };
  const ms = (metric: Metric, variant: string, value: number | undefined): Figure[] =>
    figure({ ...at, metric, variant, value: value ?? NaN, unit: 'ms' });
  const rss = (variant: string, value: number): Figure[] =>
    figure({ ...at, metric: 'rss', variant, value, unit: 'MiB' });
  const med = (xs: number[]): number => (xs.length ? median(xs) : NaN);
  return [
    ...rss('after first sync', r.rssSyncMiB),
    ...(r.n === 0
      ? []
      : [
          ...ms('coldStart', 'first Service', r.coldFirstMs),
          ...ms('coldStart', 'last Service', r.coldLastMs),
          ...ms('coldStart', 'daemon CPU', r.coldCpuMs),
          ...ms('changeE2E', 'new Service', med(r.newServiceMs)),
          ...ms('changeE2E', 'endpoint move', med(r.moveMs)),
          ...rss('after churn', r.rssChurnMiB),
          ...rss('peak', r.peakMiB),
        ]),
  ];
}

/** Where the daemon's RSS goes: mappings from /proc/<pid>/smaps, the live JS heap by kind from a snapshot. */
function breakdownSection(n: number, b: NonNullable<SizeResult['breakdown']>): Section {
  const kib = (name: string): number => b.mappings.filter(([m]) => m === name).reduce((a, [, k]) => a + k, 0);
  const nodeBinary = b.mappings.filter(([m]) => m.endsWith('/bin/node')).reduce((a, [, k]) => a + k, 0);
  const libs = b.mappings.filter(([m]) => m.startsWith('/') && !m.endsWith('/bin/node')).reduce((a, [, k]) => a + k, 0);
  const anon = kib('[anon]');
  const live = b.heap.total / 2 ** 20;
  const type = (t: string): number => (b.heap.byType.find(([x]) => x === t)?.[1] ?? 0) / 2 ** 20;
  const strings = type('string') + type('concatenated string') + type('sliced string');
  const rows: string[][] = [
    ['node binary (file-backed text, shared between processes)', mib(nodeBinary / 1024)],
    ['shared libraries, netlink addon', mib(libs / 1024)],
    ['malloc heap ([heap]: Buffers, undici, addon)', mib(kib('[heap]') / 1024)],
    ['anonymous mappings (V8 heap spaces, code, stacks)', mib(anon / 1024)],
    ['  of which the live JS heap (snapshot, self sizes)', mib(live)],
    ['    strings', mib(strings)],
    ['    objects', mib(type('object'))],
    ['    arrays (element and property stores)', mib(type('array'))],
    ['    code (compiled functions)', mib(type('code'))],
    [
      '    other (hidden, shapes, closures, native)',
      mib(live - strings - type('object') - type('array') - type('code')),
    ],
    ['  of which not live (V8 free pages and reserve, young generation)', mib(anon / 1024 - live)],
  ];
  const top = b.heap.byName
    .filter(([k]) => k.startsWith('object:'))
    .slice(0, 4)
    .map(([k, e]) => `${k.slice(7) || '(anonymous)'} ${(e.size / 2 ** 20).toFixed(1)} MiB (${formatCount(e.count)})`);
  return {
    title: `Where the memory goes: the daemon at ${n === 0 ? 'idle' : `${formatCount(n)} × ${ENDPOINTS}`} `,
    description: `The same daemon at the end of its run above (RSS ${mib(b.rssMiB)}): its RSS by mapping (/proc/<pid>/smaps), and its live JS heap from a heap snapshot (--heapsnapshot-signal), by kind.`,
    columns: [{ title: 'part' }, { title: 'RSS / size', align: 'right' }],
    rows,
    notes: [`Largest object kinds: ${top.join(', ')}.`],
  };
}
