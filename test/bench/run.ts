// The benchmark suite: runs every registered module, one after the other in one process, and
// writes BENCHMARKS.md (a summary per mode first: ours, the exec peer of the same run and
// upstream's published figures; then every module's detail), the run's JSON and SVG charts.
//
//   npm run bench                       every module, full sizes → BENCHMARKS.md, docs/bench/
//   npm run bench -- model ipset        a subset                 → stdout
//   npm run bench -- --quick [names]    small sizes, few runs (a smoke test, not figures)
//   npm run bench -- --out FILE|-       write there instead (- is stdout); the JSON and the
//                                       charts go to docs/bench/ beside FILE
//   npm run bench -- --render JSON      BENCHMARKS.md and the charts again from a run's JSON
//   npm run bench -- --list             the registered modules
//
// Only a full run (every module, not --quick) writes BENCHMARKS.md by default, so a smoke test
// or a partial run never overwrites published figures with partial ones. Progress goes to
// stderr. Modules needing namespaces need root; without it they are reported as not measured.

import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { renderCharts } from './charts.ts';
import type { ModuleResult, RunResults } from './results.ts';
import { figuresOf, readResults } from './results.ts';
import type { Bench, Section } from './section.ts';
import { formatMs, summarize } from './stats.ts';
import { handSections, renderReport } from './report.ts';

interface Entry {
  name: string;
  /** One line of what it measures, for --list and the contents. */
  summary: string;
  load: () => Promise<Bench>;
  /** Left out of a `--quick` run of every module: its own minimum is minutes (a QEMU boot, a timed soak). */
  slow?: true;
}

// The registry: adding a benchmark is one line here. A module exports `bench: Bench` (see
// section.ts): `run({ quick, log })` measures and returns sections, each a markdown table with
// its goals, e.g.
//   { name: 'nftables', summary: …, load: async () => (await import('./nftables.ts')).bench },
// (section.ts's notMeasured() gives a module whose code under test does not exist yet its rows.)
// Modules load lazily, so running a subset does not import the others' code.
export const REGISTRY: readonly Entry[] = [
  {
    name: 'model',
    summary: 'desired-state model, from scratch and one endpoint changed',
    load: async () => (await import('./model.ts')).bench,
  },
  {
    name: 'nftables',
    summary: 'nftables proxier vs `nft -f` of our ruleset and of an upstream-shaped one',
    load: async () => (await import('./nftables.ts')).bench,
  },
  {
    name: 'ipvs',
    summary: 'IPVS proxier vs ipvsadm/ipset/iptables restore, under QEMU',
    load: async () => (await import('./ipvs.ts')).bench,
    slow: true,
  },
  {
    name: 'ipset',
    summary: 'ipset bulk adds vs `ipset restore` (the IPVS mode’s sets)',
    load: async () => (await import('./ipset.ts')).bench,
  },
  {
    name: 'iptables',
    summary: 'iptables proxier vs iptables-nft-restore / iptables-legacy-restore of the same ruleset',
    load: async () => (await import('./iptables.ts')).bench,
  },
  {
    name: 'iptables-latency',
    summary: 'first-packet latency, first vs last Service, iptables mode vs nftables mode; RSS',
    load: async () => (await import('./iptables-latency.ts')).bench,
  },
  {
    name: 'e2e',
    summary: 'the daemon process against a test API server, timed with packets: cold start, changes, RSS',
    load: async () => (await import('./e2e.ts')).bench,
  },
  {
    name: 'userspace',
    summary: 'userspace proxy data path vs direct and kernel DNAT: throughput, connections/s, round trips, RSS',
    load: async () => (await import('./userspace.ts')).bench,
  },
  {
    name: 'traffic',
    summary: 'per-Service traffic counters: first-packet latency with and without, nftables mode',
    load: async () => (await import('./traffic.ts')).bench,
    slow: true,
  },
  {
    name: 'soak',
    summary: 'the daemon under 2 minutes of endpoint churn: RSS and open fds per round',
    load: async () => (await import('./soak.ts')).bench,
    slow: true,
  },
  {
    name: 'load-balancing',
    summary:
      'per-Service load balancing in nftables mode: consistent-hash table cost, first-packet latency per algorithm',
    load: async () => (await import('./load-balancing.ts')).bench,
  },
  {
    name: 'churn',
    summary: 'the daemon at scale under EndpointSlice churn: CPU, RSS over time, longest sync, change latency',
    load: async () => (await import('./churn.ts')).bench,
  },
  {
    name: 'conntrack',
    summary: 'stale UDP entries deleted vs `conntrack -D`',
    load: async () => (await import('./conntrack-suite.ts')).bench,
  },
];

export interface Args {
  names: string[];
  quick: boolean;
  out: string | undefined;
  list: boolean;
  help: boolean;
  /** A run's JSON to render BENCHMARKS.md and the charts from, instead of running anything. */
  render: string | undefined;
}

export function parseArgs(argv: readonly string[]): Args {
  const args: Args = { names: [], quick: false, out: undefined, list: false, help: false, render: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') args.quick = true;
    else if (a === '--list') args.list = true;
    else if (a === '--help' || a === '-h') args.help = true;
    else if (a === '--out') {
      const v = argv[++i];
      if (v === undefined) throw new Error('--out needs a file name (or - for stdout)');
      args.out = v;
    } else if (a.startsWith('--out=')) args.out = a.slice('--out='.length);
    else if (a === '--render') {
      const v = argv[++i];
      if (v === undefined) throw new Error('--render needs a results file (docs/bench/results.json)');
      args.render = v;
    } else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
    else {
      if (!REGISTRY.some((e) => e.name === a))
        throw new Error(`unknown benchmark "${a}"; known: ${REGISTRY.map((e) => e.name).join(', ')}`);
      if (!args.names.includes(a)) args.names.push(a);
    }
  }
  return args;
}

function exec(cmd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) =>
    execFile(cmd, args, { timeout: 10_000 }, (err, stdout) => resolve(err ? undefined : stdout.trim())),
  );
}

type Environment = RunResults['environment'];

async function environment(): Promise<Environment> {
  const cpus = os.cpus();
  // Package versions from dpkg: reading them touches no kernel state (`ipset version` would).
  const pkgs = ['nftables', 'ipset', 'conntrack', 'iptables', 'ipvsadm'];
  const dpkg = await exec('/usr/bin/dpkg-query', ['-W', '-f', '${Package} ${Version}\\n', ...pkgs]);
  const head = await exec('/usr/bin/git', [
    '-C',
    fileURLToPath(new URL('../..', import.meta.url)),
    'rev-parse',
    '--short',
    'HEAD',
  ]);
  const dirty = await exec('/usr/bin/git', [
    '-C',
    fileURLToPath(new URL('../..', import.meta.url)),
    'status',
    '--porcelain',
  ]);
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    kernel: os.release(),
    cpus: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    root: process.getuid?.() === 0,
    tools: dpkg ? dpkg.split('\n').join(', ') : 'unknown (no dpkg-query)',
    source: head
      ? `commit ${head}${dirty ? ' plus uncommitted changes in the working tree' : ''}`
      : 'unknown (not a git checkout)',
  };
}

/** Samples the 1-minute load average while the suite runs: the machine is shared. */
class LoadSampler {
  private readonly samples: number[] = [os.loadavg()[0]!];
  private readonly timer = setInterval(() => this.samples.push(os.loadavg()[0]!), 5_000);

  constructor() {
    this.timer.unref();
  }

  stop(): { start: string; end: string; during: string } {
    clearInterval(this.timer);
    this.samples.push(os.loadavg()[0]!);
    const s = summarize(this.samples);
    const f = (x: number): string => x.toFixed(1);
    return {
      start: f(this.samples[0]!),
      end: f(this.samples[this.samples.length - 1]!),
      during: `median ${f(s.median)}, min ${f(s.min)}, max ${f(s.max)} (${s.runs} samples)`,
    };
  }
}

interface Outcome extends ModuleResult {
  entry: Entry;
}

function failedSection(entry: Entry, why: string): Section {
  return {
    title: `${entry.name}: not measured`,
    description: `${entry.summary}.`,
    columns: [{ title: 'status' }],
    rows: [[why]],
    targets: [],
  };
}

async function runEntry(entry: Entry, quick: boolean, root: boolean, log: (s: string) => void): Promise<Outcome> {
  const t0 = performance.now();
  const base = { entry, name: entry.name, summary: entry.summary };
  try {
    const bench = await entry.load();
    if (bench.needsRoot && !root)
      return {
        ...base,
        sections: [failedSection(entry, '**not measured**: needs root (network namespaces)')],
        ms: 0,
        failed: false,
      };
    const sections = await bench.run({ quick, log });
    return { ...base, sections, ms: performance.now() - t0, failed: false };
  } catch (e) {
    const err = e as Error;
    log(`${entry.name}: FAILED: ${err.stack ?? err.message}`);
    return {
      ...base,
      sections: [failedSection(entry, `**failed**: ${String(err.message).split('\n')[0]!.slice(0, 300)}`)],
      ms: performance.now() - t0,
      failed: true,
    };
  }
}

/**
 * Writes the report; beside a report file, its JSON and charts in docs/bench/ (linked from the
 * summary by a relative path). A report to stdout gets neither: a smoke test writes no files.
 * Sections of the page it replaces that were measured by hand are kept, as they stand.
 */
async function write(results: RunResults, out: string, log: (s: string) => void): Promise<void> {
  if (out === '-') {
    process.stdout.write(renderReport(results, undefined));
    return;
  }
  const dir = join(dirname(out), 'docs', 'bench');
  mkdirSync(dir, { recursive: true });
  const charts = await renderCharts(figuresOf(results));
  for (const c of charts) writeFileSync(join(dir, c.file), c.svg);
  writeFileSync(join(dir, 'results.json'), JSON.stringify(results, null, 1) + '\n');
  const link = relative(dirname(out), dir);
  const previous = existsSync(out) ? handSections(readFileSync(out, 'utf8')) : [];
  writeFileSync(out, renderReport(results, { dir: link, charts }, previous));
  log(`wrote ${out}, ${join(dir, 'results.json')} and ${charts.length} chart(s)`);
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.help || args.list) {
    if (args.help)
      console.log('usage: node test/bench/run.ts [--quick] [--out FILE|-] [--render JSON] [--list] [name ...]\n');
    for (const e of REGISTRY) console.log(`${e.name.padEnd(10)} ${e.summary}`);
    return 0;
  }
  const log = (s: string): void => {
    process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
  };
  const report = fileURLToPath(new URL('../../BENCHMARKS.md', import.meta.url));
  if (args.render) {
    await write(readResults(args.render), args.out ?? report, log);
    return 0;
  }
  // A smoke test of every module leaves out the slow ones (named, they run); the report says which.
  const selected = args.names.length
    ? REGISTRY.filter((e) => args.names.includes(e.name))
    : REGISTRY.filter((e) => !(args.quick && e.slow));
  const skipped = REGISTRY.filter((e) => !selected.includes(e)).map((e) => e.name);
  // Waiting for quiet CPUs (settle.ts) is bounded at 60 s per measurement; a smoke test waits 3 s.
  if (args.quick) process.env['BENCH_SETTLE_MS'] ??= '3000';
  const full = selected.length === REGISTRY.length && !args.quick;
  const out = args.out ?? (full ? report : '-');

  const env = await environment();
  const sampler = new LoadSampler();
  log(
    `kernel ${env.kernel}, ${env.cpus} CPUs, Node ${env.node}, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; running ${selected.map((e) => e.name).join(', ')}${args.quick ? ' (quick)' : ''}`,
  );
  const t0 = performance.now();
  const outcomes: Outcome[] = [];
  for (const entry of selected) {
    log(`${entry.name}: start`);
    const o = await runEntry(entry, args.quick, env.root, log);
    log(`${entry.name}: ${o.failed ? 'failed' : 'done'} in ${formatMs(o.ms)}`);
    outcomes.push(o);
  }
  const results: RunResults = {
    version: 1,
    quick: args.quick,
    environment: env,
    load: sampler.stop(),
    totalMs: performance.now() - t0,
    modules: outcomes.map(({ name, summary, ms, failed, sections }) => ({ name, summary, ms, failed, sections })),
    skipped,
  };
  await write(results, out, log);
  return outcomes.some((o) => o.failed) ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (e) {
    console.error(`bench: ${(e as Error).message}`);
    process.exitCode = 2;
  }
}
