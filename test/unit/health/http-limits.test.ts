// The bounds of the daemon's HTTP servers: connections over the cap are closed as they are
// accepted, a client that never finishes its headers is cut off, the others are served.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import test from 'ava';
import { applyHttpLimits, HTTP_SERVER_OPTIONS } from '../../../src/health/http-limits.ts';

const open = (port: number): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
const closed = (s: Socket): Promise<void> => new Promise((resolve) => s.once('close', () => resolve()));

test('connections over maxConnections are closed at once; those under it are served', async (t) => {
  const server = createServer(HTTP_SERVER_OPTIONS, (_req, res) => res.end('ok'));
  applyHttpLimits(server, {
    maxConnections: 3,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5000,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  const held = [await open(port), await open(port), await open(port)];
  const over = await open(port);
  await closed(over); // closed by the server without a byte
  t.is((await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined))?.status, undefined, 'no slot free');
  for (const s of held) s.destroy();
  await new Promise((r) => setTimeout(r, 50));
  t.is((await fetch(`http://127.0.0.1:${port}/`)).status, 200, 'served once slots are free');
});

test('a client that never finishes its headers is cut off (slowloris)', async (t) => {
  const server = createServer(HTTP_SERVER_OPTIONS, (_req, res) => res.end('ok'));
  applyHttpLimits(server, {
    maxConnections: 10,
    headersTimeoutMs: 300,
    requestTimeoutMs: 600,
    keepAliveTimeoutMs: 5000,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const s = await open((server.address() as AddressInfo).port);
  let answer = '';
  s.on('data', (d: Buffer) => (answer += d.toString()));
  s.write('GET / HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
  await closed(s);
  t.regex(answer, /^HTTP\/1\.1 408/);
});
