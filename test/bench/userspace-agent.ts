// The userspace mode benchmark's probes, run by netns agents (test/bench/userspace.ts): pods
// serve a byte sink, the client measures throughput, connection rate, round trips and how soon a
// new Service answers, the node reports its process's memory. The proxiers themselves are
// test/kernel/scenarios/nft-proxier.ts's and us-proxier.ts's, in the node's agent.
import { readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/** Reads until the client's FIN and answers with the byte count. */
export function serveDiscard(port: number): Promise<void> {
  const srv = createServer({ allowHalfOpen: true }, (c) => {
    let n = 0;
    c.on('error', () => {});
    c.on('data', (d: Buffer) => (n += d.length));
    c.on('end', () => c.end(String(n)));
  });
  return new Promise((resolve) => srv.listen(port, '0.0.0.0', resolve));
}

/** One stream of `bytes` to a discard server, as fast as the socket takes it: ms until its count comes back. */
export function throughput(host: string, port: number, bytes: number): Promise<number> {
  const chunk = Buffer.alloc(256 * 1024, 'z');
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let sent = 0;
    let answer = '';
    const s = connect({ host, port, allowHalfOpen: true }, () => pump());
    const pump = (): void => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!s.write(chunk)) return void s.once('drain', pump);
      }
      s.end();
    };
    s.setEncoding('utf8');
    s.on('data', (d: string) => (answer += d));
    s.on('end', () =>
      Number(answer) >= bytes ? resolve(performance.now() - t0) : reject(new Error(`sink counted ${answer}`)),
    );
    s.on('error', reject);
  });
}

function oneConnection(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    let got = false;
    s.on('data', () => (got = true));
    s.on('end', () => resolve(got));
    s.on('error', () => resolve(false));
  });
}

/** `total` connections (each: connect, read the pod's answer, close), `concurrency` at a time. */
export async function connectionRate(
  host: string,
  port: number,
  total: number,
  concurrency: number,
): Promise<{ ms: number; ok: number }> {
  let next = 0;
  let ok = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (next < total) {
      next++;
      if (await oneConnection(host, port)) ok++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ms: performance.now() - t0, ok };
}

/** n sequential line round trips on one connection to a line echo server: each one's µs. */
export function roundTrips(host: string, port: number, n: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const samples: number[] = [];
    const s = connect({ host, port, noDelay: true }, () => send());
    let t0 = 0;
    const send = (): void => {
      t0 = performance.now();
      s.write('x\n');
    };
    s.setEncoding('utf8');
    s.on('data', () => {
      samples.push((performance.now() - t0) * 1000);
      if (samples.length < n) send();
      else {
        s.destroy();
        resolve(samples);
      }
    });
    s.on('error', reject);
  });
}

/**
 * Connects to host:port every 2 ms (each try a fresh connection, left open up to 1 s: a SYN sent
 * before the rules exist is dropped and retransmitted only after a second, so tries overlap)
 * until one is answered: the wall clock (Date.now(), the same in every process) when it was, or
 * NaN after `deadlineMs`. At most 600 tries are open at once.
 */
export function untilAnswered(host: string, port: number, deadlineMs: number): Promise<number> {
  return new Promise((resolve) => {
    const pending = new Set<Socket>();
    let done = false;
    const finish = (at: number): void => {
      if (done) return;
      done = true;
      clearInterval(every);
      clearTimeout(deadline);
      for (const s of pending) s.destroy();
      pending.clear();
      resolve(at);
    };
    const tryOnce = (): void => {
      if (done || pending.size >= 600) return;
      const s = connect({ host, port });
      pending.add(s);
      const drop = (): void => {
        pending.delete(s);
        s.destroy();
      };
      s.setTimeout(1000, drop);
      s.on('data', () => finish(Date.now()));
      s.on('error', drop);
      s.on('end', drop);
    };
    const every = setInterval(tryOnce, 2);
    const deadline = setTimeout(() => finish(NaN), deadlineMs);
    tryOnce();
  });
}

/** Nothing: a call's round trip is the answering process's event-loop responsiveness. */
export function ping(): number {
  return Date.now();
}

const idle: Socket[] = [];

/** Opens n idle connections, `batch` at a time; resolves how many connected. */
export async function openIdle(host: string, port: number, n: number, batch = 500): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i += batch) {
    const results = await Promise.all(
      Array.from(
        { length: Math.min(batch, n - i) },
        () =>
          new Promise<boolean>((resolve) => {
            const s = connect({ host, port }, () => resolve(true));
            s.on('error', () => resolve(false));
            idle.push(s);
          }),
      ),
    );
    ok += results.filter(Boolean).length;
  }
  return ok;
}

export function closeIdle(): void {
  for (const s of idle.splice(0)) s.destroy();
}

/** This process's resident set, MiB (/proc/self/status VmRSS), after a full GC when exposed. */
export async function rssMiB(): Promise<number> {
  (globalThis as { gc?: () => void }).gc?.();
  const text = await readFile('/proc/self/status', 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN) / 1024;
}
