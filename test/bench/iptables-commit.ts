// Where a one-endpoint change's time goes in the iptables mode (issue 14): at N Services × 10
// endpoints (and in an empty table), the cost of one nf_tables commit adding one rule (no
// verdict, a jump, a DNAT target; our toolkit, and `iptables-nft -A` timed as a process), and
// one-endpoint changes split into model, our planning/encoding and the kernel round trip, with
// the system CPU they cost (nf_tables runs the batch in the sender's sendmsg).
//
//   node test/bench/iptables-commit.ts [N ...]     (root: namespaces; default 0 1000 5000 10000)

import { performance } from 'node:perf_hooks';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { Netns } from '../helpers/netns.ts';
import type { CommitProbe, SyncTiming } from './iptables-agent.ts';
import { median } from './stats.ts';

const AGENT = new URL('./iptables-agent.ts', import.meta.url).href;
const REPS = 10;
const fmt = (xs: number[]): string => `${median(xs).toFixed(1)} (min ${Math.min(...xs).toFixed(1)})`;

async function iptablesNftAppend(ns: Netns): Promise<number[]> {
  const chain = 'KUBE-PROBE-EXEC';
  const ipt = (...args: string[]) => ns.exec('iptables-nft', ['-w', '-t', 'nat', ...args], { timeoutMs: 60_000 });
  await ipt('-N', chain);
  const out: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const t0 = performance.now();
    const r = await ipt('-A', chain, '-p', 'tcp', '-j', 'DNAT', '--to-destination', '10.1.2.3:80');
    if (r.code !== 0) throw new Error(`iptables-nft -A: ${r.stderr}`);
    out.push(performance.now() - t0);
  }
  await ipt('-F', chain);
  await ipt('-X', chain);
  return out;
}

async function startPerf(pid: number, n: number): Promise<() => Promise<string>> {
  const { spawn, execFile } = await import('node:child_process');
  const file = `/tmp/iptcommit-${n}.perf`;
  const rec = spawn('perf', ['record', '-q', '-g', '-o', file, '-p', String(pid)], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1000));
  return async () => {
    rec.kill('SIGINT');
    await new Promise((r) => rec.once('exit', r));
    const args = [
      'report',
      '-i',
      file,
      '--stdio',
      '--no-children',
      '--sort',
      'symbol',
      '-g',
      'none',
      '--percent-limit',
      '1.5',
    ];
    return new Promise((resolve) =>
      execFile('perf', args, { maxBuffer: 1 << 24 }, (_e, out) =>
        resolve(
          out
            .split('\n')
            .filter((l) => l && !l.startsWith('#'))
            .slice(0, 25)
            .join('\n'),
        ),
      ),
    );
  };
}

async function measure(n: number, uptime: () => Promise<string>): Promise<void> {
  const ns = await Netns.create('iptcommit');
  try {
    const a = await ns.agent(DAEMON_V8_OPTIONS);
    const changes: SyncTiming[] = [];
    if (n > 0) {
      await a.call(AGENT, 'start', n);
      await a.call(AGENT, 'fullSync');
      await a.call(AGENT, 'resync');
      for (let r = 0; r < REPS; r++) changes.push(await a.call<SyncTiming>(AGENT, 'change', r));
    }
    // PERF=1: the kernel's side of the probes, sampled (perf record -g on the agent).
    const perf = process.env['PERF'] && n > 0 ? await startPerf(await a.call<number>(AGENT, 'pid'), n) : undefined;
    const probes = await a.call<CommitProbe[]>(AGENT, 'commitProbe', REPS);
    if (perf) console.log(await perf());
    const exec = await iptablesNftAppend(ns);
    console.log(`N=${n} (load ${await uptime()}); medians of ${REPS}, ms:`);
    for (const p of probes)
      console.log(`  commit adding one ${p.kind} rule: wall ${fmt(p.wallMs)}, system CPU ${fmt(p.systemMs)}`);
    console.log(`  iptables-nft -A (DNAT), process included: wall ${fmt(exec)}`);
    if (changes.length) {
      const col = (f: (c: SyncTiming) => number): string => fmt(changes.map(f));
      console.log(`  one-endpoint change: total ${col((c) => c.totalMs)}, model ${col((c) => c.modelMs)}`);
      console.log(`    plan+encode ${col((c) => c.planMs)}, kernel round trip ${col((c) => c.kernelMs)}`);
      const rest = (c: SyncTiming): number => c.totalMs - c.modelMs - c.planMs - c.kernelMs;
      console.log(`    outside both (canary check, counts, context) ${col(rest)}`);
      console.log(`    system CPU ${col((c) => c.cpu!.systemMs)}, user CPU ${col((c) => c.cpu!.userMs)}`);
    }
    if (n > 0) await a.call(AGENT, 'stop');
  } finally {
    await ns.destroy();
  }
}

async function main(): Promise<void> {
  const sizes = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [0, 1_000, 5_000, 10_000];
  const { readFile } = await import('node:fs/promises');
  const uptime = async (): Promise<string> => (await readFile('/proc/loadavg', 'utf8')).split(' ')[0]!;
  for (const n of sizes) await measure(n, uptime);
}

if (import.meta.main) await main();
