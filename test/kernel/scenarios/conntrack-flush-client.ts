// Runs in the client namespace: a UDP "client" that keeps one socket, hence one source port,
// for its whole life (as a resolver library does), and records what answers each request.
import { createSocket } from 'node:dgram';
import type { Socket } from 'node:dgram';

interface Sender {
  sock: Socket;
  host: string;
  port: number;
  waiting: ((answer: string) => void) | undefined;
  loop: { stop: boolean; done: Promise<void>; log: Answer[] } | undefined;
}

export interface Answer {
  /** Date.now() when the request was sent. */
  sentAt: number;
  answer: string;
}

const senders = new Map<string, Sender>();

/** Opens a socket bound to `srcPort` that sends to host:port. */
export async function open(id: string, host: string, port: number, srcPort: number): Promise<void> {
  const sock = createSocket('udp4');
  const s: Sender = { sock, host, port, waiting: undefined, loop: undefined };
  sock.on('message', (m) => {
    const w = s.waiting;
    s.waiting = undefined;
    w?.(m.toString());
  });
  sock.on('error', () => {});
  await new Promise<void>((resolve) => sock.bind(srcPort, resolve));
  senders.set(id, s);
}

/** One request: the answer ("<pod> <peer>"), or ETIMEDOUT. */
export function ask(id: string, timeoutMs = 1500): Promise<string> {
  const s = senders.get(id)!;
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      s.waiting = undefined;
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.waiting = (a) => {
      clearTimeout(timer);
      resolve(a);
    };
    s.sock.send('hello', s.port, s.host);
  });
}

/** Keeps asking, one request at a time, every intervalMs, until stopLoop. */
export function startLoop(id: string, intervalMs = 50, timeoutMs = 300): void {
  const s = senders.get(id)!;
  const log: Answer[] = [];
  const loop = { stop: false, log, done: Promise.resolve() };
  loop.done = (async () => {
    while (!loop.stop) {
      const sentAt = Date.now();
      log.push({ sentAt, answer: await ask(id, timeoutMs) });
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  s.loop = loop;
}

export async function stopLoop(id: string): Promise<Answer[]> {
  const s = senders.get(id)!;
  const loop = s.loop!;
  loop.stop = true;
  await loop.done;
  s.loop = undefined;
  return loop.log;
}

export function close(id: string): void {
  senders.get(id)?.sock.close();
  senders.delete(id);
}
