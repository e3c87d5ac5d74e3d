// nftables benchmark (issue 4): kube-proxy-ts's nftables proxier side by side with the exec
// approach upstream kube-proxy uses, in one run, in throwaway network namespaces only.
//
// For N Services × 10 endpoints (N = 1,000 / 5,000 / 10,000, and the stretch size 50,000 for
// ours only; --quick: 200 / 1,000):
//   ours  — ChangeTracker fed every Service and EndpointSlice, checked out, NftablesProxier
//           full sync from empty over nfnetlink, in a node-namespace agent (model, plan and
//           kernel time apart; every nfnetlink batch timed); then one endpoint added to one
//           Service, repeated; the agent's RSS; first-packet TCP connect latency from a
//           client namespace to the first and the last Service programmed.
//   (a)   — the same transactions as text (NftTransaction.toString(), captured from a FakeNft
//           run of the same workload) through `nft -f -` into an empty namespace.
//   (b)   — an upstream-shaped ruleset (nftables-upstream.ts) through `nft -f -`.
// Each `nft` is timed from outside, process start-up (and `ip netns exec`'s) included.
//
// Needs root. In the suite: npm run bench -- nftables [--quick]. Alone: node test/bench/nftables.ts [--quick]

import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { FakeNft } from '../../src/netlink/nftables/fake/index.ts';
import { TABLE } from '../../src/proxier/nftables/index.ts';
import { BACKEND_PORT, makeCluster } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { Netns } from '../helpers/netns.ts';
import type { Batch, ChangeResult, FullSyncResult } from './nftables-workload.ts';
import { clusterIP, ENDPOINTS, endpointIP, Harness, SERVICE_PORT } from './nftables-workload.ts';
import type { Memory } from './nftables-agent.ts';
import { UPSTREAM_TABLE, upstreamChangeText, upstreamFullText } from './nftables-upstream.ts';
import type { Figure } from './figures.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import type { Summary } from './stats.ts';
import { formatCount, formatMs, formatRatio, formatSpread, summarize } from './stats.ts';
import { settle } from './settle.ts';

const AGENT = new URL('./nftables-agent.ts', import.meta.url).href;
/** Bound on any one `nft -f` (upstream-shaped 10,000 × 10 took 145–174 s in earlier runs here). */
const NFT_TIMEOUT_MS = 300_000;
const MiB = 2 ** 20;

interface Config {
  sizes: number[];
  /** Full syncs of ours per size (each in a fresh namespace). */
  fullRepeats: (n: number) => number;
  changes: number;
  /** (b)'s one-endpoint changes per size (each is a whole `nft -f` of the Service). */
  upstreamChanges: number;
  /** (a) full loads per size. */
  execRepeats: (n: number) => number;
  connects: number;
  /** Largest size at which (b)'s full load is attempted (the 10,000 one runs once, bounded). */
  upstreamMax: number;
  /** Largest size at which (a) runs (above it only ours: the issue's stretch size). */
  execAMax: number;
}

const FULL: Config = {
  sizes: [1_000, 5_000, 10_000, 50_000],
  // Ours is cheap up to 10,000 (seconds): 5 runs give medians with a spread; 50,000 runs once.
  fullRepeats: (n) => (n <= 10_000 ? 5 : 1),
  changes: 20,
  upstreamChanges: 5,
  execRepeats: (n) => (n <= 1_000 ? 3 : 1),
  connects: 200,
  upstreamMax: 10_000,
  execAMax: 10_000,
};
const QUICK: Config = {
  sizes: [200, 1_000],
  fullRepeats: () => 1,
  changes: 5,
  upstreamChanges: 2,
  execRepeats: () => 1,
  connects: 30,
  upstreamMax: 1_000,
  execAMax: 1_000,
};

interface ExecRun {
  ms: number;
  /** Killed at NFT_TIMEOUT_MS. */
  timedOut: boolean;
}

interface SizeResult {
  n: number;
  ours: FullSyncResult[];
  changes: ChangeResult[];
  memory: { idle: Memory; afterFull: Memory; afterChanges: Memory };
  latency: { first: number[]; last: number[]; direct: number[] };
  textBytes: { full: number; change: number };
  textLines: number;
  execA: ExecRun[];
  execAChanges: number[];
  execB: ExecRun | undefined;
  execBChanges: number[];
  upstreamBytes: number;
}

async function nftLoad(ns: Netns, text: string, what: string): Promise<ExecRun> {
  const t0 = performance.now();
  const r = await ns.exec('nft', ['-f', '-'], { input: text, timeoutMs: NFT_TIMEOUT_MS });
  const ms = performance.now() - t0;
  if (r.code !== 0) {
    if (ms >= NFT_TIMEOUT_MS - 1_000) return { ms, timedOut: true };
    throw new Error(
      `nft -f (${what}) exited ${r.code}: ${r.stderr.trim().split('\n').slice(0, 3).join(' / ').slice(0, 400)}`,
    );
  }
  return { ms, timedOut: false };
}

/** Chains of one ip table (`nft list chains` takes a family only in nft 1.0.6). */
async function chainCount(ns: Netns, table: string): Promise<number> {
  const out = await ns.run('nft', 'list', 'chains', 'ip');
  let inTable = false;
  let count = 0;
  for (const l of out.split('\n')) {
    const t = /^table ip (\S+) \{/.exec(l);
    if (t) inTable = t[1] === table || t[1] === `"${table}"`;
    else if (inTable && /^\s+chain /.test(l)) count++;
  }
  return count;
}

/** A throwaway namespace cluster; makeCluster wants a test's teardown, this collects it. */
async function cluster(label: string): Promise<Cluster> {
  let destroy: (() => Promise<void>) | undefined;
  try {
    return await makeCluster({ teardown: (fn) => void (destroy = fn) }, label, 1, DAEMON_V8_OPTIONS);
  } catch (e) {
    await destroy?.();
    throw e;
  }
}

/** Before each of our measurements: the kernel's clean-up of earlier namespaces done (settle.ts). */
async function quiet(log: (s: string) => void): Promise<void> {
  const r = await settle();
  if (r.ms > 1000 || !r.quiet)
    log(
      `nftables: waited ${formatMs(r.ms)} for the CPUs to go quiet${r.quiet ? '' : ` (still ${(r.busy * 100).toFixed(0)} % busy: other work)`}`,
    );
}

/** ours, (a) and (b) at one size. */
async function measureSize(n: number, cfg: Config, log: (s: string) => void): Promise<SizeResult> {
  const size = `${formatCount(n)} × ${ENDPOINTS}`;
  const ours: FullSyncResult[] = [];
  // Extra full syncs first, each in a namespace of its own.
  for (let rep = 1; rep < cfg.fullRepeats(n); rep++) {
    const ns = await Netns.create('nftb-rep');
    try {
      const a = await ns.agent(DAEMON_V8_OPTIONS);
      await a.call(AGENT, 'start', n);
      await quiet(log);
      log(`nftables: ${size}, ours full sync ${rep}/${cfg.fullRepeats(n)}`);
      ours.push(await a.call<FullSyncResult>(AGENT, 'fullSync'));
    } finally {
      await ns.destroy();
    }
  }

  // The main run, in a cluster: full sync, changes, memory, first-packet latency.
  const c = await cluster('nftb');
  let maxBatchBytes: number | undefined;
  let changes: ChangeResult[];
  let memory: SizeResult['memory'];
  let latency: SizeResult['latency'];
  try {
    const a = c.nodeAgent;
    const idle = await a.call<Memory>(AGENT, 'memory');
    maxBatchBytes = await a.call<number>(AGENT, 'start', n);
    await quiet(log);
    log(`nftables: ${size}, ours full sync ${cfg.fullRepeats(n)}/${cfg.fullRepeats(n)}`);
    const full = await a.call<FullSyncResult>(AGENT, 'fullSync');
    ours.push(full);
    log(
      `nftables: ${size}, ours full sync ${formatMs(full.totalMs)} (model ${formatMs(full.modelMs)}, plan ${formatMs(full.planMs)}, kernel ${formatMs(full.kernelMs)}, ${full.batches.length} batch(es))`,
    );
    const afterFull = await a.call<Memory>(AGENT, 'memory');
    await quiet(log);
    changes = [];
    for (let r = 0; r < cfg.changes; r++) changes.push(await a.call<ChangeResult>(AGENT, 'change', r));
    const afterChanges = await a.call<Memory>(AGENT, 'memory');
    memory = { idle, afterFull, afterChanges };
    log(
      `nftables: ${size}, ${cfg.changes} one-endpoint changes, median ${formatMs(summarize(changes.map((x) => x.totalMs)).median)}; RSS ${(afterChanges.rssBytes / MiB).toFixed(0)} MiB`,
    );

    // Backends: the endpoints of the first and the last Service live on the one pod.
    const pod = c.pods[0]!;
    for (const i of [0, n - 1])
      for (let e = 0; e < ENDPOINTS; e++) await pod.run('ip', 'addr', 'add', `${endpointIP(i, e)}/32`, 'dev', 'eth0');
    await c.node.run('ip', 'route', 'add', '100.64.0.0/10', 'dev', 'pod1');
    log(`nftables: ${size}, first-packet latency, ${cfg.connects} connects per target`);
    const [first, last, direct] = await c.clientAgent.call<number[][]>(
      AGENT,
      'connectLatency',
      [
        { host: clusterIP(0), port: SERVICE_PORT },
        { host: clusterIP(n - 1), port: SERVICE_PORT },
        { host: endpointIP(0, 0), port: BACKEND_PORT },
      ],
      cfg.connects,
    );
    // Kept in ms, like every other figure (the formatting picks µs).
    const ms = (us: readonly number[]): number[] => us.map((u) => u / 1000);
    latency = { first: ms(first!), last: ms(last!), direct: ms(direct!) };
  } finally {
    await c.destroy();
  }

  const execA: ExecRun[] = [];
  const execAChanges: number[] = [];
  let fullText = '';
  let changeTexts: string[] = [];
  let textLines = 0;
  if (n <= cfg.execAMax) {
    // The same workload against FakeNft: the transactions as `nft -f` text.
    const h = new Harness(new FakeNft({ family: 'ip', table: TABLE }), n, {
      keepTransactions: true,
      ...(maxBatchBytes !== undefined ? { maxBatchBytes } : {}),
    });
    await h.fullSync();
    fullText = h.transactions.map((tx) => tx.toString()).join('');
    const fullTxs = h.transactions.length;
    for (let r = 0; r < cfg.changes; r++) await h.change(r);
    changeTexts = h.transactions.slice(fullTxs).map((tx) => tx.toString());
    textLines = fullText.split('\n').length - 1;

    // (a): our ruleset as text.
    for (let rep = 0; rep < cfg.execRepeats(n); rep++) {
      const ns = await Netns.create('nftb-a');
      try {
        log(
          `nftables: ${size}, (a) our ruleset through nft -f, ${formatCount(textLines)} lines, run ${rep + 1}/${cfg.execRepeats(n)}`,
        );
        const run = await nftLoad(ns, fullText, `our ruleset, ${size}`);
        execA.push(run);
        if (run.timedOut) break;
        if (rep === 0) {
          const chains = await chainCount(ns, TABLE);
          const expected = fullText.split('\n').filter((l) => l.startsWith(`add chain ip ${TABLE} `)).length;
          if (chains !== expected) throw new Error(`(a) loaded ${chains} chains, the text adds ${expected}`);
          for (const t of changeTexts) execAChanges.push((await nftLoad(ns, t, `our one-endpoint change, ${size}`)).ms);
        }
      } finally {
        await ns.destroy();
      }
    }
  }

  // (b): upstream-shaped ruleset.
  let execB: ExecRun | undefined;
  const execBChanges: number[] = [];
  const upText = n <= cfg.upstreamMax ? upstreamFullText(n) : '';
  if (n <= cfg.upstreamMax) {
    const ns = await Netns.create('nftb-b');
    try {
      log(`nftables: ${size}, (b) upstream-shaped ruleset through nft -f (bounded at ${formatMs(NFT_TIMEOUT_MS)})`);
      execB = await nftLoad(ns, upText, `upstream-shaped, ${size}`);
      log(`nftables: ${size}, (b) ${execB.timedOut ? `> ${formatMs(NFT_TIMEOUT_MS)}` : formatMs(execB.ms)}`);
      if (!execB.timedOut) {
        const chains = await chainCount(ns, UPSTREAM_TABLE);
        if (chains < n * (ENDPOINTS + 1))
          throw new Error(`(b) loaded ${chains} chains, expected at least ${n * (ENDPOINTS + 1)}`);
        const added = new Map<number, string[]>();
        for (let r = 0; r < cfg.upstreamChanges; r++)
          execBChanges.push((await nftLoad(ns, upstreamChangeText(n, r, added), `upstream-shaped change, ${size}`)).ms);
      }
    } finally {
      await ns.destroy();
    }
  }
  return {
    n,
    ours,
    changes,
    memory,
    latency,
    textBytes: {
      full: Buffer.byteLength(fullText),
      change: changeTexts.length ? summarize(changeTexts.map((t) => Buffer.byteLength(t))).median : 0,
    },
    textLines,
    execA,
    execAChanges,
    execB,
    execBChanges,
    upstreamBytes: Buffer.byteLength(upText),
  };
}

const mib = (b: number): string => `${(b / MiB).toFixed(0)} MiB`;
/** Text and batch sizes: KiB below 1 MiB, MiB with one decimal above. */
const bytes = (b: number): string => (b < MiB ? `${Math.round(b / 1024)} KiB` : `${(b / MiB).toFixed(1)} MiB`);
const med = (xs: readonly number[]): number => summarize(xs).median;
/** Time in batch round trips (send to last ACK), NaN when the agent could not attribute them. */
const roundTripMs = (batches: readonly Batch[]): number =>
  batches.every((b) => b.kernelOnlyMs !== undefined) ? batches.reduce((a, b) => a + b.kernelOnlyMs!, 0) : Number.NaN;
const rtCell = (xs: readonly number[]): string =>
  xs.some((x) => Number.isNaN(x)) ? 'not attributed' : cellSummary(summarize(xs));
const cellSummary = (s: Summary, fmt: (x: number) => string = formatMs): string =>
  s.runs === 1 ? fmt(s.median) : `${fmt(s.median)} (${formatSpread(s)})`;
const execCell = (runs: readonly ExecRun[]): string => {
  if (runs.length === 0) return 'not run';
  if (runs.some((r) => r.timedOut)) return `> ${formatMs(NFT_TIMEOUT_MS)} (killed)`;
  return cellSummary(summarize(runs.map((r) => r.ms)));
};
const execMedian = (runs: readonly ExecRun[]): number =>
  runs.length === 0 ? Number.NaN : runs.some((r) => r.timedOut) ? Number.POSITIVE_INFINITY : med(runs.map((r) => r.ms));
/** "≥ 12×" when the exec side was killed at the bound. */
const ratioCell = (theirs: number, ours: number): string =>
  theirs === Number.POSITIVE_INFINITY ? `≥ ${formatRatio(NFT_TIMEOUT_MS, ours)}` : formatRatio(theirs, ours);

const EXEC_A = 'nft -f (our ruleset as text)';
const EXEC_B = 'nft -f (upstream-shaped ruleset)';

/** The summary's figures: full sync and one change, ours and both exec sides, per size. */
function nftFigures(results: readonly SizeResult[]): Figure[] {
  return results.flatMap((r) => {
    const at = { mode: 'nftables' as const, services: r.n, endpoints: ENDPOINTS, unit: 'ms' as const };
    const full = (series: string, value: number): Figure[] => figure({ ...at, metric: 'fullSync', series, value });
    const change = (series: string, xs: readonly number[]): Figure[] =>
      xs.length ? figure({ ...at, metric: 'oneChange', series, value: med(xs) }) : [];
    return [
      ...full(OURS, med(r.ours.map((o) => o.totalMs))),
      ...full(EXEC_A, execMedian(r.execA)),
      ...full(EXEC_B, r.execB ? execMedian([r.execB]) : Number.NaN),
      ...change(
        OURS,
        r.changes.map((c) => c.totalMs),
      ),
      ...change(EXEC_A, r.execAChanges),
      ...change(EXEC_B, r.execBChanges),
    ];
  });
}

function sections(results: SizeResult[], cfg: Config, quick: boolean): Section[] {
  const sizeOf = (n: number): string => `${formatCount(n)} × ${ENDPOINTS}`;
  const fullRows: string[][] = [];
  const changeRows: string[][] = [];
  const batchRows: string[][] = [];
  for (const r of results) {
    const total = summarize(r.ours.map((o) => o.totalMs));
    const execA = execMedian(r.execA);
    const execB = r.execB ? execMedian([r.execB]) : Number.NaN;
    fullRows.push([
      sizeOf(r.n),
      cellSummary(summarize(r.ours.map((o) => o.modelMs))),
      cellSummary(summarize(r.ours.map((o) => o.planMs))),
      cellSummary(summarize(r.ours.map((o) => o.kernelMs))),
      rtCell(r.ours.map((o) => roundTripMs(o.batches))),
      cellSummary(total),
      r.n <= cfg.execAMax
        ? `${execCell(r.execA)}; ${formatCount(r.textLines)} lines, ${bytes(r.textBytes.full)}`
        : `not run (above ${formatCount(cfg.execAMax)})`,
      r.execB ? `${execCell([r.execB])}; ${bytes(r.upstreamBytes)}` : `not run (above ${formatCount(cfg.upstreamMax)})`,
      Number.isNaN(execA) ? '—' : ratioCell(execA, total.median),
      Number.isNaN(execB) ? '—' : ratioCell(execB, total.median),
      formatCount(total.runs),
    ]);
    const ch = summarize(r.changes.map((c) => c.totalMs));
    const kernel = summarize(r.changes.map((c) => c.kernelMs));
    const a = r.execAChanges.length ? summarize(r.execAChanges) : undefined;
    const b = r.execBChanges.length ? summarize(r.execBChanges) : undefined;
    changeRows.push([
      sizeOf(r.n),
      cellSummary(summarize(r.changes.map((c) => c.modelMs))),
      cellSummary(summarize(r.changes.map((c) => c.planMs))),
      cellSummary(kernel),
      rtCell(r.changes.map((c) => roundTripMs(c.batches))),
      cellSummary(ch),
      a ? cellSummary(a) : 'not run',
      b ? cellSummary(b) : r.execB?.timedOut ? 'not run (full load killed)' : 'not run',
      a ? formatRatio(a.median, ch.median) : '—',
      b ? formatRatio(b.median, ch.median) : '—',
      `${formatCount(ch.runs)} / ${a ? formatCount(a.runs) : 0} / ${b ? formatCount(b.runs) : 0}`,
    ]);
    const main = r.ours[r.ours.length - 1]!;
    const longest = main.batches.reduce((x, y) => (y.ms > x.ms ? y : x), main.batches[0]!);
    batchRows.push([
      sizeOf(r.n),
      formatCount(main.batches.length),
      `${formatMs(longest.ms)}${longest.kernelOnlyMs !== undefined ? `, of which round trip ${formatMs(longest.kernelOnlyMs)}` : ''} (${formatCount(longest.messages)} messages, ${bytes(longest.bytes)})`,
      formatMs(main.kernelMs),
      cellSummary(summarize(r.changes.map((c) => Math.max(...c.batches.map((b) => b.ms))))),
    ]);
  }
  const largest = results[results.length - 1]!;
  /** The largest size whose changes were also rendered as (a)'s text (not the stretch size). */
  const withText = [...results].reverse().find((r) => r.textBytes.change > 0);
  const smallest = results[0]!;
  const lat = largest.latency;
  const latFirst = summarize(lat.first);
  const latLast = summarize(lat.last);
  const latRows = results.map((r) => {
    const f = summarize(r.latency.first);
    const l = summarize(r.latency.last);
    const d = summarize(r.latency.direct);
    return [
      `${formatCount(r.n)} Services`,
      cellSummary(f),
      cellSummary(l),
      `${((l.median / f.median - 1) * 100).toFixed(1)} %`,
      cellSummary(d),
      formatCount(f.runs),
    ];
  });
  const m = largest.memory;
  const memRows = [
    [
      'agent idle (Node + test agent, nothing loaded)',
      mib(m.idle.rssBytes),
      mib(m.idle.heapUsedBytes),
      mib(m.idle.maxRssBytes),
    ],
    ['after the full sync', mib(m.afterFull.rssBytes), mib(m.afterFull.heapUsedBytes), mib(m.afterFull.maxRssBytes)],
    [
      `after ${cfg.changes} one-endpoint changes (steady)`,
      mib(m.afterChanges.rssBytes),
      mib(m.afterChanges.heapUsedBytes),
      mib(m.afterChanges.maxRssBytes),
    ],
  ];

  const at = (n: number): SizeResult | undefined => results.find((r) => r.n === n);
  const r10 = at(10_000);
  const r5 = at(5_000);
  const r1 = at(1_000);
  const totalMed = (r: SizeResult): number => med(r.ours.map((o) => o.totalMs));
  const changeMed = (r: SizeResult): number => med(r.changes.map((c) => c.totalMs));
  const quickDetail = `quick mode ran ${results.map((r) => formatCount(r.n)).join(' and ')} Services`;
  const targets: Target[] = [];
  targets.push(
    r10
      ? {
          what: '#4 full sync 10,000 × 10 (model + kernel)',
          target: '< 1 s',
          status: totalMed(r10) < 1_000 ? 'met' : 'missed',
          detail: `${formatMs(totalMed(r10))} (model ${formatMs(med(r10.ours.map((o) => o.modelMs)))}, plan ${formatMs(med(r10.ours.map((o) => o.planMs)))}, kernel ${formatMs(med(r10.ours.map((o) => o.kernelMs)))})`,
        }
      : {
          what: '#4 full sync 10,000 × 10 (model + kernel)',
          target: '< 1 s',
          status: 'not measured',
          detail: quickDetail,
        },
  );
  if (r5 && r5.execB) {
    const ours = totalMed(r5);
    const a = execMedian(r5.execA);
    const b = execMedian([r5.execB]);
    const ok = a / ours >= 2 && b / ours >= 40;
    targets.push({
      what: '#4 full sync 5,000 × 10 vs exec',
      target: '≥ 2× faster than (a), ≥ 40× faster than (b)',
      status: ok ? 'met' : 'missed',
      detail: `ours ${formatMs(ours)}; (a) ${formatMs(a)} = ${ratioCell(a, ours)}; (b) ${formatMs(b)} = ${ratioCell(b, ours)}`,
    });
  } else
    targets.push({
      what: '#4 full sync 5,000 × 10 vs exec',
      target: '≥ 2× faster than (a), ≥ 40× faster than (b)',
      status: 'not measured',
      detail: quickDetail,
    });
  {
    const all = results.map((r) => `${formatCount(r.n)}: ${formatMs(changeMed(r))}`).join(', ');
    if (r10 && r1) {
      const ratio = changeMed(r10) / changeMed(r1);
      const ok = results.every((r) => changeMed(r) < 10) && ratio <= 1.5;
      targets.push({
        what: '#4 one endpoint added to one Service (model + plan + kernel)',
        target: '< 10 ms at every size; 10,000 within 1.5× of 1,000',
        status: ok ? 'met' : 'missed',
        detail: `medians ${all}; 10,000 ÷ 1,000 = ${ratio.toFixed(2)}×`,
      });
    } else
      targets.push({
        what: '#4 one endpoint added to one Service (model + plan + kernel)',
        target: '< 10 ms at every size; 10,000 within 1.5× of 1,000',
        status: 'not measured',
        detail: `${quickDetail} (medians ${all})`,
      });
  }
  if (r10) {
    const steady = r10.memory.afterChanges.rssBytes;
    const peak = r10.memory.afterChanges.maxRssBytes;
    targets.push({
      what: '#4 daemon RSS at 10,000 × 10',
      target: '< 160 MiB steady, < 256 MiB peak',
      status: steady < 160 * MiB && peak < 256 * MiB ? 'met' : 'missed',
      detail: `steady ${mib(steady)}, peak ${mib(peak)} (agent process: Node + model + proxier; idle ${mib(r10.memory.idle.rssBytes)})`,
    });
  } else
    targets.push({
      what: '#4 daemon RSS at 10,000 × 10',
      target: '< 160 MiB steady, < 256 MiB peak',
      status: 'not measured',
      detail: `${quickDetail} (at ${formatCount(largest.n)}: steady ${mib(largest.memory.afterChanges.rssBytes)}, peak ${mib(largest.memory.afterChanges.maxRssBytes)})`,
    });
  const r50 = at(50_000);
  targets.push(
    r50
      ? {
          what: '#4 stretch 50,000 × 10',
          target: 'full sync < 10 s, one-endpoint update < 20 ms',
          status: totalMed(r50) < 10_000 && changeMed(r50) < 20 ? 'met' : 'missed',
          detail: `full sync ${formatMs(totalMed(r50))} (model ${formatMs(med(r50.ours.map((o) => o.modelMs)))}, plan ${formatMs(med(r50.ours.map((o) => o.planMs)))}, kernel ${formatMs(med(r50.ours.map((o) => o.kernelMs)))}); one endpoint ${formatMs(changeMed(r50))}; RSS ${mib(r50.memory.afterChanges.rssBytes)}`,
        }
      : {
          what: '#4 stretch 50,000 × 10',
          target: 'full sync < 10 s, one-endpoint update < 20 ms',
          status: 'not measured',
          detail: quickDetail,
        },
  );
  const spreadPct = (latLast.median / latFirst.median - 1) * 100;
  targets.push(
    r10
      ? {
          what: '#4 first-packet latency, first vs last of 10,000 Services',
          target: 'within 10 %',
          status: Math.abs(spreadPct) <= 10 ? 'met' : 'missed',
          detail: `TCP connect median ${formatMs(latFirst.median)} first vs ${formatMs(latLast.median)} last (${spreadPct.toFixed(1)} %), direct to the pod ${formatMs(med(lat.direct))}`,
        }
      : {
          what: '#4 first-packet latency, first vs last of 10,000 Services',
          target: 'within 10 %',
          status: 'not measured',
          detail: `${quickDetail} (at ${formatCount(largest.n)}: ${formatMs(latFirst.median)} vs ${formatMs(latLast.median)})`,
        },
  );
  {
    const main = largest.ours[largest.ours.length - 1]!;
    const longest = Math.max(...main.batches.map((b) => b.ms));
    targets.push({
      what: `#4 longest single nfnetlink commit, full sync ${sizeOf(largest.n)}`,
      target: 'measured and reported (no threshold set)',
      status: 'measured',
      detail: `${formatMs(longest)} (${main.batches.length} batch${main.batches.length === 1 ? '' : 'es'})`,
    });
  }

  const kernelNote = (() => {
    if (results.length < 2) return [];
    const k0 = med(smallest.ours.map((o) => o.kernelMs));
    const k1 = med(largest.ours.map((o) => o.kernelMs));
    const exp = (a: number, b: number): string => (Math.log(b / a) / Math.log(largest.n / smallest.n)).toFixed(2);
    const rt0 = med(smallest.ours.map((o) => roundTripMs(o.batches)));
    const rt1 = med(largest.ours.map((o) => roundTripMs(o.batches)));
    const m0 = med(smallest.ours.map((o) => o.modelMs));
    const m1 = med(largest.ours.map((o) => o.modelMs));
    const p0 = med(smallest.ours.map((o) => o.planMs));
    const p1 = med(largest.ours.map((o) => o.planMs));
    return [
      `Growth from ${formatCount(smallest.n)} to ${formatCount(largest.n)} Services (exponent of N): model N^${exp(m0, m1)}, plan N^${exp(p0, p1)}, kernel column (encoding + round trips) N^${exp(k0, k1)} (${formatMs(k0)} → ${formatMs(k1)})` +
        (Number.isNaN(rt0) || Number.isNaN(rt1)
          ? '.'
          : `, batch round trips alone N^${exp(rt0, rt1)} (${formatMs(rt0)} → ${formatMs(rt1)}); the rest of the kernel column is encoding the messages in NftClient.run.`),
    ];
  })();

  return [
    {
      title: 'nftables proxier (issue 4): full sync from empty, side by side with `nft -f`',
      description:
        `N ClusterIP Services (TCP 80 → 8080) with one EndpointSlice of ${ENDPOINTS} ready endpoints each, every endpoint address distinct. ` +
        '**Ours**: in a node-namespace agent process, `ChangeTracker` (src/model) fed every Service and slice and checked out (model), then `NftablesProxier.sync` over nfnetlink into an empty namespace: plan and kernel time from its SyncReport (kernel = reading the table back plus every batch, message encoding included), and of that the batch round trips alone (send to the last ACK: the kernel’s processing and commit), timed on the socket. The proxier cuts a large full sync into several batches under the socket’s limit, as the daemon configures it. ' +
        '**(a)**: the very transactions of that sync as `nft -f` text (`NftTransaction.toString()` of each batch, captured from the same workload run against FakeNft, concatenated), loaded by one `nft -f -` into an empty namespace; checked by counting the chains it created. ' +
        '**(b)**: an upstream-shaped ruleset (test/bench/nftables-upstream.ts: per-Service chains ending in `numgen random mod N vmap { i : goto endpoint-… }`, one chain per endpoint with `dnat to IP:port`, the `service-ips` verdict map; chains added and flushed before their rules, as upstream’s full sync writes them) through one `nft -f -`. ' +
        `Exec sides are timed from outside, process start-up included (through \`ip netns exec\`), bounded at ${formatMs(NFT_TIMEOUT_MS)}. ` +
        (cfg.fullRepeats(cfg.sizes[0]!) > 1
          ? `Ours runs ${cfg.sizes.map((n) => `${cfg.fullRepeats(n)} time${cfg.fullRepeats(n) === 1 ? '' : 's'} at ${formatCount(n)}`).join(', ')}, each in a fresh namespace; (a) runs ${cfg.execRepeats(cfg.sizes[0]!)} times at ${formatCount(cfg.sizes[0]!)} and once above; (b) once per size (the 10,000 × 10 upstream-shaped load alone takes minutes), so the spread of single runs is not known. ` +
            'Before each of our measurements the runner waits until the CPUs are at most 15 % busy (test/bench/settle.ts, up to 60 s): `ip netns del` returns at once, and the kernel then tears the namespace’s ruleset down in a work queue, seconds of CPU after a large (a) or (b) load, which would otherwise be measured with our next sync.'
          : 'Every full load runs once per size (quick mode).'),
      columns: [
        { title: 'Services × endpoints' },
        { title: 'ours: model', align: 'right' },
        { title: 'ours: plan', align: 'right' },
        { title: 'ours: kernel', align: 'right' },
        { title: 'ours: of which batch round trips', align: 'right' },
        { title: 'ours: total', align: 'right' },
        { title: '(a) our ruleset, `nft -f`', align: 'right' },
        { title: '(b) upstream-shaped, `nft -f`', align: 'right' },
        { title: 'ours vs (a)', align: 'right' },
        { title: 'ours vs (b)', align: 'right' },
        { title: 'runs (ours)', align: 'right' },
      ],
      rows: fullRows,
      notes: [
        '“vs” columns: how many times faster ours is (total, model included) than the exec side’s full load (below 1×: slower).',
        ...kernelNote,
      ],
      targets,
      figures: nftFigures(results),
    },
    {
      title: 'nftables proxier (issue 4): one endpoint added to one Service',
      description:
        `After the full sync, ${cfg.changes} times one Service (a different one each time, never the first or last) gains one endpoint: ` +
        '**ours**: the slice event and checkout (model), plan and kernel from the partial SyncReport, total wall; ' +
        '**(a)**: the partial transaction’s text (`toString()`) through `nft -f -`, applied in order onto (a)’s loaded ruleset; ' +
        `**(b)**: upstream’s partial sync for that Service as text (the new endpoint chain, the Service chain flushed and rewritten with one more vmap entry, its map elements), ${cfg.upstreamChanges} times onto (b)’s loaded ruleset.`,
      columns: [
        { title: 'Services × endpoints' },
        { title: 'ours: model', align: 'right' },
        { title: 'ours: plan', align: 'right' },
        { title: 'ours: kernel', align: 'right' },
        { title: 'ours: of which batch round trips', align: 'right' },
        { title: 'ours: total', align: 'right' },
        { title: '(a) `nft -f`', align: 'right' },
        { title: '(b) `nft -f`', align: 'right' },
        { title: 'ours vs (a)', align: 'right' },
        { title: 'ours vs (b)', align: 'right' },
        { title: 'runs ours / (a) / (b)', align: 'right' },
      ],
      rows: changeRows,
      notes: [
        `Every change was one partial sync (no full sync), one nfnetlink batch of ${formatCount(largest.changes[0]?.batches[0]?.messages ?? 0)} messages` +
          (withText
            ? `; as (a)'s \`nft -f\` text, one change at ${formatCount(withText.n)} Services is ≈ ${formatCount(withText.textBytes.change)} bytes.`
            : '.'),
      ],
    },
    {
      title: 'nftables proxier (issue 4): nfnetlink commits, memory, first-packet latency',
      description:
        'Commits: every `run()` of the proxier’s nf_tables client timed on its own (encoding, send, the kernel’s processing and commit, the ACKs): the longest one is the longest time the nf_tables commit lock can be held by one batch. ' +
        `Memory: the node-namespace agent process (Node, the model and the proxier for ${sizeOf(largest.n)}, as a daemon holds them; nothing else; run with the packaged daemon's V8 options, src/daemon/v8-options.ts), process.memoryUsage() and resourceUsage().maxRSS. ` +
        `First packet: from a client namespace through the node (the proxier’s rules) to one pod namespace holding the endpoints of the first and last Service programmed; ${cfg.connects} TCP connects per target after 20 of warm-up, targets interleaved in a rotating order, each timed from connect() to established (one SYN/SYN-ACK round trip through DNAT and, on the way in, masquerading).`,
      columns: [
        { title: 'Services × endpoints' },
        { title: 'full sync: batches', align: 'right' },
        { title: 'full sync: longest batch', align: 'right' },
        { title: 'full sync: kernel total', align: 'right' },
        { title: 'one change: its batch', align: 'right' },
      ],
      rows: batchRows,
      notes: [
        `Memory at ${sizeOf(largest.n)} (RSS / heap used / peak RSS so far): ${memRows.map((row) => `${row[0]}: ${row[1]} / ${row[2]} / ${row[3]}`).join('; ')}.`,
        `First-packet TCP connect latency (median, spread) — ${latRows.map((row) => `${row[0]}: first ${row[1]}, last ${row[2]} (${row[3]}), direct to the pod ${row[4]}, ${row[5]} connects each`).join('; ')}.`,
        ...(quick ? ['Quick mode: sizes and repetitions are reduced; the issue’s targets are not evaluated.'] : []),
      ],
    },
  ];
}

async function nftablesSections(opts: BenchOptions): Promise<Section[]> {
  const cfg = opts.quick ? QUICK : FULL;
  const results: SizeResult[] = [];
  for (const n of cfg.sizes) results.push(await measureSize(n, cfg, opts.log));
  return sections(results, cfg, opts.quick);
}

export const bench: Bench = { needsRoot: true, run: nftablesSections };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const { renderSection } = await import('./section.ts');
  for (const s of await nftablesSections({ quick, log: (l) => process.stderr.write(`${l}\n`) }))
    console.log(renderSection(s));
}
