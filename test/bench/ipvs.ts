// The IPVS benchmark (issue 5): our IPVS proxier side by side with the exec approach upstream's
// IPVS mode uses, for N ClusterIP Services × 10 endpoints, all in ONE boot of Debian's stock 6.1
// kernel under QEMU (this machine's kernel has no IPVS; software emulation, so the figures are
// relative to each other only).
//
//   host (this file)        runInVm ─▶ VM: test/bench/ipvs-vm.ts (the driver)
//                                        └─ per round, each side in a fresh namespace:
//                                           ip netns exec NS node test/bench/ipvs-agent.ts ours|exec
//
// Ours: the proxier as the daemon builds it (buildProxiers, --proxy-mode ipvs, companion rules
// included), fed by the model: full sync from empty, then one-endpoint changes. Exec: the state
// our full sync left, read back with the tools, written into a fresh namespace by `ip -batch`,
// `ipset restore`, `ipvsadm --restore` and `iptables-nft-restore`, each timed from spawn to exit;
// a one-endpoint change is `ipvsadm -a` + `iptables-nft-restore --noflush` of the KUBE-* chains.
//
// Run alone: npm run bench -- ipvs [--quick]

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Figure } from './figures.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, formatRatio, formatSpread, summarize } from './stats.ts';
import { VM_CACHE, runInVm } from '../vm/harness.ts';
import type { ExecResult, OursResult } from './ipvs-agent.ts';
import type { SizeResult, VmBenchResult } from './ipvs-vm.ts';
import { ENDPOINTS } from './nftables-workload.ts';

export interface Plan {
  sizes: number[];
  /** Rounds per size (same order as sizes). */
  runs: number[];
  changes: number;
  warmupN: number;
  timeoutMs: number;
}

export const plan = (quick: boolean): Plan =>
  quick
    ? { sizes: [100, 500], runs: [1, 1], changes: 5, warmupN: 10, timeoutMs: 30 * 60_000 }
    : // Under software emulation on a shared 2-core host one 5,000-Service round takes ~20 min.
      { sizes: [1_000, 5_000], runs: [3, 1], changes: 10, warmupN: 10, timeoutMs: 70 * 60_000 };

const TITLE_FULL = 'IPVS proxier (under QEMU): full sync from empty';
const TITLE_CHANGE = 'IPVS proxier (under QEMU): one endpoint added';

function failed(why: string, p: Plan): Section[] {
  const rows = p.sizes.map((n) => [`${formatCount(n)} × ${ENDPOINTS}`, '—', '—', `**not measured**: ${why}`]);
  const columns = [{ title: 'size' }, { title: 'ours' }, { title: 'exec' }, { title: 'status' }];
  return [
    {
      title: TITLE_FULL,
      description: 'See below.',
      columns,
      rows,
      targets: [
        {
          what: '#5 IPVS full sync and one-endpoint update vs exec',
          target: 'figures side by side (no threshold set)',
          status: 'not measured',
          detail: why,
        },
      ],
    },
    { title: TITLE_CHANGE, description: 'See above.', columns, rows },
  ];
}

async function ipvsSections(opts: BenchOptions): Promise<Section[]> {
  const p = plan(opts.quick);
  opts.log(
    `ipvs: booting QEMU (Debian 6.1 kernel), sizes ${p.sizes.map(formatCount).join(', ')} × ${ENDPOINTS}, ${p.runs.join('/')} rounds, ${p.changes} changes per round`,
  );
  // Results and state dumps go outside the harness's run directories, which other VM runs prune.
  const base = join(VM_CACHE, 'bench-ipvs');
  if (existsSync(base))
    for (const d of readdirSync(base).sort().slice(0, -2)) rmSync(join(base, d), { recursive: true, force: true });
  const outDir = join(base, `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`);
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, 'ipvs-bench.json');
  const vm = await runInVm({
    script: `exec ./node_modules/.bin/node test/bench/ipvs-vm.ts '${out}' ${p.sizes.join(',')} ${p.runs.join(',')} ${p.changes} ${p.warmupN}\n`,
    timeoutMs: p.timeoutMs,
    memoryMb: 3072,
    // QEMU's multi-threaded TCG crashed V8 under load (once in 8 runs of this benchmark); see harness.ts.
    tcgThread: 'single',
  });
  opts.log(
    `ipvs: VM ${vm.timedOut ? 'TIMED OUT' : `status ${vm.status}`} after ${formatMs(vm.totalMs)} (boot ${vm.bootMs === null ? '?' : formatMs(vm.bootMs)}), ${vm.runDir}, results in ${outDir}`,
  );
  const text = existsSync(out) ? readFileSync(out, 'utf8') : undefined;
  if (!text) {
    const why = `the VM left no results (${vm.timedOut ? 'timed out' : `status ${vm.status}`}; ${vm.runDir})`;
    opts.log(`ipvs: ${why}\n${vm.output.slice(-3000)}\n${vm.console.slice(-3000)}`);
    return failed(why, p);
  }
  const r = JSON.parse(text) as VmBenchResult;
  if (r.error) opts.log(`ipvs: ${r.error}`);
  for (const s of r.sizes) if (s.error) opts.log(`ipvs: n=${s.n}: ${s.error}`);
  if (vm.status !== 0 || vm.timedOut) opts.log(`ipvs: payload output:\n${vm.output.slice(-3000)}`);
  return render(r, p, vm, opts.quick);
}

const S = (xs: number[]): ReturnType<typeof summarize> | undefined => (xs.length ? summarize(xs) : undefined);

/** median, spread, ratio to the exec total ('baseline' for it, '' for parts), runs. */
function cells(xs: number[], kind: 'way' | 'part' | 'baseline', baseline: number | undefined): string[] {
  const s = S(xs);
  if (!s) return ['—', '—', '—', '0'];
  const ratio =
    kind === 'baseline' ? 'baseline' : kind === 'part' || baseline === undefined ? '' : formatRatio(baseline, s.median);
  return [formatMs(s.median), formatSpread(s), ratio, formatCount(s.runs)];
}

/** What the run did about the tools' per-line /etc look-ups (ipvs-vm.ts localEtc). */
function etcNote(r: VmBenchResult): string {
  const why =
    '`ipset restore` opens /etc/protocols once per entry (getprotobyname("tcp"), seen with strace: 1,000 opens for 1,000 entries) and `ipvsadm` looks each port up in /etc/services before parsing it as a number; ' +
    'inside this VM /etc is the host’s, over 9p without a page cache';
  if (r.localEtc && !r.localEtc.startsWith('not done'))
    return `${why}, so the driver bound tmpfs copies over ${r.localEtc} in the guest’s mount table (as on a node, where they are page-cache hits).`;
  return `**The exec side is inflated by the VM here:** ${why}, and these copies were not moved to tmpfs in this run (${r.localEtc ?? 'the driver predates that step'}): every such open is several round trips to the host, which a real node does not pay. \`ipset restore\` and \`ipvsadm --restore\` figures are therefore upper bounds.`;
}

const EXEC_FULL = 'ip, ipset, ipvsadm, iptables-nft-restore';
const EXEC_CHANGE = 'ipvsadm -a, iptables-nft-restore --noflush';

/** The summary's figures: full sync and one change, ours and the tools, per size; all under QEMU. */
function ipvsFigures(r: VmBenchResult): Figure[] {
  return r.sizes.flatMap((s) => {
    const at = { mode: 'ipvs' as const, services: s.n, endpoints: ENDPOINTS, unit: 'ms' as const, where: 'QEMU' };
    const m = (xs: number[]): number => S(xs)?.median ?? Number.NaN;
    const changes = (side: { changes: { totalMs: number }[] }[]): number[] =>
      side.flatMap((x) => x.changes.map((c) => c.totalMs));
    return [
      ...figure({ ...at, metric: 'fullSync', series: OURS, value: m(s.ours.map((x) => x.full.totalMs)) }),
      ...figure({ ...at, metric: 'fullSync', series: EXEC_FULL, value: m(s.exec.map((x) => x.full.totalMs)) }),
      ...figure({ ...at, metric: 'oneChange', series: OURS, value: m(changes(s.ours)) }),
      ...figure({ ...at, metric: 'oneChange', series: EXEC_CHANGE, value: m(changes(s.exec)) }),
    ];
  });
}

export function render(
  r: VmBenchResult,
  p: Plan,
  vm: { totalMs: number; bootMs: number | null; payloadMs: number | null; status: number | null; timedOut: boolean },
  quick: boolean,
): Section[] {
  const columns = [
    { title: 'way' },
    { title: 'Services × endpoints' },
    { title: 'median', align: 'right' as const },
    { title: 'spread', align: 'right' as const },
    { title: 'vs exec', align: 'right' as const },
    { title: 'runs', align: 'right' as const },
  ];
  const fullRows: string[][] = [];
  const changeRows: string[][] = [];
  const targets: Target[] = [];
  const problems: string[] = [];
  const size = (s: SizeResult): string => `${formatCount(s.n)} × ${ENDPOINTS}`;
  for (const s of r.sizes) {
    const o: OursResult[] = s.ours;
    const e: ExecResult[] = s.exec;
    if (s.error) problems.push(`${formatCount(s.n)} Services: ${s.error.slice(0, 400)}`);
    const execFull = S(e.map((x) => x.full.totalMs))?.median;
    const f = (label: string, xs: number[], kind: 'way' | 'part' | 'baseline'): void =>
      void fullRows.push([label, size(s), ...cells(xs, kind, execFull)]);
    f(
      '**ours: model + proxier full sync**',
      o.map((x) => x.full.totalMs),
      'way',
    );
    f(
      'ours, of which the model (feed + checkout)',
      o.map((x) => x.full.modelMs),
      'part',
    );
    f(
      'ours, of which the proxier’s sync',
      o.map((x) => x.full.syncMs),
      'part',
    );
    f(
      'ours, of which in kernel calls (the proxier’s kernelMs)',
      o.map((x) => x.full.kernelMs),
      'part',
    );
    f(
      '**exec: the four tools, total**',
      e.map((x) => x.full.totalMs),
      'baseline',
    );
    f(
      'exec, of which `ip -batch` (kube-ipvs0 + VIPs)',
      e.map((x) => x.full.ipMs),
      'part',
    );
    f(
      'exec, of which `ipset restore`',
      e.map((x) => x.full.ipsetMs),
      'part',
    );
    f(
      'exec, of which `ipvsadm --restore`',
      e.map((x) => x.full.ipvsadmMs),
      'part',
    );
    f(
      'exec, of which `iptables-nft-restore`',
      e.map((x) => x.full.iptablesMs),
      'part',
    );

    const oc = o.flatMap((x) => x.changes);
    const ec = e.flatMap((x) => x.changes);
    const execChange = S(ec.map((x) => x.totalMs))?.median;
    const c = (label: string, xs: number[], kind: 'way' | 'part' | 'baseline'): void =>
      void changeRows.push([label, size(s), ...cells(xs, kind, execChange)]);
    c(
      '**ours: model + proxier incremental sync**',
      oc.map((x) => x.totalMs),
      'way',
    );
    c(
      'ours, of which the proxier’s sync',
      oc.map((x) => x.syncMs),
      'part',
    );
    c(
      'ours, of which in kernel calls',
      oc.map((x) => x.kernelMs),
      'part',
    );
    c(
      '**exec: `ipvsadm -a` + `iptables-nft-restore --noflush`**',
      ec.map((x) => x.totalMs),
      'baseline',
    );
    c(
      'exec, of which `ipvsadm -a`',
      ec.map((x) => x.ipvsadmMs),
      'part',
    );
    c(
      'exec, of which `iptables-nft-restore --noflush` (KUBE-* chains)',
      ec.map((x) => x.iptablesMs),
      'part',
    );

    const of = S(o.map((x) => x.full.totalMs));
    const och = S(oc.map((x) => x.totalMs));
    const fullOps = o[0]?.full;
    const changeOps = oc[0];
    targets.push({
      what: `#5 IPVS full sync + one-endpoint change, ${formatCount(s.n)} × ${ENDPOINTS} Services, vs exec (QEMU)`,
      target: 'figures side by side (no threshold set)',
      status: of && och && execFull !== undefined && execChange !== undefined && !quick ? 'measured' : 'not measured',
      detail:
        of && och && execFull !== undefined && execChange !== undefined
          ? `full: ours ${formatMs(of.median)} vs exec ${formatMs(execFull)} (${formatRatio(execFull, of.median)}); one endpoint: ours ${formatMs(och.median)} vs exec ${formatMs(execChange)} (${formatRatio(execChange, och.median)})` +
            `${fullOps !== undefined ? `; ${formatCount(fullOps.requests)} netlink requests in ${formatCount(fullOps.ops)} round trips per full sync, ${changeOps ? `${changeOps.requests} in ${changeOps.ops}` : '?'} per change` : ''}${quick ? ' (quick mode)' : ''}`
          : `not measured${s.error ? `: ${s.error.slice(0, 200)}` : ''}`,
    });
    const cnt = o[0]?.counts;
    const ecnt = e[0]?.counts;
    if (cnt && ecnt && JSON.stringify(cnt) !== JSON.stringify(ecnt))
      problems.push(
        `${formatCount(s.n)} Services: the exec side’s state differs from ours: ours ${JSON.stringify(cnt)}, exec ${JSON.stringify(ecnt)}`,
      );
    if (
      cnt &&
      (cnt.virtualServers !== s.n ||
        cnt.realServers !== s.n * ENDPOINTS ||
        cnt.clusterIpEntries !== s.n ||
        cnt.vips !== s.n)
    ) {
      problems.push(`${formatCount(s.n)} Services: our full sync left ${JSON.stringify(cnt)}`);
    }
  }
  const counts = r.sizes
    .map(
      (s) =>
        s.ours[0]?.counts &&
        `${formatCount(s.n)} Services: ${formatCount(s.ours[0].counts.virtualServers)} virtual servers, ${formatCount(s.ours[0].counts.realServers)} real servers, ${formatCount(s.ours[0].counts.clusterIpEntries)} KUBE-CLUSTER-IP entries, ${formatCount(s.ours[0].counts.vips)} VIPs, ${s.ours[0].counts.ruleLines} companion rules`,
    )
    .filter(Boolean);
  const ops = r.sizes
    .map((s) => {
      const x = s.ours[0];
      const ch = x?.changes[0];
      return (
        x &&
        `${formatCount(s.n)}: ${formatCount(x.full.requests)} requests in ${formatCount(x.full.ops)} round trips per full sync, ${ch ? `${ch.requests} in ${ch.ops}` : '?'} per change`
      );
    })
    .filter(Boolean);
  const init = r.sizes.flatMap((s) => s.ours.map((x) => x.initMs));
  const vmLine =
    `One QEMU boot (${r.cpus} vCPUs, software emulation on a 2-core host shared with other work) ran everything: ` +
    `boot and power-off ${vm.bootMs === null ? '?' : formatMs(vm.bootMs)}, payload ${vm.payloadMs === null ? '?' : formatMs(vm.payloadMs)}, total ${formatMs(vm.totalMs)}` +
    `${vm.timedOut ? ' (**timed out**)' : vm.status !== 0 ? ` (payload status ${vm.status})` : ''}.`;
  const env = `Inside the VM: kernel ${r.kernel}; ${r.tools.ipvsadm}; ${r.tools.ipset}; ${r.tools.iptables}; Node ${r.tools.node}.`;
  const description =
    `N ClusterIP Services (TCP 80 → 8080) × ${ENDPOINTS} ready endpoints each, none on this node (test/bench/nftables-workload.ts’s objects), in one QEMU boot of Debian’s stock kernel ` +
    `(this machine’s kernel has no IPVS). Under software emulation every figure is many times slower than on hardware: compare the two sides with each other, not with other sections. ` +
    `Each round runs each side in a fresh network namespace (emptied and removed afterwards); ${p.sizes.map((n, i) => `${p.runs[i]} round${p.runs[i] === 1 ? '' : 's'} at ${formatCount(n)}`).join(', ')}, after a warm-up round of ${p.warmupN} Services. ` +
    '**Ours**: the IPVS proxier as the daemon builds it (`buildProxiers`, `--proxy-mode ipvs`: virtual and real servers over generic netlink, the ipsets over nfnetlink, kube-ipvs0 and its VIPs over rtnetlink, the iptables-nft companion rules over nf_tables), ' +
    'fed by the model (ChangeTracker), timed inside its process (no start-up: the daemon is already running). ' +
    '**Exec**: the state our first full sync left, read back (`ip addr`, `ipset save`, `ipvsadm -Sn`, `iptables-nft-save`), written into a fresh namespace by ' +
    '`ip -batch` (kube-ipvs0 and its VIPs; upstream binds them over netlink, this is the stand-in), `ipset restore` (all KUBE-* sets with their entries), `ipvsadm --restore` (virtual servers, rr, and real servers, masquerade, weight 1) ' +
    'and `iptables-nft-restore` (nat and filter tables with the KUBE-* chains and jumps), each timed from spawn to exit, process start-up included.';
  const full: Section = {
    figures: ipvsFigures(r),
    title: TITLE_FULL,
    description: `${description} ${env}`,
    columns,
    rows: fullRows,
    notes: [
      '“vs exec” is how many times faster than the exec total (below 1×: slower). Spread: min–max (fewer than 10 runs); a single run has none.',
      `Ours excludes start-up (\`init()\`: sysctls, the scheduler probe, ipset type checks): median ${init.length ? formatMs(summarize(init).median) : '?'}, once per daemon start.`,
      `Netlink requests of our syncs: IPVS has no transactions, so each step's requests (VIPs, then virtual servers, then real servers, then set entries, then removals) are pipelined, up to 256 per datagram, and the step's replies read before the next step starts (a virtual server exists before its real servers): ${ops.join('; ')}.`,
      `State after our full sync, read back with the tools: ${counts.join('; ')}; the exec side restored the same (checked by the same reads).`,
      etcNote(r),
      'Under QEMU every exec’d tool also loads its binary and libraries over 9p, which a real node serves from its page cache: process start-up weighs more on the exec side here than on a node.',
      vmLine,
      ...(problems.length ? [`**Problems:** ${problems.join('; ')}.`] : []),
    ],
    targets,
  };
  const change: Section = {
    title: TITLE_CHANGE,
    description:
      `After each side’s full sync, ${p.changes} one-endpoint changes per round (one Service’s EndpointSlice gains an address; a different Service each time), in the same namespaces and boot as above. ` +
      '**Ours**: the changed slice fed to the model, the checkout, the proxier’s incremental sync (one new real server; the node’s addresses are read on full syncs only). ' +
      '**Exec**: one `ipvsadm -a -t VIP:80 -r EP:8080 -m -w 1` process, plus one `iptables-nft-restore --noflush` of the KUBE-* chains and their rules ' +
      '(declared with `:KUBE-… - [0:0]`, so flushed and rewritten), which upstream’s IPVS proxier restores on every sync. ' +
      'Not counted on the exec side, so it is favoured: upstream also lists every virtual server and real server over netlink each sync, checks its jump rules with one `iptables -C` process each, and adds or deletes changed ipset entries with one `ipset` process each (none change here: no endpoint is local).',
    columns,
    rows: changeRows,
    notes: [
      `Samples: every change of every round (${p.changes} per round); spread p10–p90 from 10 samples on.`,
      vmLine,
    ],
  };
  return [full, change];
}

export const bench: Bench = { needsRoot: true, run: ipvsSections };
