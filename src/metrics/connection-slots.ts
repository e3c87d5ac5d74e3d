// The connection slots of the metrics server, shared so that a /metrics flood cannot lock out
// health checks on the same port (upstream serves /healthz there too). The number of open
// connections stays capped; when a new connection finds every slot taken, a connection whose
// last request was for a bulk path (/metrics: the one a scraper or a flood loops on) gives up
// its slot, the newest such connection first, and the new connection is kept. Only when no
// connection may yield is the new one closed at once, as node:http's maxConnections does.
//
// Why not refuse at accept and keep a reserve of slots for health checks: the refused clients
// of a flood reconnect at once and queue ahead of a probe in the listen backlog, so they take
// every reserve slot freed before the probe is accepted. Accepting every connection and closing
// a flood's instead puts the probe through in the order it arrived. The newest yields first: a
// flood then churns through the last slots only (an accept, a request and a close per
// connection, near what refusing at accept costs), while the connections that have waited
// longest keep their place in the render line (render-cache.ts) and are served.

import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionSlotsOptions {
  /** Open connections at most. */
  maxConnections: number;
  /** A request for which its connection may later give up its slot to a new connection. */
  yields: (req: IncomingMessage) => boolean;
}

export interface ConnectionSlots {
  /** Connections closed to make room for a new one. */
  readonly evicted: number;
  /** New connections closed because no slot could be freed. */
  readonly refused: number;
}

/** Caps server's connections as described above; replaces node:http's maxConnections. */
export function shareConnectionSlots(server: Server, opts: ConnectionSlotsOptions): ConnectionSlots {
  const open = new Set<Socket>();
  // In the order of their first yielding request: the last is the one to go.
  const yielding = new Set<Socket>();
  const counts = { evicted: 0, refused: 0 };
  server.maxConnections = Infinity;
  server.on('connection', (socket: Socket) => {
    if (open.size >= opts.maxConnections) {
      let victim: Socket | undefined;
      for (const s of yielding) victim = s; // at most maxConnections: cheap next to an accept
      if (victim === undefined) {
        counts.refused++;
        socket.destroy();
        return;
      }
      counts.evicted++;
      yielding.delete(victim);
      open.delete(victim);
      victim.destroy();
    }
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      yielding.delete(socket);
    });
  });
  server.on('request', (req: IncomingMessage) => {
    const socket = req.socket;
    if (!open.has(socket)) return;
    if (!opts.yields(req)) yielding.delete(socket);
    else if (!yielding.has(socket)) yielding.add(socket);
  });
  return counts;
}
