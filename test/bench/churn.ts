// Steady at scale under churn: the real daemon (bin/kube-proxy-ts.js with the package's V8
// flags, each mode in turn, --min-sync-period 1s as upstream's default) against the test API
// server holding N Services × 10 endpoints, fed EndpointSlice updates in one batch a second
// for a while, then left alone. Measured:
//
//   CPU          the daemon's utime + stime over the churn (/proc/<pid>/stat), in cores
//   RSS          VmRSS every CHURN_SAMPLE_S: before the churn (steady), during, and after it
//   syncs        every sync the daemon logs (--v=2 'Synced proxy rules'): the longest after
//                the first, how many were full
//   latency      kubeproxy_network_programming_duration_seconds (our histogram, fed by the
//                slices' last-change-trigger-time annotation: the mean exactly, p50/p99 as the
//                bucket they fall in) and with packets: every CHURN_PROBE_S the batch also moves
//                Service 0's endpoints to the other pod, timed from the API write to the first
//                answer from that pod in the client namespace
//
// Knobs (environment): CHURN_SIZES (default 1000,10000; --quick 1000), CHURN_RATES (updates per
// second, default 10,100,1000; --quick 100), CHURN_SECONDS (default 60; --quick 10; 600 for the
// long run), CHURN_AFTER_SECONDS (RSS after the churn, default 60; --quick 5), CHURN_SAMPLE_S
// (default 5), CHURN_PROBE_S (default 2), CHURN_FULL_SYNC_PERIOD (the daemon's
// KUBE_PROXY_TS_FULL_SYNC_PERIOD, e.g. 20s to put a full sync inside the churn), CHURN_MODES
// (default nftables,iptables,userspace,ipvs; --quick nftables), CHURN_IPVS_SIZES (default
// 1000: IPVS mode runs in one QEMU boot of Debian's kernel, this machine's has no IPVS, and
// software emulation is many times slower), CHURN_LOG (a path prefix: the daemon's log is
// written to PREFIX-MODE-N-RATE.log). Inside the VM CHURN_JSON names the file the runs go to.

import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import type { Cluster } from '../helpers/cluster.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { BIN, spawnDaemon } from '../helpers/daemon-process.ts';
import { clusterIP } from './e2e-agent.ts';
import { smapsByMapping } from './heap-summary.ts';
import { cluster, cpuMsOf, daemonArgs, memoryOf, podAddrs } from './e2e.ts';
import type { Figure, Mode } from './figures.ts';
import { MODES as FIGURE_MODES, OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, percentile } from './stats.ts';

const AGENT = new URL('./e2e-agent.ts', import.meta.url).href;
const ENDPOINTS = 10;
const BATCH_MS = 1000;
const MODES = ['nftables', 'iptables', 'userspace', 'ipvs'];

interface Knobs {
  sizes: number[];
  rates: number[];
  seconds: number;
  afterSeconds: number;
  sampleS: number;
  probeS: number;
  fullSyncPeriod: string | undefined;
  modes: string[];
  ipvsSizes: number[];
}

interface Run {
  mode: string;
  n: number;
  rate: number;
  seconds: number;
  updates: number;
  cores: number;
  steadyMiB: number;
  peakDuringMiB: number;
  endMiB: number;
  afterMiB: number;
  /** Where the RSS is (smaps): malloc heap and anonymous mappings (V8's heap), at the churn's end and after. */
  where: { end: [number, number]; after: [number, number] };
  /** [seconds since the churn began, MiB] */
  rss: [number, number][];
  longestSyncMs: number;
  longestFull: boolean;
  syncs: number;
  fullSyncs: number;
  /** How long the oldest change of each sync waited for it to start (runner's waitedMs), ms. */
  waits: number[];
  histogram: { count: number; meanMs: number; p50: string; p99: string };
  packets: number[];
  lost: number;
}

function knobs(quick: boolean): Knobs {
  const list = (name: string, dflt: string): number[] =>
    (process.env[name] ?? dflt).split(',').map((x) => {
      const v = Number(x);
      if (!(v > 0)) throw new Error(`${name}: "${x}" is not a positive number`);
      return v;
    });
  const num = (name: string, dflt: number): number => {
    const v = Number(process.env[name] ?? dflt);
    if (!(v > 0)) throw new Error(`${name} must be a positive number of seconds`);
    return v;
  };
  return {
    sizes: list('CHURN_SIZES', quick ? '1000' : '1000,10000'),
    rates: list('CHURN_RATES', quick ? '100' : '10,100,1000'),
    seconds: num('CHURN_SECONDS', quick ? 10 : 60),
    afterSeconds: num('CHURN_AFTER_SECONDS', quick ? 5 : 60),
    sampleS: num('CHURN_SAMPLE_S', 5),
    probeS: num('CHURN_PROBE_S', 2),
    fullSyncPeriod: process.env['CHURN_FULL_SYNC_PERIOD'],
    ipvsSizes: list('CHURN_IPVS_SIZES', '1000'),
    modes: (process.env['CHURN_MODES'] ?? (quick ? 'nftables' : MODES.join(','))).split(',').map((m) => {
      if (!MODES.includes(m)) throw new Error(`CHURN_MODES: "${m}" is not one of ${MODES.join(', ')}`);
      return m;
    }),
  };
}

/** [malloc heap, anonymous] MiB of a process (/proc/<pid>/smaps). */
async function whereOf(pid: number): Promise<[number, number]> {
  const maps = smapsByMapping(await readFile(`/proc/${pid}/smaps`, 'utf8'));
  const mib = (name: string): number => (maps.find(([m]) => m === name)?.[1] ?? 0) / 1024;
  return [mib('[heap]'), mib('[anon]')];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const wallNow = (): number => performance.timeOrigin + performance.now();

/**
 * Every 'Synced proxy rules' line of a text log: full or not, its duration, and how long the
 * oldest change it answered waited for it to start (the runner's waitedMs; 0 when not logged).
 */
export function syncsOf(log: string): { full: boolean; ms: number; waitedMs: number }[] {
  const out: { full: boolean; ms: number; waitedMs: number }[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('Synced proxy rules')) continue;
    const full = /\bfull=(true|false)\b/.exec(line);
    const ms = /\bms=(\d+(?:\.\d+)?)\b/.exec(line);
    const waited = /\bwaitedMs=(\d+(?:\.\d+)?)\b/.exec(line);
    if (full && ms) out.push({ full: full[1] === 'true', ms: Number(ms[1]), waitedMs: Number(waited?.[1] ?? 0) });
  }
  return out;
}

/** The network-programming histogram (IPv4) of a /metrics text: cumulative counts by bucket bound, sum, count. */
export function histogramOf(text: string): { buckets: [number, number][]; sum: number; count: number } {
  const name = 'kubeproxy_network_programming_duration_seconds';
  const buckets: [number, number][] = [];
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes('ip_family="IPv4"')) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const le = /le="([^"]+)"/.exec(line);
    if (line.startsWith(`${name}_bucket`) && le) buckets.push([le[1] === '+Inf' ? Infinity : Number(le[1]), value]);
    else if (line.startsWith(`${name}_sum`)) sum = value;
    else if (line.startsWith(`${name}_count`)) count = value;
  }
  return { buckets, sum, count };
}

/** The bucket a quantile of the difference of two histograms falls in, as "≤ 250 ms". */
export function bucketOf(before: [number, number][], after: [number, number][], q: number): string {
  const total = (after.at(-1)?.[1] ?? 0) - (before.at(-1)?.[1] ?? 0);
  if (total <= 0) return '-';
  for (let i = 0; i < after.length; i++) {
    const [le, n] = after[i]!;
    if (n - (before[i]?.[1] ?? 0) >= q * total) return le === Infinity ? '> last bucket' : `≤ ${formatMs(le * 1000)}`;
  }
  return '-';
}

/** The churn: one batch a second, every probeS a timed move of Service 0; RSS sampled meanwhile. */
async function churn(
  c: Cluster,
  d: DaemonProcess,
  k: Knobs,
  rate: number,
): Promise<{ updates: number; rss: [number, number][]; packets: number[]; lost: number }> {
  const t0 = performance.now();
  const rss: [number, number][] = [];
  const probes: Promise<void>[] = [];
  const packets: number[] = [];
  let lost = 0;
  let updates = 0;
  let nextSample = 0;
  let nextProbe = k.probeS * 1000;
  let to = 0;
  for (let b = 0; (b * BATCH_MS) / 1000 < k.seconds; b++) {
    const ahead = t0 + b * BATCH_MS - performance.now();
    if (ahead > 0) await sleep(ahead);
    const elapsed = performance.now() - t0;
    const probe = elapsed >= nextProbe && probes.length < 10_000;
    if (probe) {
      nextProbe += k.probeS * 1000;
      to = 1 - to;
    }
    const wrote = await c.nodeAgent.call<number>(AGENT, 'churnBatch', rate, probe ? to : -1);
    updates += rate;
    if (probe) {
      // A probe gets a second less than the time to the next one, so they never overlap.
      const limit = Math.max(500, k.probeS * 1000 - 500);
      probes.push(
        c.clientAgent
          .call<number | undefined>(AGENT, 'firstAnswer', clusterIP(0), 80, `pod${to + 1}`, limit)
          .then((at) => (at === undefined ? void lost++ : void packets.push(at - wrote))),
      );
    }
    if (elapsed >= nextSample) {
      nextSample += k.sampleS * 1000;
      rss.push([elapsed / 1000, (await memoryOf(d.pid)).rss]);
    }
  }
  await Promise.all(probes);
  return { updates, rss, packets, lost };
}

async function measure(mode: string, n: number, rate: number, k: Knobs, opts: BenchOptions): Promise<Run> {
  const c = await cluster();
  let d: DaemonProcess | undefined;
  try {
    const api = c.nodeAgent;
    const { url } = await api.call<{ url: string }>(AGENT, 'startApi', n, ENDPOINTS, [podAddrs(0), podAddrs(1)]);
    const args = daemonArgs(url).map((a) => (a === 'nftables' ? mode : a));
    d = spawnDaemon(c.node, [...args, '--v', '2'], {
      command: [process.execPath, ...DAEMON_V8_OPTIONS, BIN],
      ...(k.fullSyncPeriod ? { env: { KUBE_PROXY_TS_FULL_SYNC_PERIOD: k.fullSyncPeriod } } : {}),
    });
    // Under QEMU's software emulation the daemon's start alone (Node loading its modules over 9p) takes minutes.
    const limit = (process.env['CHURN_JSON'] !== undefined ? 600_000 : 120_000) + 5 * n;
    const last = await c.clientAgent.call<number | undefined>(
      AGENT,
      'firstAnswer',
      clusterIP(n - 1),
      80,
      'pod1',
      limit,
    );
    if (last === undefined) throw new Error(`the daemon did not program ${n} Services:\n${d.log().slice(-3000)}`);
    // Settled: the collection after the first full sync (heap.ts) and V8's own.
    await sleep(5000 + n / 5);
    const steadyMiB = (await memoryOf(d.pid)).rss;
    const syncsBefore = syncsOf(d.log()).length;
    // A daemon busy in a long sync (or emulated) answers slowly; a minute, not the agent's 10 s.
    const histBefore = histogramOf(await api.call<string>(AGENT, 'metricsText', 60_000));
    const cpu0 = await cpuMsOf(d.pid);
    const w0 = wallNow();
    opts.log(
      `churn: ${mode} ${formatCount(n)} × ${ENDPOINTS}, ${rate}/s for ${k.seconds} s (steady RSS ${steadyMiB.toFixed(0)} MiB)`,
    );
    const ch = await churn(c, d, k, rate);
    const cores = (await cpuMsOf(d.pid)) - cpu0;
    const wall = wallNow() - w0;
    const histAfter = histogramOf(await api.call<string>(AGENT, 'metricsText', 60_000));
    const endMiB = (await memoryOf(d.pid)).rss;
    const whereEnd = await whereOf(d.pid);
    const after: [number, number][] = [];
    for (let s = 0; s < k.afterSeconds; s += k.sampleS) {
      await sleep(Math.min(k.sampleS, k.afterSeconds - s) * 1000);
      after.push([k.seconds + Math.min(s + k.sampleS, k.afterSeconds), (await memoryOf(d.pid)).rss]);
    }
    const whereAfter = await whereOf(d.pid);
    const syncs = syncsOf(d.log()).slice(syncsBefore);
    const longest = syncs.reduce((a, b) => (b.ms > a.ms ? b : a), { full: false, ms: 0 });
    const dCount = histAfter.count - histBefore.count;
    const within = (h: typeof histBefore) => h.buckets.find(([le]) => le === 0.25)?.[1] ?? 0;
    opts.log(
      `churn: changes whose programming took over 250 ms (our histogram): ${formatCount(dCount - (within(histAfter) - within(histBefore)))} of ${formatCount(dCount)}`,
    );
    return {
      mode,
      n,
      rate,
      seconds: k.seconds,
      updates: ch.updates,
      cores: cores / wall,
      steadyMiB,
      peakDuringMiB: Math.max(endMiB, ...ch.rss.map((x) => x[1])),
      endMiB,
      afterMiB: after.at(-1)?.[1] ?? endMiB,
      where: { end: whereEnd, after: whereAfter },
      rss: [...ch.rss, [k.seconds, endMiB], ...after],
      longestSyncMs: longest.ms,
      longestFull: longest.full,
      syncs: syncs.length,
      fullSyncs: syncs.filter((s) => s.full).length,
      waits: syncs.map((s) => s.waitedMs),
      histogram: {
        count: dCount,
        meanMs: dCount > 0 ? ((histAfter.sum - histBefore.sum) / dCount) * 1000 : NaN,
        p50: bucketOf(histBefore.buckets, histAfter.buckets, 0.5),
        p99: bucketOf(histBefore.buckets, histAfter.buckets, 0.99),
      },
      packets: ch.packets,
      lost: ch.lost,
    };
  } finally {
    const logTo = process.env['CHURN_LOG'];
    if (logTo && d) await writeFile(`${logTo}-${mode}-${n}-${rate}.log`, d.log());
    await d?.kill();
    await c.destroy();
  }
}

/**
 * IPVS mode: the same runs inside one QEMU boot of Debian's kernel (test/vm/harness.ts), at
 * CHURN_IPVS_SIZES; the VM writes its runs to a JSON file after each, so a time-out keeps
 * what was measured.
 */
async function ipvsInVm(k: Knobs, opts: BenchOptions): Promise<Run[]> {
  const { VM_CACHE, runInVm } = await import('../vm/harness.ts');
  const dir = join(VM_CACHE, 'bench-churn', `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`);
  await mkdir(dir, { recursive: true });
  const out = join(dir, 'runs.json');
  const env = {
    CHURN_JSON: out,
    CHURN_MODES: 'ipvs',
    CHURN_SIZES: k.ipvsSizes.join(','),
    CHURN_RATES: k.rates.join(','),
    CHURN_SECONDS: String(k.seconds),
    CHURN_AFTER_SECONDS: String(k.afterSeconds),
    CHURN_SAMPLE_S: String(k.sampleS),
    CHURN_PROBE_S: String(k.probeS),
    ...(k.fullSyncPeriod ? { CHURN_FULL_SYNC_PERIOD: k.fullSyncPeriod } : {}),
    ...(process.env['CHURN_LOG'] ? { CHURN_LOG: process.env['CHURN_LOG'] } : {}),
  };
  const assignments = Object.entries(env)
    .map(([key, v]) => `${key}='${v}'`)
    .join(' ');
  const perRun = (k.seconds + k.afterSeconds) * 1000 + 600_000;
  opts.log(`churn: ipvs in QEMU, ${k.ipvsSizes.map(formatCount).join(', ')} × ${ENDPOINTS}, results in ${out}`);
  const vm = await runInVm({
    script: `${assignments} exec ./node_modules/.bin/node test/bench/run.ts churn --out '${join(dir, 'churn.md')}'\n`,
    timeoutMs: 300_000 + perRun * k.ipvsSizes.length * k.rates.length,
    memoryMb: 3072,
    tcgThread: 'single',
  });
  opts.log(`churn: ipvs VM ${vm.timedOut ? 'TIMED OUT' : `status ${vm.status}`} after ${formatMs(vm.totalMs)}`);
  const runs = JSON.parse(await readFile(out, 'utf8').catch(() => '[]')) as Run[];
  if (vm.status !== 0 || runs.length === 0) opts.log(`churn: ipvs payload output:\n${vm.output.slice(-3000)}`);
  for (const r of runs) opts.log(`churn: ${row(r).join(' | ')}`);
  return runs;
}

const mib = (x: number): string => `${x.toFixed(0)} MiB`;

/** How long changes waited for their sync to start: p50 / p99 / max of the runner's waitedMs. */
function waitLine(r: Run): string {
  const w = r.waits;
  if (w.length === 0) return 'change → sync start: -';
  return `change → sync start p50 / p99 / max: ${formatMs(percentile(w, 50))} / ${formatMs(percentile(w, 99))} / ${formatMs(Math.max(...w))} (${w.length} syncs)`;
}

function row(r: Run): string[] {
  const p = r.packets;
  return [
    r.mode,
    `${formatCount(r.n)} × ${ENDPOINTS}`,
    `${formatCount(r.rate)}/s`,
    `${r.seconds} s`,
    `${(r.cores * 100).toFixed(1)} %`,
    `${formatMs(r.longestSyncMs)}${r.longestFull ? ' (full)' : ''}`,
    `${r.syncs} / ${r.fullSyncs}`,
    r.histogram.count > 0
      ? `${formatMs(r.histogram.meanMs)} / ${r.histogram.p50} / ${r.histogram.p99} (${formatCount(r.histogram.count)})`
      : '-',
    p.length > 0
      ? `${formatMs(percentile(p, 50))} / ${formatMs(percentile(p, 99))} (${p.length}${r.lost > 0 ? `, ${r.lost} unanswered` : ''})`
      : `- (${r.lost} unanswered)`,
    `${mib(r.steadyMiB)} / ${mib(r.peakDuringMiB)} / ${mib(r.afterMiB)} (${(r.afterMiB / r.steadyMiB).toFixed(2)}×)`,
  ];
}

function targets(runs: readonly Run[]): Target[] {
  return runs.filter((x) => x.n === 10_000 && x.rate === 100).flatMap(targetsOf);
}

function targetsOf(r: Run): Target[] {
  const p99 = r.packets.length > 0 ? percentile(r.packets, 99) : NaN;
  const what = `#33 ${r.mode} 10,000 × 10 at 100/s for ${r.seconds} s`;
  const status = (ok: boolean): 'met' | 'missed' => (ok ? 'met' : 'missed');
  return [
    {
      what: `${what}: longest sync after the first`,
      target: '≤ 250 ms',
      status: status(r.longestSyncMs <= 250),
      detail: formatMs(r.longestSyncMs),
    },
    {
      what: `${what}: change latency p99 (packets)`,
      target: '≤ 100 ms',
      status: status(p99 <= 100 && r.lost === 0),
      detail:
        r.packets.length > 0
          ? `${formatMs(p99)} over ${r.packets.length} moves${r.lost > 0 ? `, ${r.lost} unanswered` : ''}`
          : `no move answered within the probe's wait (${r.lost} unanswered)`,
    },
    {
      what: `${what}: daemon CPU`,
      target: '≤ 5 % of a core',
      status: status(r.cores <= 0.05),
      detail: `${(r.cores * 100).toFixed(1)} %`,
    },
    {
      what: `${what}: RSS ${r.rss.at(-1)![0] - r.seconds} s after the churn`,
      target: '≤ 1.2 × steady',
      status: status(r.afterMiB <= 1.2 * r.steadyMiB),
      detail: `${mib(r.afterMiB)} vs ${mib(r.steadyMiB)} steady`,
    },
  ];
}

/** The summary's figures: daemon CPU and the packets' p99 at one size and rate. */
function churnFigures(r: Run, mode: string): Figure[] {
  if (!(FIGURE_MODES as readonly string[]).includes(mode)) return [];
  const at = {
    mode: mode as Mode,
    series: OURS,
    services: r.n,
    endpoints: ENDPOINTS,
    rate: r.rate,
    variant: `${r.rate}/s`,
  };
  return [
    ...figure({ ...at, metric: 'churnCpu', value: r.cores, unit: 'cores' }),
    ...figure({ ...at, metric: 'churnP99', value: r.packets.length ? percentile(r.packets, 99) : NaN, unit: 'ms' }),
  ];
}

export const bench: Bench = {
  needsRoot: true,
  async run(opts: BenchOptions): Promise<Section[]> {
    const k = knobs(opts.quick);
    const runs: Run[] = [];
    const inVm = process.env['CHURN_JSON'] !== undefined;
    for (const mode of k.modes) {
      if (mode === 'ipvs' && !inVm) {
        runs.push(...(await ipvsInVm(k, opts)));
        continue;
      }
      for (const n of k.sizes) {
        for (const rate of k.rates) {
          const r = await measure(mode, n, rate, k, opts);
          opts.log(`churn: ${row(r).join(' | ')}`);
          opts.log(`churn: ${waitLine(r)}`);
          opts.log(`churn: RSS (s, MiB): ${r.rss.map(([s, m]) => `${s.toFixed(0)}s ${m.toFixed(0)}`).join(', ')}`);
          runs.push(r);
          if (inVm) await writeFile(process.env['CHURN_JSON']!, JSON.stringify(runs));
        }
      }
    }
    return [
      {
        title: 'Churn: steady at scale under EndpointSlice updates',
        description: `The real daemon (each mode: ${k.modes.join(', ')}; IPVS mode in one QEMU boot of Debian's kernel at ${k.ipvsSizes.map(formatCount).join(', ')} × ${ENDPOINTS}, under software emulation: compare its rows with each other only; the package's V8 flags, --min-sync-period 1s, --v=2 for its sync log) against test/helpers/fake-apiserver.ts holding N Services × ${ENDPOINTS} endpoints; endpoint updates of random Services in one batch a second for the time given, every ${k.probeS} s with a move of Service 0's endpoints to the other pod timed with packets (API write → first answer from the new pod, client namespace); then ${k.afterSeconds} s without changes.${k.fullSyncPeriod ? ` Full-sync period shortened to ${k.fullSyncPeriod}.` : ' Full-sync period the default hour.'} CPU: the daemon's utime+stime over the churn / its wall time. Syncs: after the first (all / full). Histogram: kubeproxy_network_programming_duration_seconds over the churn, mean / p50 / p99 (the buckets are upstream's: 0, 0.25 s, 0.5 s, 1 s, …). RSS: steady before / peak during / ${k.afterSeconds} s after.`,
        columns: [
          { title: 'mode' },
          { title: 'size' },
          { title: 'updates', align: 'right' },
          { title: 'for', align: 'right' },
          { title: 'CPU (of a core)', align: 'right' },
          { title: 'longest sync', align: 'right' },
          { title: 'syncs / full', align: 'right' },
          { title: 'histogram mean / p50 / p99 (n)', align: 'right' },
          { title: 'packets p50 / p99 (n)', align: 'right' },
          { title: 'RSS steady / peak / after', align: 'right' },
        ],
        rows: runs.map(row),
        notes: runs.map(
          (r) =>
            `${r.mode} ${formatCount(r.n)} at ${r.rate}/s, ${waitLine(r)}; RSS over time (s: MiB): ${r.rss.map(([s, m]) => `${s.toFixed(0)}: ${m.toFixed(0)}`).join(', ')}; of it malloc / anonymous (V8's heap): ${r.where.end.map(mib).join(' / ')} at the churn's end, ${r.where.after.map(mib).join(' / ')} after.`,
        ),
        targets: targets(runs),
        figures: runs.flatMap((r) => churnFigures(r, r.mode)),
      },
    ];
  },
};
