// Run by a netns agent: many long-lived TCP connections to one address, each proven proxied by
// a line echoed back (serveStream's "<name> <line>"), held until releaseAll(). A connection
// the proxy refuses is reset before its answer comes.

import { connect, type Socket } from 'node:net';

const held = new Set<Socket>();

/** One connection: 'proxied' (answered and kept open) or why not. */
function holdOne(host: string, port: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setEncoding('utf8');
    const done = (why: string): void => {
      clearTimeout(timer);
      if (why === 'proxied') held.add(s);
      else s.destroy();
      resolve(why);
    };
    const timer = setTimeout(() => done('ETIMEDOUT'), timeoutMs);
    s.once('data', (d: string) => done(d.startsWith('pod') ? 'proxied' : `answer ${d}`));
    s.on('error', (e: NodeJS.ErrnoException) => done(e.code ?? 'ERROR'));
    s.once('close', () => {
      held.delete(s);
      done('closed');
    });
    s.once('connect', () => s.write('ping\n'));
  });
}

/** Opens n connections, `parallel` at a time; counts the outcomes ('proxied', 'ECONNRESET', ...). */
export async function holdMany(
  host: string,
  port: number,
  n: number,
  parallel = 50,
  timeoutMs = 5000,
): Promise<Record<string, number>> {
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < n; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, n - i) }, () => holdOne(host, port, timeoutMs));
    for (const why of await Promise.all(batch)) outcomes[why] = (outcomes[why] ?? 0) + 1;
  }
  return outcomes;
}

/** Connections held open now (the proxy may close them later). */
export function heldCount(): number {
  return held.size;
}

export function releaseAll(): number {
  const n = held.size;
  for (const s of held) s.destroy();
  held.clear();
  return n;
}
