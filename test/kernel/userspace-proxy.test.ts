// The userspace proxy's data path (src/proxier/userspace/proxy) with real sockets: the node
// namespace's agent holds the ProxyPorts, pods answer (echo.ts and the servers of
// scenarios/userspace-proxy.ts), the client namespace connects to the node's address and the
// port the proxy bound, or to a Service address a test-side nft redirect sends to it.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import {
  BACKEND_PORT,
  ECHO,
  makeCluster,
  NODE_IP,
  NODE_IP6,
  podGateway,
  podGateway6,
  podIP,
  podIP6,
} from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import type { ProxyPortSpec, ProxyStats } from '../../src/proxier/userspace/proxy/index.ts';

const S = new URL('./scenarios/userspace-proxy.ts', import.meta.url).href;
type PortStats = ProxyStats['perPort'] extends ReadonlyMap<string, infer V> ? V : never;

async function cluster(t: ExecutionContext, label: string, opts: object = {}): Promise<Cluster> {
  const c = await makeCluster(t, label);
  await c.nodeAgent.call(S, 'start', { family: 'IPv4', listenIP: '0.0.0.0', udpIdleTimeoutMs: 250, ...opts });
  return c;
}

const spec = (
  id: string,
  backends: { ip: string; port: number }[],
  more: Partial<ProxyPortSpec> = {},
): ProxyPortSpec => ({ id, name: `default/${id}:p`, protocol: 'TCP', backends, affinitySeconds: 0, ...more });
const pods = (port = BACKEND_PORT, n = 3) => Array.from({ length: n }, (_, i) => ({ ip: podIP(i), port }));

async function apply(c: Cluster, specs: ProxyPortSpec[]): Promise<Record<string, number>> {
  const r = await c.nodeAgent.call<{ ports: Record<string, number>; errors: Record<string, string> }>(
    S,
    'apply',
    specs,
  );
  if (Object.keys(r.errors).length > 0) throw new Error(`apply: ${JSON.stringify(r.errors)}`);
  return r.ports;
}
const stats = (c: Cluster) => c.nodeAgent.call<ProxyStats>(S, 'stats');
const portStats = async (c: Cluster, id: string): Promise<PortStats> =>
  (await stats(c)).perPort.get(`default/${id}:p`)!;
const client = <T>(c: Cluster, fn: string, ...args: unknown[]) => c.clientAgent.call<T>(S, fn, ...args);
const echo = <T>(c: Cluster, fn: string, ...args: unknown[]) => c.clientAgent.call<T>(ECHO, fn, ...args);

/** Polls `read` until `ok` holds (at most `tries` times, `pauseMs` apart); returns the last value. */
async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, tries = 100, pauseMs = 50): Promise<T> {
  let v = await read();
  for (let i = 0; i < tries && !ok(v); i++) {
    await new Promise((r) => setTimeout(r, pauseMs));
    v = await read();
  }
  return v;
}

/** A test-side redirect in the node namespace, as KUBE-PORTALS would write: VIP:port → the proxy's port. */
async function redirect(c: Cluster, proto: 'tcp' | 'udp', vip: string, port: number, to: number): Promise<void> {
  const r = await c.node.exec('nft', ['-f', '-'], {
    input:
      `table ip kpts_us_${proto} {\n chain pre {\n  type nat hook prerouting priority -100;\n` +
      `  ip daddr ${vip} ${proto} dport ${port} redirect to :${to}\n }\n}\n`,
  });
  if (r.code !== 0) throw new Error(`nft: ${r.stderr}`);
}

test.serial(
  'TCP: round robin over three endpoints; ClientIP affinity sticks; a redirected Service address works',
  async (t) => {
    const c = await cluster(t, 'usrr');
    const ports = await apply(c, [spec('rr', pods()), spec('sticky', pods(), { affinitySeconds: 100 })]);

    const rr = await echo<string[]>(c, 'tcpMany', NODE_IP, ports.rr, 9);
    t.true(
      rr.every((a, i) => a === `pod${(i % 3) + 1} ${podGateway(i % 3)}`),
      `each endpoint in turn, the node as the peer: ${rr.join(', ')}`,
    );
    const sticky = await echo<string[]>(c, 'tcpMany', NODE_IP, ports.sticky, 6);
    t.is(new Set(sticky).size, 1, `one endpoint for the client: ${sticky.join(', ')}`);

    await redirect(c, 'tcp', '10.96.0.10', 80, ports.rr!);
    t.regex(await echo<string>(c, 'tcp', '10.96.0.10', 80), /^pod[123] /);
    const s = await portStats(c, 'rr');
    t.like(s, { accepted: 10, failedOver: 0, refused: 0 });
    t.true(s.bytesOut > 0);
  },
);

test.serial('TCP: a refusing endpoint is failed over; no endpoint or none answering resets the client', async (t) => {
  const c = await cluster(t, 'usfo');
  const closed = { ip: podIP(0), port: 9 }; // nothing listens: the pod's kernel answers RST
  const ports = await apply(c, [
    spec('fo', [closed, { ip: podIP(1), port: BACKEND_PORT }]),
    spec('none', []),
    spec('dead', [closed, { ip: podIP(2), port: 9 }]),
  ]);
  const fo = await echo<string[]>(c, 'tcpMany', NODE_IP, ports.fo, 4);
  t.deepEqual(fo, Array(4).fill(`pod2 ${podGateway(1)}`), 'the client sees success every time');
  t.like(await portStats(c, 'fo'), { accepted: 4, failedOver: 4, refused: 0 }, 'the closed one was next each time');

  // echo.tcp waits 1.5 s and says ETIMEDOUT otherwise: a reset is prompt.
  t.is(await echo<string>(c, 'tcp', NODE_IP, ports.none), 'ECONNRESET');
  t.is(await echo<string>(c, 'tcp', NODE_IP, ports.dead), 'ECONNRESET');
  t.like(await portStats(c, 'none'), { accepted: 1, refused: 1, failedOver: 0, active: 0 });
  t.like(await portStats(c, 'dead'), { accepted: 1, refused: 1, failedOver: 4, active: 0 });

  await apply(c, []);
  t.like(await portStats(c, 'fo'), { accepted: 4, failedOver: 4 }, 'counters outlive the port (since start)');
  t.like(await portStats(c, 'dead'), { accepted: 1, refused: 1, failedOver: 4 });
});

test.serial('TCP: a live connection survives its endpoint leaving the list and its service going away', async (t) => {
  const c = await cluster(t, 'usdrain');
  await Promise.all(c.podAgents.map((a, i) => a.call(ECHO, 'serveStream', `pod${i + 1}`, 8081)));
  const first = await apply(c, [spec('live', pods(8081))]);
  const id = await echo<number>(c, 'openStream', NODE_IP, first.live);
  t.is(await echo<string>(c, 'streamRoundTrip', id, 'one'), 'pod1 one');

  const second = await apply(c, [spec('live', pods(8081).slice(1))]);
  t.is(second.live, first.live, 'the port stays');
  t.is(await echo<string>(c, 'streamRoundTrip', id, 'two'), 'pod1 two', 'established connection untouched');
  const id2 = await echo<number>(c, 'openStream', NODE_IP, first.live);
  t.is(await echo<string>(c, 'streamRoundTrip', id2, 'new'), 'pod2 new', 'a new connection goes to the rest');

  await apply(c, []);
  t.is(await echo<string>(c, 'tcp', NODE_IP, first.live), 'ECONNREFUSED', 'the listener is closed');
  t.is(await echo<string>(c, 'streamRoundTrip', id, 'three'), 'pod1 three', 'the live connection finishes its work');
  const s = await stats(c);
  t.is(s.activeConnections, 2, 'counted while draining');
  t.like(s.perPort.get('default/live:p'), { accepted: 2, active: 2 });
});

test.serial('TCP: half-close both ways, and a reset from the endpoint reaches the client', async (t) => {
  const c = await cluster(t, 'ushalf');
  const p0 = c.podAgents[0]!;
  await p0.call(S, 'serveSink', 'pod1', 8082, 1 << 20);
  await p0.call(S, 'serveHalfServer', 'pod1', 8083);
  await p0.call(S, 'serveReset', 8084);
  const ports = await apply(c, [
    spec('sink', [{ ip: podIP(0), port: 8082 }]),
    spec('half', [{ ip: podIP(0), port: 8083 }]),
    spec('rst', [{ ip: podIP(0), port: 8084 }]),
  ]);

  const reply = await client<string>(c, 'sendThenShutdown', NODE_IP, ports.sink, 300_000);
  t.is(reply.split('\n')[0], 'pod1 got 300000', 'the endpoint saw all the client sent, then its FIN');
  t.is(reply.length, 'pod1 got 300000\n'.length + (1 << 20), 'the client still got the whole reply after SHUT_WR');

  t.is(await client<string>(c, 'readThenSend', NODE_IP, ports.half, 200_000), 'hello');
  t.is(
    await until(
      () => p0.call<number | undefined>(S, 'receivedBy', 'pod1'),
      (n) => n !== undefined,
    ),
    200_000,
    'after the endpoint’s FIN the client’s data still reached it',
  );

  t.is(await client<string>(c, 'poke', NODE_IP, ports.rst), 'ECONNRESET');
  t.is((await stats(c)).activeConnections, 0);
});

test.serial('TCP: a client that does not read leaves the daemon’s buffers bounded (backpressure)', async (t) => {
  const c = await cluster(t, 'usbp');
  const total = 64 << 20;
  await c.podAgents[0]!.call(S, 'serveFlood', 8085, total);
  const ports = await apply(c, [spec('flood', [{ ip: podIP(0), port: 8085 }])]);
  await client(c, 'holdUnread', NODE_IP, ports.flood);

  // Wait for the pipeline to fill: the endpoint's progress stops moving.
  let last = -1;
  const progress = await until(
    () => c.podAgents[0]!.call<{ written: number; done: boolean }>(S, 'floodProgress'),
    (p) => {
      const settled = p.written > 0 && p.written === last;
      last = p.written;
      return settled;
    },
    200,
    200,
  );
  t.false(progress.done, `the endpoint is held back: ${progress.written} of ${total} bytes written`);
  const s = await stats(c);
  t.true((s.bufferedBytes ?? Infinity) <= 256 << 10, `daemon-side buffered bytes: ${s.bufferedBytes}`);

  t.is(await client<number>(c, 'drainHeld'), total, 'everything arrives once the client reads');
});

test.serial('UDP: replies come from the proxy’s (or the Service’s) address; idle associations expire', async (t) => {
  const c = await cluster(t, 'usudp', { udpIdleTimeoutMs: 250 });
  const ports = await apply(c, [spec('dns', pods(), { protocol: 'UDP' })]);
  const port = ports.dns!;

  t.is(await client<string>(c, 'udpFrom', NODE_IP, port, 40001), `pod1 ${podGateway(0)} from ${NODE_IP}:${port}`);
  t.is(
    (
      await until(
        () => stats(c),
        (s) => s.activeUdpAssociations === 0,
      )
    ).activeUdpAssociations,
    0,
    'closed after --udp-timeout idle',
  );

  await redirect(c, 'udp', '10.96.0.10', 53, port);
  t.is(
    await client<string>(c, 'udpFrom', '10.96.0.10', 53, 40002),
    `pod2 ${podGateway(1)} from 10.96.0.10:53`,
    'conntrack un-NATs the reply sent from the service socket',
  );
  t.like(await portStats(c, 'dns'), { accepted: 2, refused: 0 });
});

test.serial('UDP: one association per client address and port', async (t) => {
  const c = await cluster(t, 'usudp1', { udpIdleTimeoutMs: 60_000 });
  const ports = await apply(c, [spec('dns', pods(), { protocol: 'UDP' })]);
  const port = ports.dns!;
  const same = [];
  for (let i = 0; i < 3; i++) same.push(await client<string>(c, 'udpFrom', NODE_IP, port, 40010));
  t.deepEqual(same, Array(3).fill(`pod1 ${podGateway(0)} from ${NODE_IP}:${port}`), 'one endpoint for the flow');
  t.regex(await client<string>(c, 'udpFrom', NODE_IP, port, 40011), /^pod2 /, 'a new client port: a new association');
  const s = await stats(c);
  t.is(s.activeUdpAssociations, 2);
  t.like(s.perPort.get('default/dns:p'), { accepted: 2, active: 2, bytesIn: 20 });
});

test.serial('TCP: 1,000 concurrent connections through one port are all answered', async (t) => {
  const c = await cluster(t, 'usmany');
  const ports = await apply(c, [spec('many', pods())]);
  const answers = await client<string[]>(c, 'tcpConcurrent', NODE_IP, ports.many, 1000);
  const bad = answers.filter((a) => !/^pod[123] /.test(a));
  t.deepEqual(bad.slice(0, 5), [], `${bad.length} of 1000 not answered`);
  const per = new Map<string, number>();
  for (const a of answers) per.set(a.split(' ')[0]!, (per.get(a.split(' ')[0]!) ?? 0) + 1);
  t.deepEqual([...per.values()].sort(), [333, 333, 334]);
  t.like(await portStats(c, 'many'), { accepted: 1000, failedOver: 0, refused: 0 });
});

test.serial(
  'apply: ports from --proxy-port-range skip a busy one; exhaustion fails that id alone; a protocol change reopens',
  async (t) => {
    const c = await cluster(t, 'usapply', { portRange: { first: 30000, last: 30002 } });
    await c.nodeAgent.call(S, 'holdPort', 30001);
    const r = await c.nodeAgent.call<{ ports: Record<string, number>; errors: Record<string, string> }>(S, 'apply', [
      spec('a', pods()),
      spec('b', pods()),
      spec('c', pods()),
    ]);
    t.deepEqual(Object.keys(r.ports).sort(), ['a', 'b']);
    t.deepEqual([r.ports.a, r.ports.b].sort(), [30000, 30002], 'the held port was skipped');
    t.regex(r.errors.c ?? '', /default\/c:p \(TCP\): no free port in --proxy-port-range 30000-30002/);
    t.regex(await echo<string>(c, 'tcp', NODE_IP, r.ports.a), /^pod1 /);

    const again = await apply(c, [spec('a', pods()), spec('b', pods(), { protocol: 'UDP' })]);
    t.is(again.a, r.ports.a, 'an open port stays');
    t.regex(await client<string>(c, 'udpFrom', NODE_IP, again.b, 40020), /^pod1 .* from 10\.1\.0\.1:3000[0-2]$/);
    t.is(await echo<string>(c, 'tcp', NODE_IP, r.ports.b), 'ECONNREFUSED', 'the TCP listener of b is closed');
    t.regex(await echo<string>(c, 'tcp', NODE_IP, again.a), /^pod2 /, 'a kept its rotation');
  },
);

test.serial('TCP: out of descriptors while accepting, the proxy neither crashes nor stops serving', async (t) => {
  const c = await cluster(t, 'usemfile');
  await Promise.all(c.podAgents.map((a, i) => a.call(ECHO, 'serveStream', `pod${i + 1}`, 8081)));
  const ports = await apply(c, [spec('hold', pods(8081)), spec('web', pods())]);
  const pid = await c.nodeAgent.call<number>(S, 'pid');
  const open = (await c.node.run('ls', `/proc/${pid}/fd`)).split('\n').filter(Boolean).length;
  await c.node.run('prlimit', '--pid', String(pid), `--nofile=${open + 20}:20000`);

  // Each proxied connection takes two descriptors: 60 connections need far more than 20.
  t.is(await client<number>(c, 'openMany', NODE_IP, ports.hold, 60), 60, 'the kernel completes the handshakes');
  // Wait until the proxy stops taking connections (its count holds still while the client holds all 60).
  let last = -1;
  const during = await until(
    () => stats(c),
    (s) => {
      const accepted = s.perPort.get('default/hold:p')?.accepted ?? 0;
      const settled = accepted > 0 && accepted === last;
      last = accepted;
      return settled;
    },
    100,
    200,
  );
  t.true(during.activeConnections <= 10, `proxied at once with 20 spare descriptors: ${during.activeConnections}`);

  await client(c, 'closeMany');
  t.is(
    (
      await until(
        () => portStats(c, 'hold'),
        (s) => s.active === 0,
      )
    ).active,
    0,
    'every connection let go',
  );
  await c.node.run('prlimit', '--pid', String(pid), '--nofile=20000');
  t.regex(await echo<string>(c, 'tcp', NODE_IP, ports.web), /^pod[123] /, 'serving again');
  // libuv drops what it cannot accept itself (its reserve-descriptor trick); what reaches us is
  // logged once per kind and interval, however many connections it concerned.
  const lines = (await c.nodeAgent.call<string[]>(S, 'logMessages')).filter((l) => l.startsWith('warn'));
  t.true(lines.length <= 3, `warnings: ${lines.join('\n')}`);
});

test.serial('IPv6: the proxy’s sockets of the IPv6 family balance over IPv6 endpoints', async (t) => {
  const c = await cluster(t, 'usv6', { family: 'IPv6', listenIP: '::' });
  const ports = await apply(c, [
    spec(
      'v6',
      [0, 1, 2].map((i) => ({ ip: podIP6(i), port: BACKEND_PORT })),
    ),
  ]);
  const answers = await echo<string[]>(c, 'tcpMany', NODE_IP6, ports.v6, 3);
  t.deepEqual(
    answers,
    [0, 1, 2].map((i) => `pod${i + 1} ${podGateway6(i)}`),
  );
  t.is(await echo<string>(c, 'tcp', NODE_IP, ports.v6), 'ECONNREFUSED', 'IPv6 only: no IPv4 listener on that port');
});

test.serial('UDP: associations per port are bounded; the oldest gives way to a new client', async (t) => {
  const c = await cluster(t, 'usudpmax', { udpIdleTimeoutMs: 60_000, udpMaxAssociations: 2 });
  const ports = await apply(c, [spec('dns', pods(), { protocol: 'UDP' })]);
  for (const src of [40030, 40031, 40032])
    t.regex(await client<string>(c, 'udpFrom', NODE_IP, ports.dns, src), /^pod[123] /);
  const s = await stats(c);
  t.is(s.activeUdpAssociations, 2);
  t.like(s.perPort.get('default/dns:p'), { accepted: 3, active: 2 });
  t.regex(
    await client<string>(c, 'udpFrom', NODE_IP, ports.dns, 40030),
    /^pod1 /,
    'the evicted client comes back as a new association (the rotation goes on: pod1 again after three)',
  );
  t.like((await stats(c)).perPort.get('default/dns:p'), { accepted: 4, active: 2 });
});
