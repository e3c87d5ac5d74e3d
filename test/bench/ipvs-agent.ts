// The IPVS benchmark's worker: runs inside ONE fresh network namespace of the QEMU VM (started
// by ipvs-vm.ts through `ip netns exec`), does one side's measurement, prints one JSON line.
//
//   node test/bench/ipvs-agent.ts ours N K DUMP_DIR|-   the IPVS proxier as the daemon builds it
//       (buildProxiers, --proxy-mode ipvs: IPVS over generic netlink, ipsets over nfnetlink,
//       kube-ipvs0 over rtnetlink, the iptables-nft companion rules over nf_tables), fed by the
//       model: a full sync from empty, then K one-endpoint changes. With DUMP_DIR, the state
//       the full sync left is read back with the tools into DUMP_DIR (before the changes) for
//       the exec side: ip.batch, ipset.save, ipvsadm.rules, iptables.save, iptables-kube.rules.
//   node test/bench/ipvs-agent.ts exec N K DUMP_DIR      the same state written by exec'd tools:
//       `ip -batch`, `ipset restore`, `ipvsadm --restore`, `iptables-nft-restore`, each timed
//       from spawn to exit (process start-up included); then K one-endpoint changes, each one
//       `ipvsadm -a` plus one `iptables-nft-restore --noflush` of the KUBE-* chains (what
//       upstream's IPVS proxier restores on every sync).
//
// Every spawned command has a time-out; the namespace is the caller's to create and remove.

import { spawn } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { systemClock } from '../../src/base/clock.ts';
import { nullLogger } from '../../src/base/logger.ts';
import { parseCommandLine } from '../../src/config/index.ts';
import { buildProxiers } from '../../src/daemon/proxiers.ts';
import { ProcSysctl } from '../../src/daemon/sysctl.ts';
import { ChangeTracker } from '../../src/model/index.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import type { IpvsProxier } from '../../src/proxier/ipvs/index.ts';
import {
  CLUSTER_CIDR,
  NODE_NAME,
  SERVICE_CIDR,
  SERVICE_PORT,
  TARGET_PORT,
  changedService,
  clusterIP,
  endpointSlice,
  extraIP,
  service,
} from './nftables-workload.ts';
import { problemText } from '../../src/proxier/types.ts';

export interface Spawned {
  code: number | null;
  ms: number;
  stdout: string;
  stderr: string;
}

/** Runs one command, stdin from a file (or nothing), timed from spawn to exit; killed after timeoutMs. */
export function timedSpawn(
  cmd: string,
  args: readonly string[],
  opts: { stdinFile?: string; timeoutMs?: number } = {},
): Promise<Spawned> {
  return new Promise((resolve) => {
    const fd = opts.stdinFile !== undefined ? openSync(opts.stdinFile, 'r') : 'ignore';
    const t0 = performance.now();
    const p = spawn(cmd, args, { stdio: [fd, 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout!.on('data', (d: Buffer) => {
      if (stdout.length < 64 << 20) stdout += d.toString('utf8');
    });
    p.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 1 << 20) stderr += d.toString('utf8');
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    let done = false;
    const finish = (code: number | null, extra = ''): void => {
      if (done) return;
      done = true;
      const ms = performance.now() - t0;
      clearTimeout(timer);
      if (typeof fd === 'number') closeSync(fd);
      resolve({ code, ms, stdout, stderr: stderr + extra });
    };
    p.on('error', (e) => finish(null, `spawn ${cmd}: ${e.message}`));
    p.on('close', (code, signal) => finish(code, signal ? ` (killed by ${signal})` : ''));
  });
}

async function must(
  cmd: string,
  args: readonly string[],
  opts: { stdinFile?: string; timeoutMs?: number } = {},
): Promise<Spawned> {
  const r = await timedSpawn(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim().slice(0, 500)}`);
  return r;
}

export interface OursResult {
  side: 'ours';
  n: number;
  initMs: number;
  full: {
    modelMs: number;
    planMs: number;
    kernelMs: number;
    syncMs: number;
    totalMs: number;
    ops: number;
    requests: number;
    servicePorts: number;
  };
  changes: {
    modelMs: number;
    planMs: number;
    kernelMs: number;
    syncMs: number;
    totalMs: number;
    ops: number;
    requests: number;
  }[];
  /** What the tools read back after the full sync: virtual servers, real servers, set entries, VIPs. */
  counts?: Counts;
}

export interface ExecResult {
  side: 'exec';
  n: number;
  full: { ipMs: number; ipsetMs: number; ipvsadmMs: number; iptablesMs: number; totalMs: number };
  changes: { ipvsadmMs: number; iptablesMs: number; totalMs: number }[];
  counts: Counts;
}

export interface Counts {
  virtualServers: number;
  realServers: number;
  clusterIpEntries: number;
  vips: number;
  ruleLines: number;
}

async function counts(): Promise<Counts> {
  const ipvs = (await must('/usr/sbin/ipvsadm', ['-Sn'])).stdout.split('\n');
  const set = (await must('/usr/sbin/ipset', ['list', '-t', 'KUBE-CLUSTER-IP'])).stdout;
  const addrs = (await must('/usr/sbin/ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout
    .split('\n')
    .filter((l) => l.includes(' inet '));
  const rules = (await must('/usr/sbin/iptables-nft-save', [])).stdout.split('\n').filter((l) => l.startsWith('-A '));
  return {
    virtualServers: ipvs.filter((l) => l.startsWith('-A ')).length,
    realServers: ipvs.filter((l) => l.startsWith('-a ')).length,
    clusterIpEntries: Number(/Number of entries: (\d+)/.exec(set)?.[1] ?? -1),
    vips: addrs.length,
    ruleLines: rules.length,
  };
}

/** The KUBE-* chains and their rules, without the built-in chains and the jumps into ours. */
export function kubeOnly(save: string): string {
  const out: string[] = [];
  for (const l of save.split('\n')) {
    if (l.startsWith('*') || l === 'COMMIT' || l.startsWith(':KUBE-') || l.startsWith('-A KUBE-')) out.push(l);
  }
  return out.join('\n') + '\n';
}

async function dump(dir: string): Promise<void> {
  // kube-ipvs0 and its VIPs, as `ip -batch` input (upstream binds them over netlink; this is the exec stand-in).
  const addrs = (await must('/usr/sbin/ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout
    .split('\n')
    .map((l) => / inet (\S+)/.exec(l)?.[1])
    .filter((a): a is string => a !== undefined);
  writeFileSync(
    join(dir, 'ip.batch'),
    ['link add kube-ipvs0 type dummy', ...addrs.map((a) => `addr add ${a} dev kube-ipvs0`)].join('\n') + '\n',
  );
  writeFileSync(join(dir, 'ipset.save'), (await must('/usr/sbin/ipset', ['save'])).stdout);
  writeFileSync(join(dir, 'ipvsadm.rules'), (await must('/usr/sbin/ipvsadm', ['-Sn'])).stdout);
  const save = (await must('/usr/sbin/iptables-nft-save', [])).stdout;
  writeFileSync(join(dir, 'iptables.save'), save);
  writeFileSync(join(dir, 'iptables-kube.rules'), kubeOnly(save));
}

async function ours(n: number, k: number, dumpDir: string | undefined): Promise<OursResult> {
  const parsed = parseCommandLine(['--proxy-mode', 'ipvs']);
  if (parsed.kind !== 'run') throw new Error(`config: ${parsed.stderr}`);
  const set = buildProxiers(parsed.config, ['IPv4'], {
    logger: nullLogger,
    clock: systemClock,
    sysctl: new ProcSysctl(),
  });
  try {
    const proxier = set.proxiers.get('IPv4') as IpvsProxier;
    const signal = (): AbortSignal => AbortSignal.timeout(600_000);
    const tracker = new ChangeTracker(
      { nodeName: NODE_NAME, family: 'IPv4', clusterCIDRs: [CLUSTER_CIDR], serviceCIDRs: [SERVICE_CIDR] },
      { logger: nullLogger, clock: systemClock },
    );
    // The objects a watch would have decoded: built before the clock starts.
    const services: Service[] = Array.from({ length: n }, (_, i) => service(i));
    const slices: EndpointSlice[] = Array.from({ length: n }, (_, i) => endpointSlice(i, [], 1));

    let t = performance.now();
    await set.init(signal());
    const initMs = performance.now() - t;

    t = performance.now();
    for (let i = 0; i < n; i++) {
      tracker.onService(undefined, services[i]!);
      tracker.onEndpointSlice(slices[i]!, false);
    }
    const first = tracker.checkout();
    const t1 = performance.now();
    const r = await proxier.sync(first.desired, first.change, signal());
    const t2 = performance.now();
    if (!r.full) throw new Error('the first sync was not full');
    if (r.errors.length) throw new Error(`full sync errors: ${r.errors.slice(0, 3).map(problemText).join('; ')}`);
    const full = {
      modelMs: t1 - t,
      planMs: r.planMs,
      kernelMs: r.kernelMs,
      syncMs: t2 - t1,
      totalMs: t2 - t,
      ops: proxier.lastOps,
      requests: proxier.lastRequests,
      servicePorts: first.desired.services.size,
    };
    let c: Counts | undefined;
    if (dumpDir) {
      c = await counts();
      await dump(dumpDir);
    }

    const extra = new Map<number, string[]>();
    const changes: OursResult['changes'] = [];
    for (let j = 0; j < k; j++) {
      const i = changedService(j, n);
      const ex = [...(extra.get(i) ?? []), extraIP(j)];
      extra.set(i, ex);
      const slice = endpointSlice(i, ex, 2 + j);
      const s0 = performance.now();
      tracker.onEndpointSlice(slice, false);
      const { desired, change } = tracker.checkout();
      const s1 = performance.now();
      const rep = await proxier.sync(desired, change, signal());
      const s2 = performance.now();
      if (rep.full) throw new Error('a one-endpoint change ran a full sync');
      if (rep.errors.length) throw new Error(`change errors: ${rep.errors.slice(0, 3).map(problemText).join('; ')}`);
      changes.push({
        modelMs: s1 - s0,
        planMs: rep.planMs,
        kernelMs: rep.kernelMs,
        syncMs: s2 - s1,
        totalMs: s2 - s0,
        ops: proxier.lastOps,
        requests: proxier.lastRequests,
      });
    }
    // Check the last change reached the kernel, through an independent reader.
    if (k > 0) {
      const i = changedService(k - 1, n);
      const lines = (await must('/usr/sbin/ipvsadm', ['-Ln', '-t', `${clusterIP(i)}:${SERVICE_PORT}`])).stdout;
      if (!lines.includes(`${extraIP(k - 1)}:${TARGET_PORT}`))
        throw new Error(`ipvsadm does not show ${extraIP(k - 1)} in ${clusterIP(i)}:${SERVICE_PORT}`);
    }
    return { side: 'ours', n, initMs, full, changes, ...(c ? { counts: c } : {}) };
  } finally {
    set.close();
  }
}

async function exec(n: number, k: number, dir: string): Promise<ExecResult> {
  const T = 600_000;
  const ipR = await must('/usr/sbin/ip', ['-batch', join(dir, 'ip.batch')], { timeoutMs: T });
  const ipsetR = await must('/usr/sbin/ipset', ['restore'], { stdinFile: join(dir, 'ipset.save'), timeoutMs: T });
  const ipvsR = await must('/usr/sbin/ipvsadm', ['--restore'], { stdinFile: join(dir, 'ipvsadm.rules'), timeoutMs: T });
  const iptR = await must('/usr/sbin/iptables-nft-restore', [], {
    stdinFile: join(dir, 'iptables.save'),
    timeoutMs: T,
  });
  const full = {
    ipMs: ipR.ms,
    ipsetMs: ipsetR.ms,
    ipvsadmMs: ipvsR.ms,
    iptablesMs: iptR.ms,
    totalMs: ipR.ms + ipsetR.ms + ipvsR.ms + iptR.ms,
  };
  const c = await counts();
  const changes: ExecResult['changes'] = [];
  for (let j = 0; j < k; j++) {
    const i = changedService(j, n);
    const a = await must(
      '/usr/sbin/ipvsadm',
      ['-a', '-t', `${clusterIP(i)}:${SERVICE_PORT}`, '-r', `${extraIP(j)}:${TARGET_PORT}`, '-m', '-w', '1'],
      { timeoutMs: 60_000 },
    );
    const b = await must('/usr/sbin/iptables-nft-restore', ['--noflush'], {
      stdinFile: join(dir, 'iptables-kube.rules'),
      timeoutMs: 60_000,
    });
    changes.push({ ipvsadmMs: a.ms, iptablesMs: b.ms, totalMs: a.ms + b.ms });
  }
  if (k > 0) {
    // The restores replaced the KUBE-* chains' rules rather than appending to them.
    const after = await counts();
    if (after.ruleLines !== c.ruleLines || after.realServers !== c.realServers + k)
      throw new Error(`after the changes: ${JSON.stringify(after)}, before: ${JSON.stringify(c)}`);
  }
  return { side: 'exec', n, full, changes, counts: c };
}

async function main(argv: readonly string[]): Promise<void> {
  const [side, nText, kText, dir] = argv;
  const n = Number(nText);
  const k = Number(kText);
  if (!Number.isInteger(n) || n < 3 || !Number.isInteger(k) || k < 0)
    throw new Error('usage: ipvs-agent.ts ours|exec N K DIR|-');
  let out: OursResult | ExecResult;
  if (side === 'ours') out = await ours(n, k, dir && dir !== '-' ? dir : undefined);
  else if (side === 'exec' && dir) out = await exec(n, k, dir);
  else throw new Error('usage: ipvs-agent.ts ours|exec N K DIR|-');
  process.stdout.write(JSON.stringify(out) + '\n');
}

if (process.argv[1] === import.meta.filename) {
  try {
    await main(process.argv.slice(2));
    process.exit(0);
  } catch (e) {
    process.stderr.write(`ipvs-agent: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  }
}
