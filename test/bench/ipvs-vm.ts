// The IPVS benchmark's driver inside the QEMU VM (the payload ipvs.ts boots): for each size,
// `runs` rounds of { ours in a fresh namespace, exec in a fresh namespace }, each side run by
// ipvs-agent.ts inside its namespace; the results go to a JSON file after every step, so a
// crash or time-out still leaves what was measured.
//
//   node test/bench/ipvs-vm.ts OUT.json SIZES RUNS CHANGES WARMUP_N   (RUNS: rounds per size)
//   e.g. node test/bench/ipvs-vm.ts /path/ipvs-bench.json 1000,5000 3,1 10 10
//
// The first round of each size also reads our state back with the tools (ipvsadm -Sn, ipset
// save, iptables-nft-save, ip addr) into ipvs-dump-N next to OUT.json: that is what the exec side
// restores. Every namespace is emptied (rules, sets, virtual servers, kube-ipvs0) and removed
// after its measurement, also on failure.

import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { timedSpawn } from './ipvs-agent.ts';
import type { ExecResult, OursResult } from './ipvs-agent.ts';

export interface SizeResult {
  n: number;
  ours: OursResult[];
  exec: ExecResult[];
  /** Wall ms to empty and remove each namespace (not measured figures; for the record). */
  cleanupMs: number[];
  error?: string;
}

export interface VmBenchResult {
  kernel: string;
  tools: Record<string, string>;
  cpus: number;
  runs: number[];
  changes: number;
  sizes: SizeResult[];
  warmupMs?: number;
  /** /etc files bound from tmpfs copies for the run (see localEtc), or why not. */
  localEtc?: string;
  error?: string;
}

const AGENT = resolve(import.meta.dirname, 'ipvs-agent.ts');
const NODE = process.execPath;

let seq = 0;

/** Runs one side in a fresh namespace, then empties and removes it (always). */
async function inFreshNs<T>(tag: string, args: string[], timeoutMs: number, cleanupMs: number[]): Promise<T> {
  const ns = `kpb-${tag}-${process.pid}-${seq++}`;
  const add = await timedSpawn('/usr/sbin/ip', ['netns', 'add', ns], { timeoutMs: 20_000 });
  if (add.code !== 0) throw new Error(`ip netns add ${ns}: ${add.stderr}`);
  try {
    await timedSpawn('/usr/sbin/ip', ['-n', ns, 'link', 'set', 'lo', 'up'], { timeoutMs: 20_000 });
    const r = await timedSpawn('/usr/sbin/ip', ['netns', 'exec', ns, NODE, AGENT, ...args], { timeoutMs });
    if (r.code !== 0)
      throw new Error(`agent ${args.join(' ')} in ${ns} exited ${r.code}: ${r.stderr.trim().slice(-2000)}`);
    const line = r.stdout.trim().split('\n').at(-1) ?? '';
    return JSON.parse(line) as T;
  } finally {
    // Emptied by hand first, synchronously: a namespace removed full would be torn down by a
    // kernel worker in the background, during the next measurement.
    const c = await timedSpawn(
      '/usr/sbin/ip',
      [
        'netns',
        'exec',
        ns,
        '/bin/sh',
        '-c',
        'nft flush ruleset; ipset destroy; ipvsadm -C; ip link del kube-ipvs0 2>/dev/null; true',
      ],
      { timeoutMs: 900_000 },
    );
    cleanupMs.push(c.ms);
    await timedSpawn('/usr/sbin/ip', ['netns', 'del', ns], { timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/**
 * The tools look up names in /etc for every line they parse: `ipset restore` calls
 * getprotobyname("tcp") per entry (one open of /etc/protocols each, seen with strace) and
 * `ipvsadm` getservbyname() per port before trying it as a number (/etc/services). Inside this
 * VM /etc is the host's, over 9p without a page cache, so each open is several round trips to
 * the host, a cost a real node (local disk, page cache) does not pay. The files are copied to
 * tmpfs and bind-mounted over the originals in the guest's own mount table: nothing on the
 * host changes (the bind mount lives in the guest kernel and dies with it).
 */
async function localEtc(): Promise<string> {
  const done: string[] = [];
  for (const f of ['protocols', 'services', 'nsswitch.conf', 'hosts']) {
    const copy = `/run/kpb-etc-${f}`;
    try {
      copyFileSync(`/etc/${f}`, copy);
    } catch {
      continue;
    }
    const r = await timedSpawn('/bin/mount', ['--bind', copy, `/etc/${f}`], { timeoutMs: 20_000 });
    if (r.code !== 0) return `not done: mount --bind ${copy} /etc/${f}: ${r.stderr.trim()}`;
    done.push(`/etc/${f}`);
  }
  return done.length ? done.join(', ') : 'not done: nothing to copy';
}

async function version(cmd: string, args: string[]): Promise<string> {
  const r = await timedSpawn(cmd, args, { timeoutMs: 10_000 });
  return (r.stdout + r.stderr).trim().split('\n')[0] ?? '?';
}

async function main(): Promise<void> {
  const [out, sizesText, runsText, changesText, warmupText] = process.argv.slice(2);
  if (!out || !sizesText) throw new Error('usage: ipvs-vm.ts OUT.json SIZES RUNS CHANGES WARMUP_N');
  const sizes = sizesText.split(',').map(Number);
  const runs = (runsText ?? '3').split(',').map(Number);
  const changes = Number(changesText ?? 10);
  const warmupN = Number(warmupText ?? 50);
  const result: VmBenchResult = {
    kernel: await version('/bin/uname', ['-r']),
    tools: {
      ipvsadm: await version('/usr/sbin/ipvsadm', ['--version']),
      ipset: await version('/usr/sbin/ipset', ['version']),
      iptables: await version('/usr/sbin/iptables-nft', ['--version']),
      ip: await version('/usr/sbin/ip', ['-V']),
      node: process.version,
    },
    cpus: (await import('node:os')).cpus().length,
    runs,
    changes,
    sizes: [],
    localEtc: await localEtc(),
  };
  const save = (): void => writeFileSync(out, JSON.stringify(result, null, 1));
  save();
  const runDir = dirname(out);
  const log = (s: string): void => console.log(`[${(performance.now() / 1000).toFixed(1)} s] ${s}`);

  try {
    // Warm-up, not reported: loads the code, the tools and the kernel paths once.
    const w0 = performance.now();
    const wdir = join(runDir, 'ipvs-dump-warmup');
    mkdirSync(wdir, { recursive: true });
    const junk: number[] = [];
    await inFreshNs<OursResult>('warm-o', ['ours', String(warmupN), '2', wdir], 300_000, junk);
    await inFreshNs<ExecResult>('warm-e', ['exec', String(warmupN), '2', wdir], 300_000, junk);
    result.warmupMs = performance.now() - w0;
    log(`warm-up done (${warmupN} Services)`);
    save();
  } catch (e) {
    result.error = `warm-up: ${(e as Error).message}`;
    save();
    return;
  }

  for (const [idx, n] of sizes.entries()) {
    const rounds = runs[idx] ?? runs.at(-1) ?? 1;
    const s: SizeResult = { n, ours: [], exec: [], cleanupMs: [] };
    result.sizes.push(s);
    const dir = join(runDir, `ipvs-dump-${n}`);
    mkdirSync(dir, { recursive: true });
    // Generous bounds: under software emulation a 5,000-Service sync takes tens of seconds.
    const timeoutMs = 120_000 + n * 200;
    try {
      for (let r = 0; r < rounds; r++) {
        s.ours.push(
          await inFreshNs<OursResult>(
            'o',
            ['ours', String(n), String(changes), r === 0 ? dir : '-'],
            timeoutMs,
            s.cleanupMs,
          ),
        );
        log(`n=${n} round ${r + 1}/${rounds}: ours full ${s.ours.at(-1)!.full.totalMs.toFixed(0)} ms`);
        save();
        s.exec.push(
          await inFreshNs<ExecResult>('e', ['exec', String(n), String(changes), dir], timeoutMs, s.cleanupMs),
        );
        log(`n=${n} round ${r + 1}/${rounds}: exec full ${s.exec.at(-1)!.full.totalMs.toFixed(0)} ms`);
        save();
      }
    } catch (e) {
      s.error = (e as Error).message;
      log(`n=${n}: ${s.error}`);
      save();
    }
  }
  save();
}

if (process.argv[1] === import.meta.filename) {
  try {
    await main();
    process.exit(0);
  } catch (e) {
    console.error(`ipvs-vm: ${(e as Error).stack ?? String(e)}`);
    process.exit(1);
  }
}
