// Issue 15's benchmark: the same client → ClusterIP:port traffic through the real modes, in one
// run and the same namespaces. The node namespace's agent runs both proxiers from the model (as
// the kernel tests do): the NftablesProxier (its kube-proxy table) for one Service and the
// UserspaceProxier (its ProxyPorts and the KUBE-PORTALS rules it writes) for another, each with
// its own ClusterIP; a third column sends the traffic straight to the pod.
//
//   throughput      one TCP stream of N MiB into a byte sink on a pod, until the sink's count returns
//   connections/s   connect, read the pod's one-line answer, close; 64 at a time
//   round trip      one line echoed by a pod, sequentially on one connection: p50/p99
//   RSS             the proxy's process before and after N idle connections through the userspace mode
//   responsiveness  with no connection and with those N held open: a new Service's sync and the
//                   time until a client's connection to it is answered; a call into the proxy's
//                   process (its event loop, which also serves healthz and metrics in the daemon)
//
// N idle connections: 9,500, not 10,000: each takes two descriptors in the proxy's process and
// this machine's hard RLIMIT_NOFILE is 20,000 (raising it is not permitted here).

import os from 'node:os';
import type { Cluster } from '../helpers/cluster.ts';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';
import type { Figure } from './figures.ts';
import { OURS, figure } from './figures.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, percentile, summarize } from './stats.ts';

const A = new URL('./userspace-agent.ts', import.meta.url).href;
const NFT = new URL('../kernel/scenarios/nft-proxier.ts', import.meta.url).href;
const USP = new URL('../kernel/scenarios/us-proxier.ts', import.meta.url).href;
const NFT_VIP = '10.96.0.20';
const US_VIP = '10.96.0.21';
const IDLE_VIP = '10.96.0.22';
const SINK = 9000;
const ECHO_PORT = 8080;
const LINES = 8081;
const NODE = node('node-a', { internal: [NODE_IP] });
/**
 * No Service CIDR for the nftables proxier: its "drop unallocated ClusterIPs" rule would drop the
 * userspace mode's. The client's subnet (10.1.0.0/24) counts as a pod range, so its connections
 * are not masqueraded (as a pod's are not): one cluster CIDR covers it and the pods' 10.244/16,
 * since detect-local takes only the first CIDR of a family (as upstream).
 */
const NFT_MODEL = { clusterCIDRs: ['10.0.0.0/8'] };
const US_MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
const N_IDLE = 9_500;

interface Way {
  name: string;
  host: string;
}

interface Change {
  errors: string[];
}

/**
 * One Service with the sink, echo and lines ports, on one pod. The nftables mode's is on another
 * pod than the one the direct column reaches: both carry the client's own address to the pod,
 * with different TCP timestamp clocks (the client keys them by destination, the VIP or the pod),
 * so a port reused within the pod's TIME_WAIT had its SYN dropped (TcpExtPAWSTimewait) and
 * retransmitted a second later, thousands of times per run: the bench's set-up, not the mode.
 */
function benchService(name: string, clusterIP: string, pod: number): { services: Service[]; slices: EndpointSlice[] } {
  const ports = [
    { name: 'sink', port: SINK },
    { name: 'echo', port: ECHO_PORT },
    { name: 'lines', port: LINES },
  ];
  return {
    services: [svc(name, { clusterIP, ports: ports.map((p) => ({ ...p, protocol: 'TCP' })) })],
    slices: [slice(`${name}-1`, name, [ep(podIP(pod))], { ports: ports.map((p) => ({ ...p, protocol: 'TCP' })) })],
  };
}

async function applyTo(c: Cluster, module: string, change: object): Promise<void> {
  const r = await c.nodeAgent.call<Change>(module, 'apply', change);
  if (r.errors.length) throw new Error(`${module === NFT ? 'nftables' : 'userspace'} sync: ${r.errors.join('; ')}`);
}

async function setUp(c: Cluster): Promise<Way[]> {
  await Promise.all(c.podAgents.slice(0, 2).map((a) => a.call(A, 'serveDiscard', SINK)));
  await Promise.all(c.podAgents.map((a, i) => a.call(ECHO, 'serveStream', `pod${i + 1}`, LINES)));
  await c.nodeAgent.call(NFT, 'start', NFT_MODEL);
  await c.nodeAgent.call(USP, 'start', US_MODEL);
  await applyTo(c, NFT, { node: NODE, ...benchService('bench-nft', NFT_VIP, 1) });
  const us = benchService('bench-us', US_VIP, 0);
  const idle = svc('idle', { clusterIP: IDLE_VIP, ports: [{ name: 'lines', protocol: 'TCP', port: LINES }] });
  const idleSlice = slice('idle-1', 'idle', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))], {
    ports: [{ name: 'lines', protocol: 'TCP', port: LINES }],
  });
  await applyTo(c, USP, { node: NODE, services: [...us.services, idle], slices: [...us.slices, idleSlice] });
  return [
    { name: 'direct to the pod', host: podIP(0) },
    { name: 'nftables mode', host: NFT_VIP },
    { name: 'userspace mode', host: US_VIP },
  ];
}

interface Responsiveness {
  /** The new Service's apply + sync, ms, as the bench sees the call. */
  syncMs: number[];
  /** From the apply call until a client's connection to the new Service was answered, ms. */
  landMs: number[];
  /** Calls into the proxy's process, µs. */
  callUs: number[];
}

interface Figures {
  mibPerS: number[][];
  connPerS: number[][];
  rtt: number[][];
  failedConnections: number;
  rss: { before: number; after: number; opened: number; active: number };
  idle: Responsiveness;
  loaded: Responsiveness;
  load: number[];
}

let newServices = 0;

/** `rounds` new userspace-mode Services, one at a time, each timed until it answers; then `calls` pings. */
async function responsiveness(c: Cluster, rounds: number, calls: number): Promise<Responsiveness> {
  const out: Responsiveness = { syncMs: [], landMs: [], callUs: [] };
  for (let r = 0; r < rounds; r++) {
    const k = ++newServices;
    const name = `new-${k}`;
    const vip = `10.96.1.${k}`;
    const change = {
      services: [svc(name, { clusterIP: vip, ports: [{ name: 'p', protocol: 'TCP', port: 80 }] })],
      slices: [slice(`${name}-1`, name, [ep(podIP(1))], { ports: [{ name: 'p', protocol: 'TCP', port: ECHO_PORT }] })],
    };
    const t0 = Date.now();
    const [syncMs, answeredAt] = await Promise.all([
      applyTo(c, USP, change).then(() => Date.now() - t0),
      c.clientAgent.call<number>(A, 'untilAnswered', vip, 80, 10_000),
    ]);
    if (Number.isNaN(answeredAt)) throw new Error(`${name} (${vip}:80) did not answer within 10 s`);
    out.syncMs.push(syncMs);
    out.landMs.push(answeredAt - t0);
  }
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await c.nodeAgent.call(A, 'ping');
    out.callUs.push((performance.now() - t0) * 1000);
  }
  return out;
}

async function measure(c: Cluster, ways: Way[], opts: BenchOptions, f: Figures): Promise<void> {
  const mib = opts.quick ? 64 : 512;
  const runs = opts.quick ? 1 : 5;
  const conns = opts.quick ? 2_000 : 20_000;
  const trips = opts.quick ? 1_000 : 10_000;
  const cl = c.clientAgent;
  for (let r = 0; r < runs; r++) {
    for (const [i, w] of ways.entries()) {
      opts.log(`userspace: run ${r + 1}/${runs}, ${w.name}`);
      const ms = await cl.call<number>(A, 'throughput', w.host, SINK, mib << 20);
      f.mibPerS[i]!.push(mib / (ms / 1000));
      const cr = await cl.call<{ ms: number; ok: number }>(A, 'connectionRate', w.host, ECHO_PORT, conns, 64);
      f.connPerS[i]!.push(cr.ok / (cr.ms / 1000));
      f.failedConnections += conns - cr.ok;
      f.load.push(os.loadavg()[0]!);
    }
  }
  for (const [i, w] of ways.entries()) f.rtt[i] = await cl.call<number[]>(A, 'roundTrips', w.host, LINES, trips);
}

/**
 * Before any traffic (RSS after moving gigabytes says more about malloc than about connections):
 * responsiveness with no connection, N idle connections through the userspace mode's ClusterIP,
 * responsiveness with them held open.
 */
async function measureIdle(c: Cluster, n: number, opts: BenchOptions, f: Figures): Promise<void> {
  const rounds = opts.quick ? 3 : 10;
  const calls = opts.quick ? 100 : 1_000;
  opts.log('userspace: responsiveness with no connection');
  f.idle = await responsiveness(c, rounds, calls);
  const before = await c.nodeAgent.call<number>(A, 'rssMiB');
  opts.log(`userspace: ${formatCount(n)} idle connections through ${IDLE_VIP}`);
  const opened = await c.clientAgent.call<number>(A, 'openIdle', IDLE_VIP, LINES, n);
  let active = 0;
  for (let i = 0; i < 100 && active < opened; i++) {
    active = await c.nodeAgent.call<number>(USP, 'activeConnections');
    if (active < opened) await new Promise((r) => setTimeout(r, 100));
  }
  const after = await c.nodeAgent.call<number>(A, 'rssMiB');
  f.rss = { before, after, opened, active };
  opts.log(`userspace: responsiveness with ${formatCount(active)} connections held open`);
  f.loaded = await responsiveness(c, rounds, calls);
  await c.clientAgent.call(A, 'closeIdle');
}

const fmtRate = (xs: number[], unit: string): string => {
  const s = summarize(xs);
  const spread = s.runs === 1 ? 'one run' : `${s.runs >= 10 ? 'p10–p90' : 'min–max'} ${spreadNum(s)}`;
  return `${formatCount(s.median)} ${unit} (${spread})`;
};
const spreadNum = (s: ReturnType<typeof summarize>): string =>
  s.runs >= 10 ? `${formatCount(s.p10)}–${formatCount(s.p90)}` : `${formatCount(s.min)}–${formatCount(s.max)}`;
const us = (x: number): string => `${x.toFixed(0)} µs`;
const added = (x: number): string => `${x < 0 ? '−' : '+'}${us(Math.abs(x))}`;
const ms = (xs: number[]): string => {
  const s = summarize(xs);
  return `${s.median.toFixed(0)} ms (${s.runs >= 10 ? 'p10–p90' : 'min–max'} ${(s.runs >= 10 ? s.p10 : s.min).toFixed(0)}–${(s.runs >= 10 ? s.p90 : s.max).toFixed(0)})`;
};
const callQ = (r: Responsiveness): string => `${us(percentile(r.callUs, 50))} / ${us(percentile(r.callUs, 99))}`;

function responsivenessNote(f: Figures, quick: boolean): string {
  const rounds = quick ? 3 : 10;
  return (
    `Responsiveness (${rounds} new userspace-mode Services one after another, each: apply + sync in the node's agent, while the client ` +
    'opens a connection every 2 ms until one is answered; then calls into the proxy’s process, p50 / p99): ' +
    `no connection — sync ${ms(f.idle.syncMs)}, answering after ${ms(f.idle.landMs)}, call ${callQ(f.idle)}; ` +
    `${formatCount(f.rss.active)} connections held open — sync ${ms(f.loaded.syncMs)}, answering after ${ms(f.loaded.landMs)}, ` +
    `call ${callQ(f.loaded)}.`
  );
}

function targets(f: Figures, quick: boolean): Target[] {
  const med = (xs: number[]) => summarize(xs).median;
  const tputRatio = med(f.mibPerS[2]!) / med(f.mibPerS[0]!);
  const connRate = med(f.connPerS[2]!);
  const pct = (x: number): string => `${(x * 100).toFixed(0)} %`;
  const perConnKiB = ((f.rss.after - f.rss.before) * 1024) / Math.max(1, f.rss.active);
  return [
    {
      what: '#15 userspace mode one-stream TCP throughput (client → ClusterIP) vs direct to the endpoint',
      target: '≥ 50 % of direct',
      status: quick ? 'not measured' : tputRatio >= 0.5 ? 'met' : 'missed',
      detail:
        `${formatCount(med(f.mibPerS[2]!))} vs ${formatCount(med(f.mibPerS[0]!))} MiB/s (${pct(tputRatio)}; ` +
        `nftables mode ${formatCount(med(f.mibPerS[1]!))} MiB/s)`,
    },
    {
      what: '#15 userspace mode new connections per second (client → ClusterIP)',
      target: '≥ 5,000/s',
      status: quick ? 'not measured' : connRate >= 5000 ? 'met' : 'missed',
      detail:
        `${formatCount(connRate)}/s (direct to the pod ${formatCount(med(f.connPerS[0]!))}/s, ` +
        `nftables mode ${formatCount(med(f.connPerS[1]!))}/s, from the same client)`,
    },
    {
      what: `#15 userspace mode RSS with ${formatCount(f.rss.active)} idle connections (10,000 asked)`,
      target: 'measured (no threshold set)',
      status: 'measured',
      detail:
        `${f.rss.before.toFixed(0)} → ${f.rss.after.toFixed(0)} MiB (${perConnKiB.toFixed(1)} KiB per connection); ` +
        '10,000 cannot be held here: two descriptors each, hard RLIMIT_NOFILE 20,000',
    },
    {
      what: `#15 a change lands with ${formatCount(f.rss.active)} connections held open`,
      target: 'measured (no threshold set)',
      status: 'measured',
      detail: `new Service answering after ${ms(f.loaded.landMs)} (no connection: ${ms(f.idle.landMs)})`,
    },
  ];
}

/** The summary's figure: the round trip's median through the userspace proxy, beside direct and nftables mode. */
function rttFigures(f: Figures): Figure[] {
  const at = {
    mode: 'userspace' as const,
    metric: 'roundTrip' as const,
    services: 1,
    endpoints: 1,
    unit: 'ms' as const,
  };
  const ms = (i: number): number => (f.rtt[i]!.length ? percentile(f.rtt[i]!, 50) / 1000 : Number.NaN);
  return [
    ...figure({ ...at, series: OURS, value: ms(2) }),
    ...figure({ ...at, series: 'direct to the pod', value: ms(0) }),
    ...figure({ ...at, series: 'nftables mode', value: ms(1) }),
  ];
}

function section(f: Figures, opts: BenchOptions): Section {
  const p = (i: number, q: number) => percentile(f.rtt[i]!, q);
  const loads = summarize(f.load);
  const all = [0, 1, 2];
  const pct = (xs: number[][], i: number) =>
    `${((summarize(xs[i]!).median / summarize(xs[0]!).median) * 100).toFixed(0)} %`;
  const both = (xs: number[][]) => `${pct(xs, 1)} / ${pct(xs, 2)}`;
  const addedBoth = (q: number) => `${added(p(1, q) - p(0, q))} / ${added(p(2, q) - p(0, q))}`;
  const perConnKiB = ((f.rss.after - f.rss.before) * 1024) / Math.max(1, f.rss.active);
  return {
    title: 'Userspace proxy: direct vs nftables mode vs userspace mode',
    description:
      'One run, the same namespaces: a client namespace sends straight to a pod’s address, to the ClusterIP of a ' +
      'Service on another, identical pod that the real NftablesProxier (synced from the model in the node namespace’s agent) ' +
      'serves (the client counted as a pod: not masqueraded), and to the ClusterIP of a ' +
      'Service that the real UserspaceProxier serves (its ProxyPorts in that agent’s process, its KUBE-PORTALS-CONTAINER REDIRECT ' +
      'written by it). All over veth pairs on one machine, so the figures are ' +
      `CPU-bound: the client, the kernel and the proxy share its ${os.cpus().length} CPUs. Throughput: one stream of ` +
      `${opts.quick ? 64 : 512} MiB into a byte sink; connections: ${formatCount(opts.quick ? 2_000 : 20_000)} connect–answer–close, 64 at a time; ` +
      `round trips: ${formatCount(opts.quick ? 1_000 : 10_000)} one-line echoes in a row on one connection (test/bench/userspace.ts).`,
    columns: [
      { title: 'measurement' },
      { title: 'direct to the pod', align: 'right' },
      { title: 'nftables mode', align: 'right' },
      { title: 'userspace mode', align: 'right' },
      { title: 'nftables / userspace vs direct', align: 'right' },
    ],
    rows: [
      ['one-stream throughput', ...f.mibPerS.map((x) => fmtRate(x, 'MiB/s')), both(f.mibPerS)],
      ['new connections per second (64 at a time)', ...f.connPerS.map((x) => fmtRate(x, '/s')), both(f.connPerS)],
      ['round trip p50', ...all.map((i) => us(p(i, 50))), addedBoth(50)],
      ['round trip p99', ...all.map((i) => us(p(i, 99))), addedBoth(99)],
    ],
    notes: [
      `RSS of the proxy’s process (Node, the agent, both proxiers and ProxyPorts; after a full GC): ${f.rss.before.toFixed(0)} MiB ` +
        `with no connection, ${f.rss.after.toFixed(0)} MiB with ${formatCount(f.rss.active)} idle connections through the userspace ` +
        `mode’s ClusterIP (${formatCount(f.rss.opened)} opened), ${perConnKiB.toFixed(1)} KiB per connection. ` +
        `${formatCount(N_IDLE)}, not 10,000: each takes two descriptors in the proxy’s process and the hard RLIMIT_NOFILE here is 20,000.`,
      responsivenessNote(f, opts.quick),
      `Connections that failed: ${formatCount(f.failedConnections)}.`,
      `1-minute load average ${loads.min.toFixed(1)}–${loads.max.toFixed(1)} during the runs (2 CPUs, shared with other work).`,
    ],
    targets: targets(f, opts.quick),
    figures: rttFigures(f),
  };
}

async function run(opts: BenchOptions): Promise<Section[]> {
  let destroy: () => Promise<void> = async () => {};
  const none: Responsiveness = { syncMs: [], landMs: [], callUs: [] };
  const f: Figures = {
    mibPerS: [[], [], []],
    connPerS: [[], [], []],
    rtt: [[], [], []],
    failedConnections: 0,
    rss: { before: 0, after: 0, opened: 0, active: 0 },
    idle: none,
    loaded: none,
    load: [],
  };
  try {
    const c = await makeCluster({ teardown: (fn) => void (destroy = fn) }, 'usb', 3, ['--expose-gc']);
    try {
      const ways = await setUp(c);
      await measureIdle(c, opts.quick ? 1_000 : N_IDLE, opts, f);
      await measure(c, ways, opts, f);
    } finally {
      await c.nodeAgent.call(USP, 'stop').catch(() => undefined);
      await c.nodeAgent.call(NFT, 'cleanup').catch(() => undefined);
    }
  } finally {
    await destroy();
  }
  return [section(f, opts)];
}

export const bench: Bench = { needsRoot: true, run };
