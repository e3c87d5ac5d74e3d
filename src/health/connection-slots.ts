// The connection slots of the daemon's HTTP servers (the health port, the metrics port, the
// Service health-check node ports): one policy, so that no number of clients, looping or
// half-open, can lock a health check out.
//
// - The number of open connections is capped (maxConnections), and so is what one source
//   address holds (perSourceMax).
// - A new connection is always accepted first. If its source already holds perSourceMax
//   slots, one of that source's own connections yields; else, if every slot is taken, one of
//   the source holding the most slots yields. The one that yields is the oldest idle
//   connection (no request in progress: a keep-alive connection between requests, or one
//   that has not sent a whole request yet, as a half-open or slowloris client), else the
//   newest one waiting on a bulk request (`yields`: /metrics, whose clients wait in a render
//   line, where the longest waiting keep their place). Only when no connection may yield is
//   the new one closed at once.
// - Node's own deadlines (http-limits.ts) close what yields nothing: headers not complete
//   within headersTimeout (a connection that sends nothing at all too), idle keep-alive
//   connections after keepAliveTimeout.
//
// Why accept and then choose, rather than refuse at accept with slots kept in reserve: the
// refused clients of a flood reconnect at once and queue ahead of a probe in the listen
// backlog, taking every reserved slot freed before the probe is accepted. Accepting every
// connection and closing a flood's instead serves the probe in the order it arrived. Why the
// largest source yields: a flood comes from few addresses (a pod has one), health checkers
// from others (the kubelet, a load balancer's probers), so they keep their connections.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface SlotPolicy {
  /** Open connections at most. */
  readonly maxConnections: number;
  /** Open connections from one source address at most. */
  readonly perSourceMax: number;
  /** A request during which its connection may yield its slot (bulk: /metrics); default none. */
  readonly yields?: (req: IncomingMessage) => boolean;
  /** The server as the metrics name it ('health', 'metrics', 'service-health'); unnamed pools are not counted there. */
  readonly server?: string;
}

export interface SlotCounts {
  /** Connections closed to make room for a new one. */
  readonly evicted: number;
  /** New connections closed because no slot could be freed. */
  readonly refused: number;
}

/** One server's connections, over every pool of its name, since the process started. */
export interface SlotCensus extends SlotCounts {
  readonly server: string;
  /** Open connections now. */
  readonly open: number;
}

/**
 * The process's named pools, counted together by server name: the metrics read this at scrape
 * time (metrics/http-slots.ts) without a reference to every server the daemon opened.
 */
type Counted = { -readonly [K in keyof SlotCensus]: SlotCensus[K] };
const census = new Map<string, Counted>();

/** Every named server's counts, in the order the servers were first opened. */
export function slotCensus(): readonly SlotCensus[] {
  return [...census.values()].map((c) => ({ ...c }));
}

interface Conn {
  readonly socket: Socket;
  readonly source: Source;
  /** Requests received and not yet answered (pipelining: more than one). */
  inFlight: number;
  /** Of those, bulk ones. */
  bulkInFlight: number;
}

interface Source {
  readonly key: string;
  count: number;
  /** Idle connections in the order they became idle: the first is the oldest. */
  readonly idle: Set<Conn>;
  /** Connections waiting on bulk requests only, in the order they started waiting. */
  readonly bulk: Set<Conn>;
}

/** One pool of slots; servers attached to it share it (the Service health-check ports do). */
export class ConnectionSlots implements SlotCounts {
  evicted = 0;
  refused = 0;
  private readonly policy: SlotPolicy;
  private readonly conns = new Map<Socket, Conn>();
  private readonly sources = new Map<string, Source>();
  /** This pool's line of the census (a named pool), shared with the other pools of its name. */
  private readonly counted: Counted | undefined;

  constructor(policy: SlotPolicy) {
    if (!(policy.maxConnections >= 1 && policy.perSourceMax >= 1))
      throw new Error('connection slots: maxConnections and perSourceMax must be at least 1');
    this.policy = policy;
    const server = policy.server;
    if (server !== undefined) {
      this.counted = census.get(server) ?? { server, open: 0, evicted: 0, refused: 0 };
      census.set(server, this.counted);
    }
  }

  /** Open connections now. */
  get open(): number {
    return this.conns.size;
  }

  /** Takes over `server`'s connection cap (node:http's maxConnections closes new ones only). */
  attach(server: Server): void {
    server.maxConnections = Infinity;
    server.on('connection', (socket: Socket) => this.admit(socket));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.started(req, res));
  }

  private admit(socket: Socket): void {
    if (socket.destroyed) return;
    const key = sourceKey(socket.remoteAddress);
    let source = this.sources.get(key);
    const full =
      source !== undefined && source.count >= this.policy.perSourceMax
        ? source
        : this.conns.size >= this.policy.maxConnections
          ? this.largestYielding()
          : undefined;
    if (full !== undefined || this.conns.size >= this.policy.maxConnections) {
      const victim = full === undefined ? undefined : yieldingOf(full);
      if (victim === undefined) {
        this.refused++;
        if (this.counted) this.counted.refused++;
        socket.destroy();
        return;
      }
      this.evicted++;
      if (this.counted) this.counted.evicted++;
      this.forget(victim);
      victim.socket.destroy();
    }
    // Looked up again: the connection that yielded may have been its source's last.
    source = this.sources.get(key);
    if (source === undefined) {
      source = { key, count: 0, idle: new Set(), bulk: new Set() };
      this.sources.set(key, source);
    }
    const conn: Conn = { socket, source, inFlight: 0, bulkInFlight: 0 };
    source.count++;
    source.idle.add(conn);
    this.conns.set(socket, conn);
    if (this.counted) this.counted.open++;
    socket.once('close', () => this.forget(conn));
  }

  private started(req: IncomingMessage, res: ServerResponse): void {
    const conn = this.conns.get(req.socket);
    if (conn === undefined) return;
    const bulk = this.policy.yields?.(req) === true;
    conn.inFlight++;
    if (bulk) conn.bulkInFlight++;
    this.place(conn);
    let done = false;
    const finished = (): void => {
      if (done) return;
      done = true;
      conn.inFlight--;
      if (bulk) conn.bulkInFlight--;
      if (this.conns.get(conn.socket) === conn) this.place(conn);
    };
    res.once('finish', finished);
    res.once('close', finished);
  }

  /** Files a connection under idle, bulk or neither (busy) by its requests in flight. */
  private place(conn: Conn): void {
    const s = conn.source;
    if (conn.inFlight === 0) {
      s.bulk.delete(conn);
      if (!s.idle.has(conn)) s.idle.add(conn);
      return;
    }
    s.idle.delete(conn);
    if (conn.inFlight === conn.bulkInFlight) {
      if (!s.bulk.has(conn)) s.bulk.add(conn);
    } else s.bulk.delete(conn);
  }

  /** The source holding the most slots among those with a connection that may yield. */
  private largestYielding(): Source | undefined {
    let best: Source | undefined;
    for (const s of this.sources.values())
      if ((s.idle.size > 0 || s.bulk.size > 0) && (best === undefined || s.count > best.count)) best = s;
    return best;
  }

  private forget(conn: Conn): void {
    if (this.conns.get(conn.socket) !== conn) return;
    this.conns.delete(conn.socket);
    if (this.counted) this.counted.open--;
    const s = conn.source;
    s.idle.delete(conn);
    s.bulk.delete(conn);
    if (--s.count === 0) this.sources.delete(s.key);
  }
}

/** The oldest idle connection, else the newest waiting on bulk requests. */
function yieldingOf(s: Source): Conn | undefined {
  for (const c of s.idle) return c;
  let newest: Conn | undefined;
  for (const c of s.bulk) newest = c; // at most perSourceMax: cheap next to an accept
  return newest;
}

/** The source address, IPv4-mapped IPv6 addresses as IPv4 (a dual-stack listener sees those). */
function sourceKey(address: string | undefined): string {
  if (address === undefined) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
