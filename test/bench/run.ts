// The benchmark suite: runs every registered module, one after the other in one process, and
// writes BENCHMARKS.md (our figures side by side with the exec approach upstream uses, the
// issue targets met or missed, and the machine they were measured on).
//
//   npm run bench                       every module, full sizes → BENCHMARKS.md
//   npm run bench -- model ipset        a subset                 → stdout
//   npm run bench -- --quick [names]    small sizes, few runs (a smoke test, not figures)
//   npm run bench -- --out FILE|-       write there instead (- is stdout)
//   npm run bench -- --list             the registered modules
//
// Only a full run (every module, not --quick) writes BENCHMARKS.md by default, so a smoke test
// or a partial run never overwrites published figures with partial ones. Progress goes to
// stderr. Modules needing namespaces need root; without it they are reported as not measured.

import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Bench, Section, Target } from './section.ts';
import { renderSection, renderTable } from './section.ts';
import { formatMs, summarize } from './stats.ts';

interface Entry {
  name: string;
  /** One line of what it measures, for --list and the contents. */
  summary: string;
  load: () => Promise<Bench>;
}

// The registry: adding a benchmark is one line here. A module exports `bench: Bench` (see
// section.ts): `run({ quick, log })` measures and returns sections, each a markdown table with
// its issue targets, e.g.
//   { name: 'nftables', summary: …, load: async () => (await import('./nftables.ts')).bench },
// (section.ts's notMeasured() gives a module whose code under test does not exist yet its rows.)
// Modules load lazily, so running a subset does not import the others' code.
export const REGISTRY: readonly Entry[] = [
  {
    name: 'model',
    summary: 'desired-state model, from scratch and one endpoint changed (issue 3)',
    load: async () => (await import('./model.ts')).bench,
  },
  {
    name: 'nftables',
    summary: 'nftables proxier vs `nft -f` of our ruleset and of an upstream-shaped one (issue 4)',
    load: async () => (await import('./nftables.ts')).bench,
  },
  {
    name: 'ipvs',
    summary: 'IPVS proxier vs ipvsadm/ipset/iptables restore, under QEMU (issue 5)',
    load: async () => (await import('./ipvs.ts')).bench,
  },
  {
    name: 'ipset',
    summary: 'ipset bulk adds vs `ipset restore` (issue 5’s sets)',
    load: async () => (await import('./ipset.ts')).bench,
  },
  {
    name: 'iptables',
    summary: 'iptables proxier vs iptables-nft-restore / iptables-legacy-restore of the same ruleset (issue 14)',
    load: async () => (await import('./iptables.ts')).bench,
  },
  {
    name: 'iptables-latency',
    summary: 'first-packet latency, first vs last Service, iptables mode vs nftables mode; RSS (issue 14)',
    load: async () => (await import('./iptables-latency.ts')).bench,
  },
  {
    name: 'e2e',
    summary: 'the daemon process against a test API server, timed with packets: cold start, changes, RSS (issue 17)',
    load: async () => (await import('./e2e.ts')).bench,
  },
  {
    name: 'userspace',
    summary:
      'userspace proxy data path vs direct and kernel DNAT: throughput, connections/s, round trips, RSS (issue 15)',
    load: async () => (await import('./userspace.ts')).bench,
  },
  {
    name: 'traffic',
    summary: 'per-Service traffic counters: first-packet latency with and without, nftables mode (issue 19)',
    load: async () => (await import('./traffic.ts')).bench,
  },
  {
    name: 'soak',
    summary: 'the daemon under 2 minutes of endpoint churn: RSS and open fds per round (issue 18)',
    load: async () => (await import('./soak.ts')).bench,
  },
  {
    name: 'churn',
    summary:
      'the daemon at scale under EndpointSlice churn: CPU, RSS over time, longest sync, change latency (issue 33)',
    load: async () => (await import('./churn.ts')).bench,
  },
  {
    name: 'conntrack',
    summary: 'stale UDP entries deleted vs `conntrack -D` (issue 6)',
    load: async () => (await import('./conntrack-suite.ts')).bench,
  },
];

export interface Args {
  names: string[];
  quick: boolean;
  out: string | undefined;
  list: boolean;
  help: boolean;
}

export function parseArgs(argv: readonly string[]): Args {
  const args: Args = { names: [], quick: false, out: undefined, list: false, help: false };
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
    else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
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

interface Environment {
  date: string;
  kernel: string;
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  root: boolean;
  tools: string;
  source: string;
}

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

interface Outcome {
  entry: Entry;
  sections: Section[];
  ms: number;
  failed: boolean;
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
  try {
    const bench = await entry.load();
    if (bench.needsRoot && !root)
      return {
        entry,
        sections: [failedSection(entry, '**not measured**: needs root (network namespaces)')],
        ms: 0,
        failed: false,
      };
    const sections = await bench.run({ quick, log });
    return { entry, sections, ms: performance.now() - t0, failed: false };
  } catch (e) {
    const err = e as Error;
    log(`${entry.name}: FAILED: ${err.stack ?? err.message}`);
    return {
      entry,
      sections: [failedSection(entry, `**failed**: ${String(err.message).split('\n')[0]!.slice(0, 300)}`)],
      ms: performance.now() - t0,
      failed: true,
    };
  }
}

export function renderReport(
  env: Environment,
  load: { start: string; end: string; during: string },
  outcomes: readonly Outcome[],
  quick: boolean,
  totalMs: number,
): string {
  const targets: Target[] = outcomes.flatMap((o) => o.sections.flatMap((s) => s.targets ?? []));
  const status = (t: Target): string =>
    ({ met: 'met', missed: '**missed**', measured: 'measured', 'not measured': '*not measured*' })[t.status];
  const parts: string[] = [
    '# Benchmarks',
    quick
      ? '> **Quick mode** (`--quick`): small sizes and few runs, a smoke test of the suite. These are not figures to quote.\n'
      : '',
    'Written by `npm run bench` (test/bench/run.ts) in one run: every module below ran one after the other on the same machine, ' +
      'each of ours side by side with the exec approach upstream kube-proxy uses where there is one. ' +
      'Medians with their spread: p10–p90 when a row has at least 10 runs, min–max below that. Wall-clock times unless a column says CPU. ' +
      'Compare rows within this file; figures from another machine or another run are not comparable.',
    '## Machine and run',
    renderTable(
      [{ title: 'what' }, { title: 'value' }],
      [
        ['date (UTC)', env.date],
        ['kernel (`uname -r`)', env.kernel],
        ['CPUs', `${env.cpus} × ${env.cpuModel}`],
        ['memory', `${env.memoryGiB} GiB`],
        ['Node', env.node],
        ['tools (exec side)', env.tools],
        ['source', env.source],
        ['load average (1 min), start → end', `${load.start} → ${load.end}`],
        ['load average during the run', load.during],
        ['suite duration', formatMs(totalMs)],
        ['modules', outcomes.map((o) => `${o.entry.name} (${formatMs(o.ms)})`).join(', ')],
      ],
    ),
    `The machine is shared with colleagues: a 1-minute load average above ${env.cpus} (the CPU count) means other work competed for the CPUs during the run, ` +
      'which inflates wall-clock figures of both sides and widens their spread. Where a module reports CPU time, that figure is the steadier one.',
    '## Targets',
    targets.length
      ? renderTable(
          [{ title: 'target' }, { title: 'goal' }, { title: 'status' }, { title: 'figure' }],
          targets.map((t) => [t.what, t.target, status(t), t.detail]),
        )
      : 'No module reported a target.',
  ];
  for (const o of outcomes) for (const s of o.sections) parts.push(renderSection(s));
  parts.push(
    '## Reproduce',
    '`npm run bench` (root: the ipset and conntrack modules create throwaway network namespaces; nothing touches the root namespace). `npm run bench -- model ipset` runs a subset and prints it; `--quick` shrinks sizes for a smoke test; `--out FILE` writes elsewhere.',
  );
  return (
    parts
      .filter((p) => p !== '')
      .join('\n\n')
      .replace(/\n{3,}/g, '\n\n') + '\n'
  );
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.help || args.list) {
    if (args.help) console.log('usage: node test/bench/run.ts [--quick] [--out FILE|-] [--list] [name ...]\n');
    for (const e of REGISTRY) console.log(`${e.name.padEnd(10)} ${e.summary}`);
    return 0;
  }
  const selected = args.names.length ? REGISTRY.filter((e) => args.names.includes(e.name)) : REGISTRY;
  const full = selected.length === REGISTRY.length && !args.quick;
  const out = args.out ?? (full ? fileURLToPath(new URL('../../BENCHMARKS.md', import.meta.url)) : '-');
  const log = (s: string): void => {
    process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
  };

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
  const report = renderReport(env, sampler.stop(), outcomes, args.quick, performance.now() - t0);
  if (out === '-') process.stdout.write(report);
  else {
    writeFileSync(out, report);
    log(`wrote ${out}`);
  }
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
