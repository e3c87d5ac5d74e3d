// The metrics server's shared connection slots: with every slot held by /metrics clients, a
// new connection (a health check) takes the slot of the newest of them and is answered; with
// every slot held by connections that may not yield, a new one is closed at once; the cap
// holds throughout.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { shareConnectionSlots } from '../../../src/metrics/connection-slots.ts';

const MAX = 3;

async function server(t: ExecutionContext) {
  // /metrics is never answered here (a render that keeps its clients waiting); the rest at once.
  const s = createServer((req, res) => {
    if (req.url !== '/metrics') res.end('ok');
  });
  const slots = shareConnectionSlots(s, { maxConnections: MAX, yields: (req) => req.url === '/metrics' });
  let peak = 0;
  let open = 0;
  s.on('connection', (c: Socket) => {
    if (c.destroyed) return;
    peak = Math.max(peak, ++open);
    c.once('close', () => open--);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    s.closeAllConnections();
    s.close();
  });
  return { port: (s.address() as AddressInfo).port, slots, peak: () => peak };
}

const open = (port: number): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
const closed = (s: Socket): Promise<void> =>
  new Promise((resolve) => (s.closed ? resolve() : s.once('close', () => resolve())));
const get = (s: Socket, path: string) => s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
const tick = () => new Promise((r) => setTimeout(r, 50));

test('every slot held by /metrics clients: a health check takes the newest one and is answered', async (t) => {
  const { port, slots, peak } = await server(t);
  const held: Socket[] = [];
  for (let i = 0; i < MAX; i++) {
    const s = await open(port);
    s.on('error', () => undefined);
    get(s, '/metrics');
    held.push(s);
    await tick();
  }
  for (let round = 0; round < 2; round++) {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    t.is(res.status, 200);
    t.is(await res.text(), 'ok');
    await closed(held[MAX - 1 - round]!); // the newest /metrics connection left
    t.false(held[0]!.destroyed, 'the oldest keeps its place');
  }
  t.is(slots.evicted, 2);
  t.is(slots.refused, 0);
  t.true(peak() <= MAX + 1, `peak ${peak()} connections`);
});

test('every slot held by connections that may not yield: a new one is closed at once', async (t) => {
  const { port, slots } = await server(t);
  const held: Socket[] = [];
  for (let i = 0; i < MAX; i++) {
    const s = await open(port);
    get(s, '/healthz'); // answered, kept alive, not yielding
    held.push(s);
  }
  await tick();
  const over = await open(port);
  await closed(over);
  t.is(slots.refused, 1);
  t.is(slots.evicted, 0);
  for (const s of held) t.false(s.destroyed);
  for (const s of held) s.destroy();
  await tick();
  t.is((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200, 'served once slots are free');
});
