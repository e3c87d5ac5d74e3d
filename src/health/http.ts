// The seam between health servers and sockets (upstream's listener + httpServerFactory in
// pkg/proxy/healthcheck/common.go): servers are opened through a ListenFn, so tests bind
// 127.0.0.1:0 or inject failures, and the daemon uses node:http.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConnectionSlots } from './connection-slots.ts';
import { applyHttpLimits, HEALTH_SLOTS, HTTP_SERVER_OPTIONS } from './http-limits.ts';

export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface HttpListener {
  /** The bound port (differs from the requested one when that was 0). */
  readonly port: number;
  close(): Promise<void>;
}

/** Opens an HTTP server on host:port ('' host = every address); rejects with the listen error (EADDRINUSE ...). */
export type ListenFn = (host: string, port: number, handler: HttpHandler) => Promise<HttpListener>;

/**
 * A ListenFn of node:http servers whose connections take slots of `slots` (servers made by one
 * such function share its pool).
 */
export function httpListen(slots: ConnectionSlots): ListenFn {
  return (host, port, handler) =>
    new Promise((resolve, reject) => {
      const server: Server = createServer(HTTP_SERVER_OPTIONS, handler);
      // Probes must not keep sockets around for long, nor any number of clients lock them out.
      applyHttpLimits(server);
      slots.attach(server);
      const onError = (err: Error) => reject(err);
      server.once('error', onError);
      server.listen({ host: host === '' ? undefined : host, port, exclusive: true }, () => {
        server.off('error', onError);
        resolve({
          port: (server.address() as AddressInfo).port,
          close: () =>
            new Promise<void>((done) => {
              server.close(() => done());
              server.closeAllConnections();
            }),
        });
      });
    });
}

/** A ListenFn whose every server has a pool of its own, as the health port's. */
export const nodeHttpListen: ListenFn = (host, port, handler) =>
  httpListen(new ConnectionSlots(HEALTH_SLOTS))(host, port, handler);

/** "host:port" / "[v6]:port" -> parts; host '' or '0.0.0.0' / '::' as given. */
export function parseHostPort(addr: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(addr) ?? /^([^:]*):(\d+)$/.exec(addr);
  if (m === null) throw new Error(`"${addr}" is not host:port`);
  return { host: m[1]!, port: Number(m[2]) };
}

export function sendJSON(
  req: IncomingMessage,
  res: ServerResponse,
  code: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, { 'Content-Type': 'application/json', 'X-Content-Type-Options': 'nosniff', ...headers });
  res.end(req.method === 'HEAD' ? undefined : body);
}
