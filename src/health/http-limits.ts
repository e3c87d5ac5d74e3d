// Bounds for the daemon's own HTTP servers (metrics, healthz, service health checks): they
// share the event loop with the sync loop, so no client may hold half-sent requests or idle
// keep-alive connections for long, and the number of open connections is capped
// (connections over the cap are closed as they are accepted: node:http's maxConnections).

import type { Server } from 'node:http';

export interface HttpServerLimits {
  /** Open connections at most; more are closed at once. */
  maxConnections: number;
  /** A request's headers must arrive within this (slowloris). */
  headersTimeoutMs: number;
  /** The whole request must arrive within this. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpServerLimits = {
  maxConnections: 256,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/**
 * Options for createServer: node:http checks the header and request time-outs only every
 * connectionsCheckingInterval (30 s by default), which would let a slow client hold a
 * connection three times longer than headersTimeout says.
 */
export const HTTP_SERVER_OPTIONS = { connectionsCheckingInterval: 1000 } as const;

export function applyHttpLimits(server: Server, limits: HttpServerLimits = DEFAULT_HTTP_LIMITS): void {
  server.maxConnections = limits.maxConnections;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
}
