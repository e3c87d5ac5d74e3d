// iptables benchmark (issue 14): kube-proxy-ts's iptables proxier (nf_tables netlink, the
// rules in iptables-nft's form) side by side with upstream's way, `iptables-restore` of the
// same ruleset as text, through iptables-nft-restore and iptables-legacy-restore, in one run,
// in throwaway network namespaces only.
//
// For N ClusterIP Services × 10 endpoints (N = 1,000 / 5,000 / 10,000; --quick: 200 / 1,000),
// the workload of the nftables benchmark (nftables-workload.ts):
//   ours   — model fed and checked out, IptablesProxier full sync from empty (cold start),
//            a full resync with nothing changed (the periodic one), one-endpoint changes
//            (partial syncs), the agent's RSS;
//   exec   — the same cluster's ruleset rendered by save.ts (what upstream restores), loaded
//            by `iptables-nft-restore` and `iptables-legacy-restore` into an empty namespace;
//            for a change, upstream's partial restore (`--noflush`: KUBE-SERVICES whole, the
//            changed Service's chains). Timed from outside, process start-up included.
//
// Needs root. In the suite: npm run bench -- iptables [--quick].

import { performance } from 'node:perf_hooks';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { Netns } from '../helpers/netns.ts';
import type { CommitProbe, SyncTiming } from './iptables-agent.ts';
import { restoreTexts } from './iptables-agent.ts';
import type { Figure } from './figures.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, formatRatio, median } from './stats.ts';

const AGENT = new URL('./iptables-agent.ts', import.meta.url).href;
const RESTORE_TIMEOUT_MS = 600_000;
const MiB = 2 ** 20;

interface Config {
  sizes: number[];
  changes: number;
  execChanges: number;
}
const FULL: Config = { sizes: [1_000, 5_000, 10_000], changes: 20, execChanges: 5 };
const QUICK: Config = { sizes: [200, 1_000], changes: 5, execChanges: 2 };

interface SizeResult {
  n: number;
  cold: SyncTiming;
  resync: SyncTiming;
  changes: SyncTiming[];
  rssMiB: number;
  maxRssMiB: number;
  /** V8's heap in use after a full GC (the live JS objects), MiB. */
  liveHeapMiB: number;
  probes: CommitProbe[];
  textBytes: number;
  nftFull: number;
  nftChanges: number[];
  legacyFull: number | undefined;
  legacyChanges: number[];
  legacyError: string | undefined;
}

async function restore(ns: Netns, tool: string, text: string, noflush: boolean): Promise<number> {
  const t0 = performance.now();
  const r = await ns.exec(tool, noflush ? ['--noflush'] : [], { input: text, timeoutMs: RESTORE_TIMEOUT_MS });
  const ms = performance.now() - t0;
  if (r.code !== 0)
    throw new Error(`${tool} exited ${r.code}: ${r.stderr.trim().split('\n').slice(0, 3).join(' / ').slice(0, 300)}`);
  return ms;
}

async function measureSize(n: number, cfg: Config, log: (s: string) => void): Promise<SizeResult> {
  const node = await Netns.create('iptb-ours');
  let ours: Pick<SizeResult, 'cold' | 'resync' | 'changes' | 'rssMiB' | 'maxRssMiB' | 'liveHeapMiB' | 'probes'>;
  try {
    const a = await node.agent([...DAEMON_V8_OPTIONS, '--expose-gc']);
    await a.call(AGENT, 'start', n);
    const cold = await a.call<SyncTiming>(AGENT, 'fullSync');
    log(`iptables: ${n} Services, ours cold full sync ${formatMs(cold.totalMs)} (${cold.batches} batches)`);
    const resync = await a.call<SyncTiming>(AGENT, 'resync');
    const changes: SyncTiming[] = [];
    for (let r = 0; r < cfg.changes; r++) changes.push(await a.call<SyncTiming>(AGENT, 'change', r));
    const mem = await a.call<{ rssBytes: number; maxRssBytes: number }>(AGENT, 'memory');
    const live = await a.call<{ heapUsed: number }>(AGENT, 'heapAfterGc');
    // What one commit costs the kernel with this ruleset loaded, whatever we send in it.
    const probes = await a.call<CommitProbe[]>(AGENT, 'commitProbe', 5);
    ours = {
      cold,
      resync,
      changes,
      rssMiB: mem.rssBytes / MiB,
      maxRssMiB: mem.maxRssBytes / MiB,
      liveHeapMiB: live.heapUsed / MiB,
      probes,
    };
    await a.call(AGENT, 'stop');
  } finally {
    await node.destroy();
  }
  const texts = restoreTexts(n, cfg.execChanges);
  const nftNs = await Netns.create('iptb-nft');
  let nftFull: number;
  const nftChanges: number[] = [];
  try {
    nftFull = await restore(nftNs, 'iptables-nft-restore', texts.full, false);
    for (const t of texts.changes) nftChanges.push(await restore(nftNs, 'iptables-nft-restore', t, true));
  } finally {
    await nftNs.destroy();
  }
  log(`iptables: ${n} Services, iptables-nft-restore ${formatMs(nftFull)}`);
  const legNs = await Netns.create('iptb-leg');
  let legacyFull: number | undefined;
  const legacyChanges: number[] = [];
  let legacyError: string | undefined;
  try {
    legacyFull = await restore(legNs, 'iptables-legacy-restore', texts.full, false);
    for (const t of texts.changes) legacyChanges.push(await restore(legNs, 'iptables-legacy-restore', t, true));
  } catch (e) {
    legacyError = (e as Error).message;
  } finally {
    await legNs.destroy();
  }
  return {
    n,
    ...ours,
    textBytes: Buffer.byteLength(texts.full),
    nftFull,
    nftChanges,
    legacyFull,
    legacyChanges,
    legacyError,
  };
}

/** Where a one-endpoint change goes: ours (model, plan and encoding, the rest of sync()) vs the kernel round trip. */
function changeSplit(r: SizeResult): string {
  const m = (f: (c: SyncTiming) => number): number => median(r.changes.map(f));
  const total = m((c) => c.totalMs);
  const kernel = m((c) => c.kernelMs);
  const ours = m((c) => c.totalMs - c.kernelMs);
  const probe = r.probes
    .map((p) => `${p.kind} ${formatMs(median(p.systemMs))} (wall ${formatMs(median(p.wallMs))})`)
    .join(', ');
  return (
    `${formatCount(r.n)}, one endpoint added (medians of ${r.changes.length}): ${formatMs(total)} = ours ` +
    `${formatMs(ours)} (plan and encoding ${formatMs(m((c) => c.planMs))}) + kernel round trip ${formatMs(kernel)} ` +
    `(${((100 * kernel) / total).toFixed(0)} %; ${m((c) => c.batches)} batch, system CPU ${formatMs(m((c) => c.cpu?.systemMs ?? 0))}, ` +
    `user CPU ${formatMs(m((c) => c.cpu?.userMs ?? 0))}); one commit adding one rule to an idle chain, system CPU: ${probe}`
  );
}

/** The summary's figures: full sync and one change, ours and both restore tools, per size. */
function iptFigures(results: readonly SizeResult[]): Figure[] {
  return results.flatMap((r) => {
    const at = { mode: 'iptables' as const, services: r.n, endpoints: 10, unit: 'ms' as const };
    const f = (metric: 'fullSync' | 'oneChange', series: string, value: number | undefined): Figure[] =>
      figure({ ...at, metric, series, value: value ?? Number.NaN });
    const m = (xs: readonly number[]): number => (xs.length ? median(xs) : Number.NaN);
    return [
      ...f('fullSync', OURS, r.cold.totalMs),
      ...f('fullSync', 'iptables-nft-restore', r.nftFull),
      ...f('fullSync', 'iptables-legacy-restore', r.legacyFull),
      ...f('oneChange', OURS, m(r.changes.map((c) => c.totalMs))),
      ...f('oneChange', 'iptables-nft-restore --noflush', m(r.nftChanges)),
      ...f('oneChange', 'iptables-legacy-restore --noflush', m(r.legacyChanges)),
    ];
  });
}

function sections(results: SizeResult[]): Section[] {
  const rows: string[][] = [];
  for (const r of results) {
    const ch = median(r.changes.map((c) => c.totalMs));
    rows.push([
      formatCount(r.n),
      'full sync (cold)',
      formatMs(r.cold.totalMs),
      formatMs(r.nftFull),
      r.legacyFull === undefined ? '—' : formatMs(r.legacyFull),
      formatRatio(r.nftFull, r.cold.totalMs),
    ]);
    rows.push([formatCount(r.n), 'full resync, nothing changed', formatMs(r.resync.totalMs), '—', '—', '']);
    rows.push([
      formatCount(r.n),
      'one endpoint added (median)',
      formatMs(ch),
      formatMs(median(r.nftChanges)),
      r.legacyChanges.length ? formatMs(median(r.legacyChanges)) : '—',
      formatRatio(median(r.nftChanges), ch),
    ]);
  }
  const targets: Target[] = [];
  const big = results[results.length - 1]!;
  const small = results[0]!;
  const ratio = big.nftFull / big.cold.totalMs;
  targets.push({
    what: `#14 full sync at ${formatCount(big.n)} vs iptables-nft-restore`,
    target: '≥ 5× faster',
    status: ratio >= 5 ? 'met' : 'missed',
    detail: `${ratio.toFixed(1)}×`,
  });
  const worst = Math.max(...results.map((r) => median(r.changes.map((c) => c.totalMs))));
  targets.push({
    what: '#14 one endpoint change',
    target: '< 10 ms at every size',
    status: worst < 10 ? 'met' : 'missed',
    detail: `worst median ${formatMs(worst)}`,
  });
  const flat = median(big.changes.map((c) => c.totalMs)) / median(small.changes.map((c) => c.totalMs));
  targets.push({
    what: `#14 one endpoint change, ${formatCount(big.n)} vs ${formatCount(small.n)}`,
    target: 'within 1.5×',
    status: flat <= 1.5 ? 'met' : 'missed',
    detail: `${flat.toFixed(2)}×`,
  });
  return [
    {
      title: 'iptables mode: sync vs iptables-restore',
      description:
        'N ClusterIP Services × 10 endpoints. Ours: IptablesProxier over nf_tables netlink (rules in iptables-nft form) in a node namespace, model included. ' +
        'exec: the same ruleset as iptables-save text (save.ts) loaded by iptables-nft-restore / iptables-legacy-restore into an empty namespace; ' +
        'a change there is upstream’s partial restore (--noflush, KUBE-SERVICES rewritten whole).',
      columns: [
        { title: 'Services' },
        { title: 'measurement' },
        { title: 'ours', align: 'right' },
        { title: 'iptables-nft-restore', align: 'right' },
        { title: 'iptables-legacy-restore', align: 'right' },
        { title: 'nft-restore / ours', align: 'right' },
      ],
      rows,
      notes: [
        ...results.map(
          (r) =>
            `${formatCount(r.n)}: ours ${r.cold.batches} batches (longest ${formatMs(r.cold.longestBatchMs)}), plan ${formatMs(r.cold.planMs)}, kernel ${formatMs(r.cold.kernelMs)} (message encoding included), CPU ${cpuText(r.cold)}; agent RSS ${r.rssMiB.toFixed(0)} MiB (peak ${r.maxRssMiB.toFixed(0)} MiB, live JS heap after GC ${r.liveHeapMiB.toFixed(0)} MiB); ruleset text ${(r.textBytes / MiB).toFixed(1)} MiB`,
        ),
        ...results.map((r) => changeSplit(r)),
        ...results
          .filter((r) => r.legacyError)
          .map((r) => `${formatCount(r.n)}: iptables-legacy-restore failed: ${r.legacyError}`),
      ],
      targets,
      figures: iptFigures(results),
    },
  ];
}

/** The cold sync's CPU in the agent: system time is the kernel's (nf_tables runs a batch in its sender's sendmsg). */
function cpuText(t: SyncTiming): string {
  return t.cpu ? `${formatMs(t.cpu.userMs)} user + ${formatMs(t.cpu.systemMs)} system` : 'not measured';
}

export const bench: Bench = {
  needsRoot: true,
  async run(opts: BenchOptions): Promise<Section[]> {
    const cfg = opts.quick ? QUICK : FULL;
    const results: SizeResult[] = [];
    for (const n of cfg.sizes) results.push(await measureSize(n, cfg, opts.log));
    return sections(results);
  },
};
