// The userspace mode's data path (issue 15): src/proxier/userspace/proxy in a node namespace,
// side by side with the same traffic sent straight to the pod and through a kernel DNAT rule
// (the path the nftables mode's rules give a packet), all from a client namespace:
//
//   throughput      one TCP stream of N MiB into a byte sink on a pod, until the sink's count returns
//   connections/s   connect, read the pod's one-line answer, close; 64 at a time
//   round trip      one line echoed by a pod, sequentially on one connection: p50/p99
//   RSS             the proxy process before and after N idle connections through it
//
// The client connects to the proxy's port on the node's address (no KUBE-PORTALS rules: the
// rules and the proxier are another branch's); a REDIRECT would add the kernel's NAT, about what
// the DNAT column costs. N idle connections: 9,000, since each takes two descriptors in the
// proxy and this machine's hard RLIMIT_NOFILE is 20,000 (raising it is not permitted here).

import os from 'node:os';
import type { Cluster } from '../helpers/cluster.ts';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { ProxyPortSpec } from '../../src/proxier/userspace/proxy/index.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, percentile, summarize } from './stats.ts';

const A = new URL('./userspace-agent.ts', import.meta.url).href;
const S = new URL('../kernel/scenarios/userspace-proxy.ts', import.meta.url).href;
const VIP = '10.96.0.20';
/** A Service address whose packets a REDIRECT sends to the proxy's port, as KUBE-PORTALS-CONTAINER does. */
const PORTAL = '10.96.0.21';
const SINK = 9000;
const ECHO_PORT = 8080;
const LINES = 8081;

interface Way {
  name: string;
  host: string;
  port(p: number): number;
}

async function cluster(): Promise<{ c: Cluster; destroy: () => Promise<void> }> {
  let destroy: () => Promise<void> = async () => {};
  try {
    const c = await makeCluster({ teardown: (fn) => void (destroy = fn) }, 'usb', 3, ['--expose-gc']);
    return { c, destroy };
  } catch (e) {
    await destroy();
    throw e;
  }
}

async function setUp(c: Cluster): Promise<{ ways: Way[]; idlePort: number }> {
  await c.podAgents[0]!.call(A, 'serveDiscard', SINK);
  await Promise.all(c.podAgents.map((a, i) => a.call(ECHO, 'serveStream', `pod${i + 1}`, LINES)));
  await c.nodeAgent.call(S, 'start', { family: 'IPv4', listenIP: '0.0.0.0', udpIdleTimeoutMs: 250 });
  const spec = (id: string, port: number, n = 1): ProxyPortSpec => ({
    id,
    name: id,
    protocol: 'TCP',
    affinitySeconds: 0,
    backends: Array.from({ length: n }, (_, i) => ({ ip: podIP(i), port })),
  });
  const r = await c.nodeAgent.call<{ ports: Record<string, number> }>(S, 'apply', [
    spec('sink', SINK),
    spec('echo', ECHO_PORT),
    spec('lines', LINES),
    spec('idle', LINES, 3),
  ]);
  const proxied = new Map([
    [SINK, r.ports.sink!],
    [ECHO_PORT, r.ports.echo!],
    [LINES, r.ports.lines!],
  ]);
  const rules = [SINK, ECHO_PORT, LINES].flatMap((p) => [
    `  ip daddr ${VIP} tcp dport ${p} dnat to ${podIP(0)}:${p}`,
    `  ip daddr ${PORTAL} tcp dport ${p} redirect to :${proxied.get(p)!}`,
  ]);
  const nft = await c.node.exec('nft', ['-f', '-'], {
    input: `table ip kpts_bench {\n chain pre {\n  type nat hook prerouting priority -100;\n${rules.join('\n')}\n }\n}\n`,
  });
  if (nft.code !== 0) throw new Error(`nft: ${nft.stderr}`);
  const ways: Way[] = [
    { name: 'direct to the pod', host: podIP(0), port: (p) => p },
    { name: 'kernel DNAT (the nftables mode’s path)', host: VIP, port: (p) => p },
    { name: 'userspace proxy', host: NODE_IP, port: (p) => proxied.get(p)! },
    { name: 'REDIRECT + userspace proxy', host: PORTAL, port: (p) => p },
  ];
  return { ways, idlePort: r.ports.idle! };
}

interface Figures {
  mibPerS: number[][];
  connPerS: number[][];
  rtt: number[][];
  failedConnections: number;
  rss: { before: number; after: number; n: number; opened: number };
  load: number[];
}

async function measure(c: Cluster, ways: Way[], opts: BenchOptions): Promise<Figures> {
  const mib = opts.quick ? 64 : 512;
  const runs = opts.quick ? 1 : 5;
  const conns = opts.quick ? 2_000 : 20_000;
  const trips = opts.quick ? 1_000 : 10_000;
  const idle = opts.quick ? 1_000 : 9_000;
  const cl = c.clientAgent;
  const f: Figures = {
    mibPerS: ways.map(() => []),
    connPerS: ways.map(() => []),
    rtt: ways.map(() => []),
    failedConnections: 0,
    rss: { before: 0, after: 0, n: idle, opened: 0 },
    load: [],
  };
  for (let r = 0; r < runs; r++) {
    for (const [i, w] of ways.entries()) {
      opts.log(`userspace: run ${r + 1}/${runs}, ${w.name}`);
      const ms = await cl.call<number>(A, 'throughput', w.host, w.port(SINK), mib << 20);
      f.mibPerS[i]!.push(mib / (ms / 1000));
      const cr = await cl.call<{ ms: number; ok: number }>(A, 'connectionRate', w.host, w.port(ECHO_PORT), conns, 64);
      f.connPerS[i]!.push(cr.ok / (cr.ms / 1000));
      f.failedConnections += conns - cr.ok;
      f.load.push(os.loadavg()[0]!);
    }
  }
  for (const [i, w] of ways.entries())
    f.rtt[i] = await cl.call<number[]>(A, 'roundTrips', w.host, w.port(LINES), trips);
  return f;
}

/** Before any traffic: RSS after moving gigabytes says more about malloc than about connections. */
async function measureRss(c: Cluster, port: number, n: number, opts: BenchOptions): Promise<Figures['rss']> {
  const before = await c.nodeAgent.call<number>(A, 'rssMiB');
  opts.log(`userspace: ${formatCount(n)} idle connections`);
  const opened = await c.clientAgent.call<number>(A, 'openIdle', NODE_IP, port, n);
  let active = 0;
  for (let i = 0; i < 100 && active < opened; i++) {
    active = (await c.nodeAgent.call<{ activeConnections: number }>(S, 'stats')).activeConnections;
    if (active < opened) await new Promise((r) => setTimeout(r, 100));
  }
  const after = await c.nodeAgent.call<number>(A, 'rssMiB');
  await c.clientAgent.call(A, 'closeIdle');
  return { before, after, n, opened: active };
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

async function run(opts: BenchOptions): Promise<Section[]> {
  const { c, destroy } = await cluster();
  let f: Figures;
  try {
    const { ways, idlePort } = await setUp(c);
    const rss = await measureRss(c, idlePort, opts.quick ? 1_000 : 9_000, opts);
    f = await measure(c, ways, opts);
    f.rss = rss;
    await c.nodeAgent.call(S, 'close');
  } finally {
    await destroy();
  }
  const med = (xs: number[]) => summarize(xs).median;
  const ratio = (xs: number[][], i: number): number => med(xs[i]!) / med(xs[0]!);
  const pct = (x: number): string => `${(x * 100).toFixed(0)} %`;
  const bothPct = (xs: number[][]): string => `${pct(ratio(xs, 2))} / ${pct(ratio(xs, 3))}`;
  const tputRatio = ratio(f.mibPerS, 3);
  const connRate = med(f.connPerS[3]!);
  const p = (i: number, q: number) => percentile(f.rtt[i]!, q);
  const perConnKiB = ((f.rss.after - f.rss.before) * 1024) / Math.max(1, f.rss.opened);
  const loads = summarize(f.load);
  const all = [0, 1, 2, 3];
  const rows: string[][] = [
    ['one-stream throughput', ...f.mibPerS.map((x) => fmtRate(x, 'MiB/s')), bothPct(f.mibPerS)],
    ['new connections per second (64 at a time)', ...f.connPerS.map((x) => fmtRate(x, '/s')), bothPct(f.connPerS)],
    [
      'round trip p50',
      ...all.map((i) => us(p(i, 50))),
      `${added(p(2, 50) - p(0, 50))} / ${added(p(3, 50) - p(0, 50))}`,
    ],
    [
      'round trip p99',
      ...all.map((i) => us(p(i, 99))),
      `${added(p(2, 99) - p(0, 99))} / ${added(p(3, 99) - p(0, 99))}`,
    ],
  ];
  const targets: Target[] = [
    {
      what: '#15 userspace mode (REDIRECT + proxy) one-stream TCP throughput vs direct to the endpoint',
      target: '≥ 50 % of direct',
      status: opts.quick ? 'not measured' : tputRatio >= 0.5 ? 'met' : 'missed',
      detail: `${formatCount(med(f.mibPerS[3]!))} vs ${formatCount(med(f.mibPerS[0]!))} MiB/s (${pct(tputRatio)}; the proxy's port without the REDIRECT ${pct(ratio(f.mibPerS, 2))})`,
    },
    {
      what: '#15 userspace mode (REDIRECT + proxy) new connections per second',
      target: '≥ 5,000/s',
      status: opts.quick ? 'not measured' : connRate >= 5000 ? 'met' : 'missed',
      detail: `${formatCount(connRate)}/s (direct to the pod ${formatCount(med(f.connPerS[0]!))}/s from the same client; the proxy's port without the REDIRECT ${formatCount(med(f.connPerS[2]!))}/s)`,
    },
    {
      what: `#15 userspace proxy RSS with ${formatCount(f.rss.opened)} idle connections`,
      target: 'measured (no threshold set)',
      status: 'measured',
      detail: `${f.rss.before.toFixed(0)} → ${f.rss.after.toFixed(0)} MiB (${perConnKiB.toFixed(1)} KiB per connection)`,
    },
  ];
  return [
    {
      title: 'Userspace proxy (issue 15): the data path beside direct and kernel DNAT',
      description:
        'src/proxier/userspace/proxy (ProxyPorts) in a node namespace’s Node process; a client namespace sends to a pod namespace ' +
        'straight, through a kernel DNAT rule on the node (the path the nftables mode gives a packet), to the proxy’s port on the ' +
        'node’s address (the proxy layer alone), or to a Service address that a REDIRECT rule sends to the proxy’s port (the ' +
        'userspace mode’s path, as KUBE-PORTALS-CONTAINER; the rule is the bench’s own, not the usrules branch’s proxier). All over veth pairs on one machine, so the figures are ' +
        `CPU-bound: the client, the kernel and the proxy share its ${os.cpus().length} CPUs. Throughput: one stream of ` +
        `${opts.quick ? 64 : 512} MiB into a byte sink; connections: ${formatCount(opts.quick ? 2_000 : 20_000)} connect–answer–close, 64 at a time; ` +
        `round trips: ${formatCount(opts.quick ? 1_000 : 10_000)} one-line echoes in a row on one connection (test/bench/userspace.ts).`,
      columns: [
        { title: 'measurement' },
        { title: 'direct to the pod', align: 'right' },
        { title: 'kernel DNAT', align: 'right' },
        { title: 'userspace proxy', align: 'right' },
        { title: 'REDIRECT + proxy', align: 'right' },
        { title: 'proxy / REDIRECT + proxy vs direct', align: 'right' },
      ],
      rows,
      notes: [
        `RSS of the proxy’s process (Node, the agent and ProxyPorts; after a full GC): ${f.rss.before.toFixed(0)} MiB with no connection, ` +
          `${f.rss.after.toFixed(0)} MiB with ${formatCount(f.rss.opened)} idle connections through it, ${perConnKiB.toFixed(1)} KiB per connection ` +
          '(9,000, not 10,000: each takes two descriptors and the hard RLIMIT_NOFILE here is 20,000).',
        `Connections that failed: ${formatCount(f.failedConnections)}.`,
        `1-minute load average ${loads.min.toFixed(1)}–${loads.max.toFixed(1)} during the runs (2 CPUs, shared with other work).`,
      ],
      targets,
    },
  ];
}

export const bench: Bench = { needsRoot: true, run };
