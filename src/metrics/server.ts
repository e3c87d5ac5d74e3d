// The metrics HTTP server (upstream's default 127.0.0.1:10249): /metrics rendered by
// prom-client, plus what upstream serves on the same port: /healthz and /healthz/ping ("ok",
// the process answers), /proxyMode (the mode as plain text) and /configz (the effective
// configuration), and upstream's ops pages /statusz, /flagz and /metrics/slis
// (ops-endpoints.ts). Serving is bounded (render-cache.ts, http-limits.ts) so that no number of
// clients starves the sync loop sharing the event loop, and its connections take slots as the
// health port's do (health/connection-slots.ts; a /metrics connection waiting in the render line
// yields to a new one), so that /healthz still answers while a flood holds them all.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../base/logger.ts';
import { nullLogger } from '../base/logger.ts';
import { ConnectionSlots } from '../health/connection-slots.ts';
import { applyHttpLimits, HTTP_SERVER_OPTIONS, METRICS_SLOTS } from '../health/http-limits.ts';
import type { ProxyMetrics } from './metrics.ts';
import type { OpsRoutes } from './ops-endpoints.ts';
import { PacedRenderCache } from './render-cache.ts';

export interface MetricsServerOptions {
  /** "host:port" or "[v6]:port"; port 0 picks a free port (tests). */
  address: string;
  metrics: ProxyMetrics;
  proxyMode: string;
  /** Returns the object served at /configz; omit to not serve it. */
  configz?: () => unknown;
  logger?: Logger;
  /** How long a /metrics render is reused; default 1 s. */
  renderMaxAgeMs?: number;
  /** /metrics responses per second at most; default 20 (later requests wait their turn). */
  metricsPerSecond?: number;
  /** Upstream's other pages on this port (/statusz, /flagz, /metrics/slis): ops-endpoints.ts. */
  opsRoutes?: OpsRoutes;
  /** Called for each /healthz answer (the SLI metrics count the "ping" check). */
  onHealthz?: () => void;
}

export interface MetricsServer {
  /** The bound port. */
  readonly port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const log = opts.logger ?? nullLogger;
  const { host, port } = parseListenAddress(opts.address);
  const cache = new PacedRenderCache({
    render: () => opts.metrics.registry.metrics(),
    maxAgeMs: opts.renderMaxAgeMs ?? 1000,
    perSecond: opts.metricsPerSecond ?? 20,
  });
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (code: number, type: string, body: string, headers: Record<string, string> = {}) => {
      if (res.destroyed) return;
      res.writeHead(code, { ...headers, 'Content-Type': type, 'X-Content-Type-Options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    switch (path) {
      case '/metrics': {
        // A client that goes away (or whose connection gave up its slot) leaves the line.
        const gone = new AbortController();
        res.once('close', () => gone.abort());
        cache.get(gone.signal).then(
          (text) => {
            if (text !== undefined) send(200, opts.metrics.registry.contentType, text);
          },
          (err: unknown) => {
            log.error('Rendering metrics failed', { op: 'GET /metrics', err });
            send(500, 'text/plain; charset=utf-8', 'error rendering metrics\n');
          },
        );
        return;
      }
      case '/healthz':
      case '/healthz/ping':
        if (path === '/healthz') opts.onHealthz?.();
        send(200, 'text/plain; charset=utf-8', 'ok');
        return;
      case '/proxyMode':
        send(200, 'text/plain; charset=utf-8', opts.proxyMode);
        return;
      case '/configz':
        if (opts.configz !== undefined) {
          send(200, 'application/json', JSON.stringify({ kubeproxy: opts.configz() }));
          return;
        }
        break;
    }
    const ops = path === undefined ? undefined : opts.opsRoutes?.(path, req);
    if (ops !== undefined) {
      Promise.resolve(ops).then(
        (a) => send(a.code, a.type, a.body, a.headers),
        (err: unknown) => {
          log.error('Answering failed', { op: `GET ${path}`, err });
          send(500, 'text/plain; charset=utf-8', 'internal error\n');
        },
      );
      return;
    }
    send(404, 'text/plain; charset=utf-8', '404 page not found\n');
  };
  const server = createServer(HTTP_SERVER_OPTIONS, handler);
  applyHttpLimits(server);
  new ConnectionSlots({
    ...METRICS_SLOTS,
    yields: (req) => (req.url ?? '/').split('?')[0] === '/metrics',
  }).attach(server);
  await listen(server, host, port);
  const bound = (server.address() as AddressInfo).port;
  log.info('Serving metrics', { address: opts.address, port: bound });
  return {
    port: bound,
    close: () => {
      cache.close();
      return closeServer(server);
    },
  };
}

export function parseListenAddress(addr: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(addr) ?? /^([^:]*):(\d+)$/.exec(addr);
  if (m === null) throw new Error(`"${addr}" is not host:port`);
  return { host: m[1]!, port: Number(m[2]) };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ host: host === '' ? undefined : host, port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
