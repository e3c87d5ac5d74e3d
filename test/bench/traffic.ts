// The per-Service traffic counters' cost on the packet path (issue 19): first-packet latency
// (a new TCP connection through a ClusterIP) with and without --service-traffic-metrics, in
// nftables mode, at 1,000 and 10,000 Services × 10 endpoints (--quick: 200).
//
// One cluster per size (client → node → one pod holding the endpoints of the first and the
// last Service). The node's proxier is started alternately without and with the counters
// (each start is a full sync over the same table: the counting chains and maps come and go),
// and each block times connects to the first and the last Service, rotating which goes first;
// alternating blocks spread the machine's drift over both configurations. A connection with
// counters pays two extra verdict-map lookups in the nat hook's first packet (one goto to a
// counter) and one in filter prerouting per packet.
//
// The iptables mode has no row: its counters are those iptables-nft puts in every rule anyway,
// so the flag changes nothing in its ruleset or on its packet path.
//
// Needs root. In the suite: npm run bench -- traffic [--quick].

import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { makeCluster } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { clusterIP, ENDPOINTS, endpointIP, SERVICE_PORT } from './nftables-workload.ts';
import type { Bench, BenchOptions, Section } from './section.ts';
import { formatCount, formatMs, formatSpread, summarize } from './stats.ts';
import { settle } from './settle.ts';

const AGENT = new URL('./nftables-agent.ts', import.meta.url).href;

interface Config {
  sizes: number[];
  /** Alternating blocks per configuration. */
  blocks: number;
  /** Connects per target per block. */
  connects: number;
}

const FULL: Config = { sizes: [1_000, 10_000], blocks: 4, connects: 200 };
const QUICK: Config = { sizes: [200], blocks: 2, connects: 20 };

interface SizeResult {
  n: number;
  /** ms, every connect to the first and the last Service, per configuration. */
  off: number[];
  on: number[];
  /** Connections the counters saw for the first Service's cluster IP, and how many were made. */
  counted: number | undefined;
  made: number;
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

async function measureSize(n: number, cfg: Config, log: (s: string) => void): Promise<SizeResult> {
  const c = await cluster('trfb');
  try {
    const pod = c.pods[0]!;
    for (const i of [0, n - 1])
      for (let e = 0; e < ENDPOINTS; e++) await pod.run('ip', 'addr', 'add', `${endpointIP(i, e)}/32`, 'dev', 'eth0');
    await c.node.run('ip', 'route', 'add', '100.64.0.0/10', 'dev', 'pod1');
    const targets = [
      { host: clusterIP(0), port: SERVICE_PORT },
      { host: clusterIP(n - 1), port: SERVICE_PORT },
    ];
    const off: number[] = [];
    const on: number[] = [];
    let counted: number | undefined;
    for (let b = 0; b < cfg.blocks * 2; b++) {
      const counters = b % 2 === 1;
      await c.nodeAgent.call(AGENT, 'start', n, counters);
      await c.nodeAgent.call(AGENT, 'fullSync');
      // Bounded: on a machine shared with other work the CPUs may never go quiet.
      await settle({ boundMs: 10_000 });
      log(`traffic: ${formatCount(n)}, block ${b + 1}/${cfg.blocks * 2}, counters ${counters ? 'on' : 'off'}`);
      // The rotation's warm-up (20 rounds) comes before each block's samples.
      const samples = await c.clientAgent.call<number[][]>(AGENT, 'connectLatency', targets, cfg.connects);
      (counters ? on : off).push(...samples.flat().map((u) => u / 1000));
      if (counters) counted = await c.nodeAgent.call<number | undefined>(AGENT, 'firstServiceConnections');
    }
    await c.nodeAgent.call(AGENT, 'stop');
    // Each block starts from no counters (the block before removed them); the warm-up's connects count too.
    return { n, off, on, counted, made: cfg.connects + 20 };
  } finally {
    await c.destroy();
  }
}

async function run(opts: BenchOptions): Promise<Section[]> {
  const cfg = opts.quick ? QUICK : FULL;
  const results: SizeResult[] = [];
  for (const n of cfg.sizes) results.push(await measureSize(n, cfg, opts.log));
  const rows = results.map((r) => {
    const off = summarize(r.off);
    const on = summarize(r.on);
    const diff = on.median - off.median;
    return [
      `${formatCount(r.n)} × ${ENDPOINTS}`,
      `${formatMs(off.median)} (${formatSpread(off)})`,
      `${formatMs(on.median)} (${formatSpread(on)})`,
      `${diff >= 0 ? '+' : ''}${formatMs(diff)} (${((diff / off.median) * 100).toFixed(1)} %)`,
      String(r.off.length),
    ];
  });
  const last = results.at(-1);
  return [
    {
      title: 'Per-Service traffic counters (issue 19): first-packet latency with and without, nftables mode',
      description:
        'A new TCP connection from a client namespace through the node to a ClusterIP (DNAT to one of 10 endpoints on one pod namespace), timed from connect() to established, to the first and the last of N Services. The node’s NftablesProxier is restarted alternately without and with --service-traffic-metrics (a full sync each time over the same table), ' +
        `${cfg.blocks} blocks each of ${cfg.connects} connects per target after 20 of warm-up. With counters the first packet meets two more verdict-map lookups (nat: connections; filter prerouting: packets and bytes) and every later packet one. iptables mode: the flag changes nothing (iptables-nft counts every rule anyway), so it has no row.`,
      columns: [
        { title: 'Services × endpoints' },
        { title: 'counters off: median (spread)', align: 'right' },
        { title: 'counters on: median (spread)', align: 'right' },
        { title: 'difference of medians', align: 'right' },
        { title: 'connects each', align: 'right' },
      ],
      rows,
      notes: last
        ? [
            `Check that the counters counted: at ${formatCount(last.n)} Services, the first Service’s cluster-IP connection counter read ${last.counted ?? 'nothing'} after the last block (that block made ${last.made}).`,
          ]
        : [],
      targets: results.map((r) => {
        const off = summarize(r.off).median;
        const on = summarize(r.on).median;
        return {
          what: `#19 first-packet cost of the counters, ${formatCount(r.n)} Services`,
          target: 'nothing measurable',
          status: 'measured' as const,
          detail: `${formatMs(off)} → ${formatMs(on)} (median)`,
        };
      }),
    },
  ];
}

export const bench: Bench = { needsRoot: true, run };
