// First-packet latency, iptables mode vs nftables mode, in one run (issue 14): a new
// connection's first packet walks the nat KUBE-SERVICES chain rule by rule in iptables mode
// (the first Service's rule is first, the last Service's last), where the nftables mode makes
// one map lookup. For N ClusterIP Services × 10 endpoints (nftables-workload.ts; N = 1,000 /
// 5,000 / 10,000, --quick: 200 / 1,000), per mode, in a cluster of namespaces of its own: the
// proxier's first full sync, the agent's RSS after it, then TCP connects from a client
// namespace through the node to one pod holding the endpoints of the first and the last
// Service (and straight to the pod, no Service), each timed from connect() to established.
//
// Needs root. In the suite: npm run bench -- iptables-latency [--quick].

import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { BACKEND_PORT, makeCluster } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { clusterIP, ENDPOINTS, endpointIP, SERVICE_PORT } from './nftables-workload.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section } from './section.ts';
import type { Summary } from './stats.ts';
import { formatCount, formatMs, formatSpread, summarize } from './stats.ts';
import { settle } from './settle.ts';

const IPT_AGENT = new URL('./iptables-agent.ts', import.meta.url).href;
const NFT_AGENT = new URL('./nftables-agent.ts', import.meta.url).href;
const MiB = 2 ** 20;

type Mode = 'iptables' | 'nftables';
const MODES: readonly Mode[] = ['iptables', 'nftables'];

interface Config {
  sizes: number[];
  connects: number;
}
const FULL: Config = { sizes: [1_000, 5_000, 10_000], connects: 300 };
// One size: first vs last Service needs a long chain, and a smoke test of every module fits in 5 minutes.
const QUICK: Config = { sizes: [1_000], connects: 30 };

interface ModeResult {
  mode: Mode;
  n: number;
  fullSyncMs: number;
  rssMiB: number;
  first: Summary;
  last: Summary;
  direct: Summary;
}

async function cluster(label: string): Promise<Cluster> {
  let destroy: (() => Promise<void>) | undefined;
  try {
    return await makeCluster({ teardown: (fn) => void (destroy = fn) }, label, 1, DAEMON_V8_OPTIONS);
  } catch (e) {
    await destroy?.();
    throw e;
  }
}

async function measure(mode: Mode, n: number, cfg: Config, log: (s: string) => void): Promise<ModeResult> {
  const agent = mode === 'iptables' ? IPT_AGENT : NFT_AGENT;
  const c = await cluster(mode === 'iptables' ? 'iptlat' : 'nftlat');
  try {
    await settle();
    const a = c.nodeAgent;
    await a.call(agent, 'start', n);
    const sync = await a.call<{ totalMs: number }>(agent, 'fullSync');
    const mem = await a.call<{ rssBytes: number }>(agent, 'memory');
    log(`iptables-latency: ${mode}, ${formatCount(n)} Services, full sync ${formatMs(sync.totalMs)}`);
    // Backends: the endpoints of the first and the last Service live on the one pod.
    const pod = c.pods[0]!;
    for (const i of [0, n - 1])
      for (let e = 0; e < ENDPOINTS; e++) await pod.run('ip', 'addr', 'add', `${endpointIP(i, e)}/32`, 'dev', 'eth0');
    await c.node.run('ip', 'route', 'add', '100.64.0.0/10', 'dev', 'pod1');
    await settle();
    const [first, last, direct] = await c.clientAgent.call<number[][]>(
      NFT_AGENT,
      'connectLatency',
      [
        { host: clusterIP(0), port: SERVICE_PORT },
        { host: clusterIP(n - 1), port: SERVICE_PORT },
        { host: endpointIP(0, 0), port: BACKEND_PORT },
      ],
      cfg.connects,
    );
    const ms = (us: readonly number[]): Summary => summarize(us.map((u) => u / 1000));
    return {
      mode,
      n,
      fullSyncMs: sync.totalMs,
      rssMiB: mem.rssBytes / MiB,
      first: ms(first!),
      last: ms(last!),
      direct: ms(direct!),
    };
  } finally {
    await c.destroy();
  }
}

function sections(results: ModeResult[], cfg: Config): Section[] {
  const rows = results.map((r) => [
    formatCount(r.n),
    r.mode,
    `${formatMs(r.first.median)} (${formatSpread(r.first)})`,
    `${formatMs(r.last.median)} (${formatSpread(r.last)})`,
    formatMs(r.last.median - r.first.median),
    `${formatMs(r.direct.median)} (${formatSpread(r.direct)})`,
    `${r.rssMiB.toFixed(0)} MiB`,
  ]);
  return [
    {
      title: 'iptables mode vs nftables mode: first-packet latency, first vs last Service',
      description:
        'N ClusterIP Services × 10 endpoints, one mode at a time in a cluster of its own: the proxier’s first full sync, then from a client namespace through the node to one pod namespace holding the endpoints of the first and the last Service programmed ' +
        `(${cfg.connects} TCP connects per target after 20 of warm-up, targets interleaved in a rotating order, each timed from connect() to established: one SYN/SYN-ACK round trip through DNAT and masquerading). ` +
        'In iptables mode the first packet of a connection walks nat KUBE-SERVICES rule by rule (the last Service’s rule is the N-th, and a connection to no Service, as the direct one, walks all N); in nftables mode it is one map lookup. RSS: the agent process (model and proxier) after the first full sync.',
      columns: [
        { title: 'Services' },
        { title: 'mode' },
        { title: 'first Service (median, spread)', align: 'right' },
        { title: 'last Service', align: 'right' },
        { title: 'last − first', align: 'right' },
        { title: 'direct to the pod', align: 'right' },
        { title: 'RSS after first sync', align: 'right' },
      ],
      rows,
      notes: results.map(
        (r) => `${formatCount(r.n)} ${r.mode}: first full sync ${formatMs(r.fullSyncMs)} (model included)`,
      ),
      targets: [],
      figures: results.flatMap((r) => {
        const at = { mode: r.mode, metric: 'firstPacket' as const, services: r.n, endpoints: 10, unit: 'ms' as const };
        return [
          ...figure({ ...at, series: OURS, variant: 'first Service', value: r.first.median }),
          ...figure({ ...at, series: OURS, variant: 'last Service', value: r.last.median }),
          ...figure({ ...at, series: 'direct to the pod', variant: 'last Service', value: r.direct.median }),
        ];
      }),
    },
  ];
}

export const bench: Bench = {
  needsRoot: true,
  async run(opts: BenchOptions): Promise<Section[]> {
    const cfg = opts.quick ? QUICK : FULL;
    const results: ModeResult[] = [];
    for (const n of cfg.sizes) for (const mode of MODES) results.push(await measure(mode, n, cfg, opts.log));
    return sections(results, cfg);
  },
};
