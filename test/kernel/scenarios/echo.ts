// A backend and a client, run by netns agents. The backend answers every TCP connection and
// UDP datagram with "<name> <peer address>", which tells a test which endpoint was chosen and
// whether the source was masqueraded.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer, connect } from 'node:net';
import type { Server, Socket as TcpSocket } from 'node:net';
import { createSocket } from 'node:dgram';
import type { Socket } from 'node:dgram';
import { fileURLToPath } from 'node:url';
import { systemTool } from '../../helpers/netns.ts';

const servers: (Server | Socket)[] = [];

/** The peer as the test expects it: IPv4-mapped IPv6 addresses in plain IPv4 form. */
const peer = (a: string | undefined): string => (a ?? '?').replace(/^::ffff:/, '');

export async function serve(name: string, port: number): Promise<void> {
  const tcp = createServer((c) => {
    c.end(`${name} ${peer(c.remoteAddress)}`);
    c.on('error', () => {});
  });
  // '::' takes IPv4 and IPv6 connections alike.
  await new Promise<void>((resolve) => tcp.listen(port, '::', resolve));
  servers.push(tcp);
  for (const [type, addr] of [
    ['udp4', '0.0.0.0'],
    ['udp6', '::'],
  ] as const) {
    const udp = createSocket({ type, ipv6Only: type === 'udp6' });
    udp.on('message', (_m, rinfo) => udp.send(`${name} ${rinfo.address}`, rinfo.port, rinfo.address));
    await new Promise<void>((resolve) => udp.bind(port, addr, resolve));
    servers.push(udp);
  }
}

/**
 * One TCP connection: the answer, or the error code (ECONNREFUSED for a reject, ETIMEDOUT for a
 * drop); from `localAddress` when given.
 */
export function tcp(host: string, port: number, timeoutMs = 1500, localAddress?: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port, ...(localAddress !== undefined ? { localAddress } : {}) });
    let data = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.on('data', (d) => (data += d.toString()));
    s.on('end', () => {
      clearTimeout(timer);
      resolve(data);
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? 'ERROR');
    });
  });
}

export async function tcpMany(host: string, port: number, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await tcp(host, port));
  return out;
}

/** One UDP request from a fixed source port: the answer, or "ETIMEDOUT"/an error code. */
export function udp(host: string, port: number, srcPort = 0, timeoutMs = 1500): Promise<string> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(m.toString());
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      s.close();
      resolve(e.code ?? 'ERROR');
    });
    s.bind(srcPort, () => s.send('hello', port, host));
  });
}

/**
 * n UDP requests, each a new flow: from firstSrcPort, firstSrcPort+1, ... when given (a test
 * that changes endpoints between rounds gives each round its own ports, so that no request
 * reuses a conntrack entry of an earlier round), else from ephemeral ports.
 */
export async function udpMany(host: string, port: number, n: number, firstSrcPort = 0): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await udp(host, port, firstSrcPort > 0 ? firstSrcPort + i : 0));
  return out;
}

/** A line echo server that keeps connections open: "<name> <line>" per line received. */
export async function serveStream(name: string, port: number): Promise<void> {
  const srv = createServer((c) => {
    c.setEncoding('utf8');
    c.on('data', (d: string) => {
      for (const line of d.split('\n')) if (line) c.write(`${name} ${line}\n`);
    });
    c.on('error', () => {});
  });
  await new Promise<void>((resolve) => srv.listen(port, '0.0.0.0', resolve));
  servers.push(srv);
}

const streams = new Map<number, TcpSocket>();
let nextStream = 0;

/** Opens a long-lived connection and returns its id. */
export function openStream(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port }, () => {
      const id = ++nextStream;
      streams.set(id, s);
      resolve(id);
    });
    s.setEncoding('utf8');
    s.once('error', reject);
  });
}

/** Sends one line on an open connection and returns the answer ("ETIMEDOUT" or an error code when it does not come). */
export function streamRoundTrip(id: number, line: string, timeoutMs = 2000): Promise<string> {
  const s = streams.get(id);
  if (!s) return Promise.resolve('ENOSTREAM');
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      s.off('data', onData);
      resolve('ETIMEDOUT');
    }, timeoutMs);
    const onData = (d: string): void => {
      clearTimeout(timer);
      s.off('data', onData);
      resolve(d.trim());
    };
    s.on('data', onData);
    s.write(`${line}\n`, (err) => {
      if (err) {
        clearTimeout(timer);
        resolve((err as NodeJS.ErrnoException).code ?? 'ERROR');
      }
    });
  });
}

// SCTP: Node has no SCTP sockets, so sctp.py (a system Python) serves and connects; see there
// for its two modes (kernel SCTP sockets, or hand-made INIT/INIT-ACK over raw sockets when
// the kernel lacks SCTP).
const SCTP_PY = fileURLToPath(new URL('./sctp.py', import.meta.url));
const sctpServers: ChildProcess[] = [];

/**
 * An SCTP backend answering "<name> <peer address>"; it exits when this agent does (its stdin closes). Returns its
 * mode.
 */
export function serveSctp(name: string, port: number): Promise<string> {
  const child = spawn(systemTool('python3'), [SCTP_PY, 'serve', name, String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  sctpServers.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`sctp.py serve exited ${code}: ${out}`)));
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (d: string) => {
      out += d;
      const m = /^ready (\w+)$/m.exec(out);
      if (m) resolve(m[1]!);
    });
  });
}

/** One SCTP association: the answer, ECONNREFUSED (ABORT or ICMP unreachable) or ETIMEDOUT. */
export function sctp(host: string, port: number, timeoutMs = 1500): Promise<string> {
  return new Promise((resolve) => {
    execFile(
      systemTool('python3'),
      [SCTP_PY, 'connect', host, String(port), String(timeoutMs)],
      { timeout: timeoutMs + 5000, encoding: 'utf8' },
      (err, stdout, stderr) => {
        resolve(err ? `ERROR ${stderr.trim() || err.message}` : stdout.trim());
      },
    );
  });
}

export async function sctpMany(host: string, port: number, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await sctp(host, port));
  return out;
}
