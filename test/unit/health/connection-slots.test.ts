// The slot policy of the daemon's HTTP servers: a new connection is always accepted, and when
// its source is at its cap or every slot is taken, the oldest idle connection (of its source,
// or of the source holding the most) yields, else the newest waiting on /metrics; only when
// nothing may yield is the new one closed. Sources are told apart by loopback addresses.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { Registry } from 'prom-client';
import { ConnectionSlots, slotCensus, type SlotPolicy } from '../../../src/health/connection-slots.ts';
import { registerHttpSlotMetrics } from '../../../src/metrics/http-slots.ts';

async function server(t: ExecutionContext, policy: SlotPolicy, slots = new ConnectionSlots(policy)) {
  // /metrics and /busy are never answered here (a render that keeps its clients waiting); the rest at once.
  const s: Server = createServer((req, res) => {
    if (req.url !== '/metrics' && req.url !== '/busy') res.end('ok');
  });
  slots.attach(s);
  let peak = 0;
  s.on('connection', (c: Socket) => {
    if (!c.destroyed) peak = Math.max(peak, slots.open);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    s.closeAllConnections();
    s.close();
  });
  return { port: (s.address() as AddressInfo).port, slots, peak: () => peak };
}

const bulk = (req: { url?: string | undefined }) => req.url === '/metrics';

/** A connection from `from` (a loopback address), after the server has taken it in. */
const open = async (port: number, from = '127.0.0.1'): Promise<Socket> => {
  const s = await new Promise<Socket>((resolve, reject) => {
    const c = connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(c));
    c.once('error', reject);
  });
  s.on('error', () => undefined);
  await tick();
  return s;
};
const closed = (s: Socket): Promise<void> =>
  new Promise((resolve) => (s.closed ? resolve() : s.once('close', () => resolve())));
const tick = () => new Promise((r) => setTimeout(r, 30));
/** Sends GET path on s; resolves the status line of the answer, or undefined if closed first. */
const get = (s: Socket, path: string): Promise<string | undefined> =>
  new Promise((resolve) => {
    if (s.closed) return resolve(undefined);
    let text = '';
    s.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n')) resolve(text.split('\r\n')[0]);
    });
    s.once('close', () => resolve(undefined));
    s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  });

test('every slot taken by idle connections: the oldest yields to a new one, which is answered', async (t) => {
  const { port, slots, peak } = await server(t, { maxConnections: 3, perSourceMax: 3 });
  const held = [await open(port), await open(port), await open(port)];
  const probe = await open(port);
  t.is(await get(probe, '/healthz'), 'HTTP/1.1 200 OK');
  await closed(held[0]!);
  t.false(held[1]!.destroyed);
  t.false(held[2]!.destroyed);
  t.deepEqual([slots.evicted, slots.refused, slots.open], [1, 0, 3]);
  t.true(peak() <= 3, `peak ${peak()}`);
});

test('no idle connection: the newest waiting on /metrics yields, the longest waiting keep their place', async (t) => {
  const { port, slots } = await server(t, { maxConnections: 3, perSourceMax: 3, yields: bulk });
  const held: Socket[] = [];
  for (let i = 0; i < 3; i++) {
    const s = await open(port);
    void get(s, '/metrics');
    held.push(s);
  }
  await tick();
  const probe = await open(port);
  t.is(await get(probe, '/healthz'), 'HTTP/1.1 200 OK');
  await closed(held[2]!);
  t.false(held[0]!.destroyed, 'the oldest keeps its place');
  t.is(slots.evicted, 1);
});

test('every slot busy with a request that may not yield: a new connection is closed at once', async (t) => {
  const { port, slots } = await server(t, { maxConnections: 2, perSourceMax: 2, yields: bulk });
  const held = [await open(port), await open(port)];
  for (const s of held) void get(s, '/busy');
  await tick();
  const over = await open(port);
  t.is(await get(over, '/healthz'), undefined);
  t.deepEqual([slots.refused, slots.evicted], [1, 0]);
  for (const s of held) t.false(s.destroyed);
  for (const s of held) s.destroy();
  await tick();
  t.is(await get(await open(port), '/healthz'), 'HTTP/1.1 200 OK', 'served once slots are free');
});

test('a source at its cap: its own oldest idle connection yields; other sources are untouched', async (t) => {
  const { port, slots } = await server(t, { maxConnections: 10, perSourceMax: 2 });
  const other = await open(port, '127.0.0.3');
  const mine = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
  const third = await open(port, '127.0.0.2');
  t.is(await get(third, '/healthz'), 'HTTP/1.1 200 OK');
  await closed(mine[0]!);
  t.false(mine[1]!.destroyed);
  t.false(other.destroyed, 'another source keeps its connection');
  t.is(slots.evicted, 1);
  t.is(await get(await open(port, '127.0.0.4'), '/healthz'), 'HTTP/1.1 200 OK');
  t.is(slots.evicted, 1, 'a source under its cap takes a free slot');
});

test('every slot taken: the source holding the most yields, not the health checker holding one', async (t) => {
  const { port } = await server(t, { maxConnections: 4, perSourceMax: 4 });
  const checker = await open(port, '127.0.0.3'); // the oldest idle connection overall
  const flood = [await open(port, '127.0.0.2'), await open(port, '127.0.0.2'), await open(port, '127.0.0.2')];
  t.is(await get(await open(port, '127.0.0.4'), '/healthz'), 'HTTP/1.1 200 OK');
  await closed(flood[0]!);
  t.false(checker.destroyed);
  t.is(await get(checker, '/healthz'), 'HTTP/1.1 200 OK');
});

test('servers attached to one pool share its slots', async (t) => {
  const slots = new ConnectionSlots({ maxConnections: 2, perSourceMax: 2 });
  const a = await server(t, { maxConnections: 2, perSourceMax: 2 }, slots);
  const b = await server(t, { maxConnections: 2, perSourceMax: 2 }, slots);
  const held = [await open(a.port), await open(a.port)];
  t.is(await get(await open(b.port), '/healthz'), 'HTTP/1.1 200 OK');
  await closed(held[0]!);
  t.is(slots.evicted, 1);
  t.is(slots.open, 2);
});

test('named pools are counted together by server on /metrics: open, evicted, refused', async (t) => {
  const policy = { maxConnections: 1, perSourceMax: 1, server: 'census-test' };
  // Two pools of one name (as every Service health-check port shares one) add up.
  const a = await server(t, policy);
  const b = await server(t, policy);
  const held = await open(a.port);
  void get(held, '/busy'); // in the middle of a request, never answered: it cannot yield
  await tick();
  const refusedOne = await open(a.port);
  await closed(refusedOne);
  const idle = await open(b.port);
  const evictor = await open(b.port);
  await closed(idle);
  t.false(evictor.destroyed);
  const registry = new Registry();
  registerHttpSlotMetrics(registry, () => slotCensus().filter((c) => c.server === 'census-test'));
  const text = await registry.metrics();
  t.regex(text, /^kubeproxyts_http_connections_open\{server="census-test"\} 2$/m);
  t.regex(text, /^kubeproxyts_http_connections_closed_total\{server="census-test",reason="evicted"\} 1$/m);
  t.regex(text, /^kubeproxyts_http_connections_closed_total\{server="census-test",reason="refused"\} 1$/m);
  // An unnamed pool is not counted there.
  const servers = slotCensus().length;
  new ConnectionSlots({ maxConnections: 1, perSourceMax: 1 });
  t.is(slotCensus().length, servers);
});
