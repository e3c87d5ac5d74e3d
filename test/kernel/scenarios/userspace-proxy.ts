// The userspace proxy's data path in namespaces, run by netns agents: the node's agent holds a
// ProxyPorts (start/apply/stats/close), pods run the servers below beside echo.ts's, and the
// client's agent connects with the probes below. Results travel back as plain values.
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { memoryLogger } from '../../../src/base/logger.ts';
import type { LogRecord } from '../../../src/base/logger.ts';
import { createProxyPorts } from '../../../src/proxier/userspace/proxy/index.ts';
import type {
  ProxyPorts,
  ProxyPortSpec,
  ProxyPortsOptions,
  ProxyStats,
} from '../../../src/proxier/userspace/proxy/index.ts';

// ---- node: the proxy ----

let proxy: ProxyPorts | undefined;
const logs: LogRecord[] = [];

export function start(opts: Omit<ProxyPortsOptions, 'logger'>): void {
  proxy = createProxyPorts({ ...opts, logger: memoryLogger(logs) });
}

export async function apply(
  specs: ProxyPortSpec[],
): Promise<{ ports: Record<string, number>; errors: Record<string, string> }> {
  const r = await proxy!.apply(specs);
  return {
    ports: Object.fromEntries(r.ports),
    errors: Object.fromEntries([...r.errors].map(([id, e]) => [id, e.message])),
  };
}

export function stats(): ProxyStats {
  return proxy!.stats();
}

export async function close(): Promise<void> {
  await proxy?.close();
}

export function logMessages(): string[] {
  return logs.map((r) => `${r.level} ${r.msg} ${JSON.stringify(r.fields)}`);
}

export function pid(): number {
  return process.pid;
}

// ---- pods: servers ----

const servers: Server[] = [];
const received = new Map<string, number>();
const flood = { written: 0, done: false };

function listen(srv: Server, port: number): Promise<void> {
  servers.push(srv);
  return new Promise((resolve) => srv.listen(port, '0.0.0.0', resolve));
}

/** Reads until the client's FIN, then answers "<name> got <n>" followed by `replyBytes` bytes of "x". */
export function serveSink(name: string, port: number, replyBytes: number): Promise<void> {
  return listen(
    createServer({ allowHalfOpen: true }, (c) => {
      let n = 0;
      c.on('error', () => {});
      c.on('data', (d: Buffer) => (n += d.length));
      c.on('end', () => c.end(`${name} got ${n}\n${'x'.repeat(replyBytes)}`));
    }),
    port,
  );
}

/** Sends "hello" and its FIN at once, then keeps reading: received(name) is what arrived after. */
export function serveHalfServer(name: string, port: number): Promise<void> {
  return listen(
    createServer({ allowHalfOpen: true }, (c) => {
      let n = 0;
      c.on('error', () => {});
      c.end('hello\n');
      c.on('data', (d: Buffer) => (n += d.length));
      c.on('end', () => received.set(name, n));
    }),
    port,
  );
}

export function receivedBy(name: string): number | undefined {
  return received.get(name);
}

/** Resets each connection as soon as its first bytes arrive. */
export function serveReset(port: number): Promise<void> {
  return listen(
    createServer((c) => {
      c.on('error', () => {});
      c.once('data', () => c.resetAndDestroy());
    }),
    port,
  );
}

/** Writes `total` bytes to the first connection as fast as the socket takes them (honouring its backpressure). */
export function serveFlood(port: number, total: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 'y');
  return listen(
    createServer((c) => {
      c.on('error', () => {});
      const pump = (): void => {
        while (flood.written < total) {
          const n = Math.min(chunk.length, total - flood.written);
          flood.written += n;
          if (!c.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void c.once('drain', pump);
        }
        flood.done = true;
        c.end();
      };
      pump();
    }),
    port,
  );
}

export function floodProgress(): { written: number; done: boolean } {
  return { ...flood };
}

// ---- client: probes ----

/** Writes `sendBytes`, shuts down its sending side (SHUT_WR) and reads the whole reply. */
export function sendThenShutdown(host: string, port: number, sendBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port, allowHalfOpen: true });
    const parts: Buffer[] = [];
    s.on('data', (d: Buffer) => parts.push(d));
    s.on('end', () => resolve(Buffer.concat(parts).toString()));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'ERROR'));
    s.end(Buffer.alloc(sendBytes, 'z'));
  });
}

/** Reads until the server's FIN, then sends `sendBytes` and its own FIN; resolves what it read. */
export function readThenSend(host: string, port: number, sendBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port, allowHalfOpen: true });
    let got = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (got += d));
    s.on('end', () => s.end(Buffer.alloc(sendBytes, 'z'), () => resolve(got.trim())));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'ERROR'));
  });
}

/** Sends a byte and resolves how the connection ended: "end" (a FIN) or the error code (ECONNRESET). */
export function poke(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.on('data', () => {});
    s.on('end', () => resolve('end'));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'ERROR'));
    s.write('x');
  });
}

let held: Socket | undefined;

/** Connects without reading (a slow client); drain() then reads everything and resolves the byte count. */
export function holdUnread(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    held = connect({ host, port }, () => resolve());
    held.pause();
    held.once('error', reject);
  });
}

export function drainHeld(): Promise<number> {
  return new Promise((resolve) => {
    let n = 0;
    held!.on('data', (d: Buffer) => (n += d.length));
    held!.on('end', () => resolve(n));
    held!.resume();
  });
}

/** n connections opened at once; the answers ("<pod> <peer>" or an error code). */
export function tcpConcurrent(host: string, port: number, n: number): Promise<string[]> {
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<string>((resolve) => {
          const s = connect({ host, port });
          let data = '';
          s.setEncoding('utf8');
          s.on('data', (d: string) => (data += d));
          s.on('end', () => resolve(data));
          s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'ERROR'));
        }),
    ),
  );
}

/** One UDP request from srcPort: "<answer> from <address>:<port>" (where the reply came from), or ETIMEDOUT. */
export function udpFrom(host: string, port: number, srcPort: number, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.on('message', (m, rinfo) => {
      clearTimeout(timer);
      s.close();
      resolve(`${m.toString()} from ${rinfo.address}:${rinfo.port}`);
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      s.close();
      resolve(e.code ?? 'ERROR');
    });
    s.bind(srcPort, () => s.send('hello', port, host));
  });
}

// ---- node: other programs' sockets ----

/** A TCP listener of "another program" on the node, holding a port. */
export function holdPort(port: number): Promise<void> {
  return listen(createServer(), port);
}

// ---- client: many held connections ----

const many: Socket[] = [];

/** Opens n connections at once and keeps them; resolves how many connected. */
export async function openMany(host: string, port: number, n: number): Promise<number> {
  const results = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<boolean>((resolve) => {
          const s = connect({ host, port }, () => resolve(true));
          s.on('error', () => resolve(false));
          many.push(s);
        }),
    ),
  );
  return results.filter(Boolean).length;
}

export function closeMany(): void {
  for (const s of many.splice(0)) s.destroy();
}
