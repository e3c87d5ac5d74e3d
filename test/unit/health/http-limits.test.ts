// The deadlines of the daemon's HTTP servers: a client that never finishes its headers, or
// never sends a byte, is cut off (408) after headersTimeout; the others are served.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { applyHttpLimits, HTTP_SERVER_OPTIONS } from '../../../src/health/http-limits.ts';

async function server(t: ExecutionContext): Promise<number> {
  const s = createServer(HTTP_SERVER_OPTIONS, (_req, res) => res.end('ok'));
  applyHttpLimits(s, { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 5000 });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    s.closeAllConnections();
    s.close();
  });
  return (s.address() as AddressInfo).port;
}

const open = (port: number): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
/** Everything the server sent until it closed the connection. */
const answer = (s: Socket): Promise<string> =>
  new Promise((resolve) => {
    let text = '';
    s.on('data', (d: Buffer) => (text += d.toString()));
    s.once('close', () => resolve(text));
  });

test('a client that never finishes its headers is cut off (slowloris)', async (t) => {
  const s = await open(await server(t));
  const text = answer(s);
  s.write('GET / HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
  t.regex(await text, /^HTTP\/1\.1 408/);
});

test('a client that never sends a byte is cut off too (half-open)', async (t) => {
  const port = await server(t);
  const silent = await open(port);
  const text = answer(silent);
  t.is((await fetch(`http://127.0.0.1:${port}/`)).status, 200, 'others are served meanwhile');
  t.regex(await text, /^HTTP\/1\.1 408/);
});
