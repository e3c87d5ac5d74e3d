// The daemon's local control socket: a unix stream socket, mode 0600 (root only, as the
// daemon runs as root), nothing on the network. One JSON request per line, one JSON answer
// per line ({"ok":true,"result":…} or {"ok":false,"error":"…"}); the handler decides what
// the queries mean (daemon/control.ts).
//
// The socket is bound under a temporary name, made 0600, then renamed into place, so that
// no other user ever sees it with looser permissions. A socket file left by a daemon that
// died is replaced; one a running daemon still answers on is not (a clear start-up error).

import { errorMessage } from '../base/errors.ts';
import { chmodSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from '../base/logger.ts';

export type ControlHandler = (request: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>;

export interface ControlServer {
  readonly path: string;
  close(): Promise<void>;
}

/** A line longer than this is not a query of ours. */
const MAX_REQUEST = 64 * 1024;

/** Whether something answers on the socket path (a live daemon). */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = createConnection(path);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
}

function serve(socket: Socket, handler: ControlHandler, log: Logger, closing: AbortSignal): void {
  let buf = '';
  const abort = new AbortController();
  const onClose = (): void => abort.abort();
  closing.addEventListener('abort', onClose, { once: true });
  socket.setEncoding('utf8');
  socket.on('error', () => abort.abort());
  socket.on('close', () => {
    abort.abort();
    closing.removeEventListener('abort', onClose);
  });
  const answer = (v: unknown): void =>
    void socket.end(`${JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x))}\n`);
  socket.on('data', (chunk: string) => {
    buf += chunk;
    const nl = buf.indexOf('\n');
    if (nl < 0) {
      if (buf.length > MAX_REQUEST) answer({ ok: false, error: `request longer than ${MAX_REQUEST} bytes` });
      return;
    }
    socket.removeAllListeners('data');
    let request: unknown;
    try {
      request = JSON.parse(buf.slice(0, nl));
    } catch (e) {
      answer({ ok: false, error: `not JSON: ${errorMessage(e)}` });
      return;
    }
    if (typeof request !== 'object' || request === null || Array.isArray(request)) {
      answer({ ok: false, error: 'a request is a JSON object' });
      return;
    }
    handler(request as Record<string, unknown>, abort.signal).then(
      (result) => answer({ ok: true, result }),
      (e: unknown) => {
        log.debug('Control query failed', { op: 'control', err: e });
        answer({ ok: false, error: errorMessage(e) });
      },
    );
  });
}

export async function startControlServer(opts: {
  path: string;
  handler: ControlHandler;
  logger: Logger;
}): Promise<ControlServer> {
  const { path, handler, logger } = opts;
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  if (await answers(path)) throw new Error(`another kube-proxy-ts answers on ${path}`);
  const temp = `${path}.${process.pid}.tmp`;
  rmSync(temp, { force: true });
  const closing = new AbortController();
  const server: Server = createServer((s) => serve(s, handler, logger, closing.signal));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(temp, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    chmodSync(temp, 0o600);
    renameSync(temp, path);
  } catch (e) {
    server.close();
    rmSync(temp, { force: true });
    throw e;
  }
  server.on('error', (err) => logger.warn('Control socket error', { op: 'control', path, err }));
  return {
    path,
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        // The file goes first, so a new daemon never finds ours half-closed.
        rmSync(path, { force: true });
        server.close(() => resolve());
      }),
  };
}
