// Asks the daemon's control socket one question (server.ts). A missing socket or one nobody
// answers on is a NoDaemonError, so the CLI can say "no daemon is running" rather than show
// an errno.

import { createConnection } from 'node:net';

export class NoDaemonError extends Error {
  readonly path: string;
  constructor(path: string, cause: unknown) {
    const code = (cause as { code?: string }).code;
    const why =
      code === 'EACCES'
        ? 'permission denied (it is root only)'
        : code === 'ENOENT'
          ? 'no such socket'
          : (code ?? String(cause));
    super(
      `cannot reach the kube-proxy-ts daemon on ${path}: ${why}; is the daemon running (and was it started with this --control-socket)?`,
      { cause },
    );
    this.name = 'NoDaemonError';
    this.path = path;
  }
}

export class ControlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ControlError';
  }
}

const MAX_ANSWER = 64 * 1024 * 1024;

export function askDaemon(
  path: string,
  request: Record<string, unknown>,
  timeoutMs: number | undefined = 30_000,
): Promise<unknown> {
  timeoutMs ??= 30_000;
  return new Promise((resolve, reject) => {
    let connected = false;
    let buf = '';
    const c = createConnection(path);
    const timer = setTimeout(() => {
      c.destroy();
      reject(new ControlError(`the daemon did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (f: () => void): void => {
      clearTimeout(timer);
      f();
    };
    c.setEncoding('utf8');
    c.once('connect', () => {
      connected = true;
      c.write(`${JSON.stringify(request)}\n`);
    });
    c.on('data', (chunk: string) => {
      buf += chunk;
      if (buf.length > MAX_ANSWER) {
        c.destroy();
        done(() => reject(new ControlError('the answer is too large')));
      }
    });
    c.once('error', (e) =>
      done(() => reject(connected ? new ControlError(`control socket: ${e.message}`) : new NoDaemonError(path, e))),
    );
    c.once('end', () => {
      done(() => {
        let a: { ok?: boolean; result?: unknown; error?: string };
        try {
          a = JSON.parse(buf) as typeof a;
        } catch {
          reject(new ControlError(`the daemon's answer is not JSON: ${buf.slice(0, 200)}`));
          return;
        }
        if (a.ok === true) resolve(a.result);
        else reject(new ControlError(a.error ?? 'the daemon refused the query'));
      });
    });
  });
}
