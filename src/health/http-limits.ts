// Bounds for the daemon's own HTTP servers (metrics, healthz, Service health checks): they
// share the event loop with the sync loop, so no client may hold half-sent requests or idle
// keep-alive connections for long, and each server's connections are capped by a slot policy
// (connection-slots.ts) that always keeps room for a new health check. The caps add up to
// HTTP_CONNECTIONS_MAX, which the daemon keeps free of its descriptor limit for them.

import type { Server } from 'node:http';
import type { SlotPolicy } from './connection-slots.ts';

export interface HttpServerLimits {
  /** A request's headers must arrive within this (slowloris; a connection that sends nothing too). */
  headersTimeoutMs: number;
  /** The whole request must arrive within this. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpServerLimits = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
};

/** The health port (10256): /healthz and /livez. */
export const HEALTH_SLOTS: SlotPolicy = { maxConnections: 1024, perSourceMax: 512, server: 'health' };
/**
 * The metrics port (10249). More slots: a /metrics client over the render rate waits in line
 * on its connection (render-cache.ts), idle, where a client closed at accept would reconnect at
 * once and spin; /metrics connections are the first to yield to a new one.
 */
export const METRICS_SLOTS: Omit<SlotPolicy, 'yields'> = {
  maxConnections: 2048,
  perSourceMax: 1024,
  server: 'metrics',
};
/** Every Service health-check node port together (one pool: their number follows the cluster's). */
export const SERVICE_HEALTH_SLOTS: SlotPolicy = { maxConnections: 1024, perSourceMax: 512, server: 'service-health' };

/** The connections of every HTTP server of the daemon at most. */
export const HTTP_CONNECTIONS_MAX =
  HEALTH_SLOTS.maxConnections + METRICS_SLOTS.maxConnections + SERVICE_HEALTH_SLOTS.maxConnections;

/**
 * Options for createServer: node:http checks the header and request time-outs only every
 * connectionsCheckingInterval (30 s by default), which would let a slow client hold a
 * connection several times longer than headersTimeout says; probes and scrapes send small
 * headers, so 8 KiB (half of Node's default) is plenty.
 */
export const HTTP_SERVER_OPTIONS = { connectionsCheckingInterval: 1000, maxHeaderSize: 8192 } as const;

export function applyHttpLimits(server: Server, limits: HttpServerLimits = DEFAULT_HTTP_LIMITS): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
}
