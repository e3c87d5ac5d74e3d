// Run by a netns agent: `n` TCP connections to host:port that never send a byte, each opened
// again at once when the server closes it, until stopHalfOpen() (an attacker holding slots).

import { connect, type Socket } from 'node:net';

interface HalfOpen {
  stop: boolean;
  sockets: Set<Socket>;
  established: number;
  closedByServer: number;
}

let held: HalfOpen | undefined;

function hold(h: HalfOpen, host: string, port: number): void {
  if (h.stop) return;
  const s = connect({ host, port });
  h.sockets.add(s);
  s.on('connect', () => h.established++);
  s.on('data', () => undefined); // a 408 on the way out
  s.on('error', () => undefined);
  s.once('close', () => {
    h.sockets.delete(s);
    if (h.stop) return;
    h.closedByServer++;
    setImmediate(() => hold(h, host, port));
  });
}

export function startHalfOpen(host: string, port: number, n: number): void {
  if (held) throw new Error('half-open connections are already held by this agent');
  const h: HalfOpen = { stop: false, sockets: new Set(), established: 0, closedByServer: 0 };
  held = h;
  for (let i = 0; i < n; i++) hold(h, host, port);
}

/** Connections established so far (reopened ones included), and closed by the server. */
export function halfOpenCount(): { established: number; closedByServer: number; open: number } {
  return {
    established: held?.established ?? 0,
    closedByServer: held?.closedByServer ?? 0,
    open: held?.sockets.size ?? 0,
  };
}

export function stopHalfOpen(): { established: number; closedByServer: number } {
  const h = held;
  if (!h) return { established: 0, closedByServer: 0 };
  h.stop = true;
  for (const s of h.sockets) s.destroy();
  held = undefined;
  return { established: h.established, closedByServer: h.closedByServer };
}
