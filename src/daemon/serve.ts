// Starting the healthz and metrics servers the way upstream does (cmd/kube-proxy/app/server.go
// serveHealthz / serveMetrics): a bind failure is logged and retried every 5 s, and the
// daemon keeps running, unless bindAddressHardFail is set, in which case the error is
// returned to the caller, which exits.

import type { Clock, TimerHandle } from '../base/clock.ts';
import { nullLogger, type Logger } from '../base/logger.ts';

export interface Closable {
  close(): Promise<void>;
}

export interface ServeOptions<T extends Closable> {
  /** "healthz" / "metrics", for logs. */
  what: string;
  address: string;
  start: () => Promise<T>;
  clock: Clock;
  logger?: Logger;
  hardFail: boolean;
  retryIntervalMs?: number;
}

export interface Served<T extends Closable> {
  /** The running server, once it started. */
  current(): T | undefined;
  /** Resolves when the server first starts. */
  readonly started: Promise<T>;
  close(): Promise<void>;
}

/** Rejects only with bindAddressHardFail and a failed first attempt. */
export async function serveWithRetry<T extends Closable>(opts: ServeOptions<T>): Promise<Served<T>> {
  const log = opts.logger ?? nullLogger;
  const retryMs = opts.retryIntervalMs ?? 5000;
  let server: T | undefined;
  let timer: TimerHandle | undefined;
  let closed = false;
  let resolveStarted!: (s: T) => void;
  const started = new Promise<T>((resolve) => (resolveStarted = resolve));
  let failures = 0;

  const attempt = async (): Promise<void> => {
    timer = undefined;
    if (closed) return;
    try {
      const s = await opts.start();
      if (closed) {
        await s.close();
        return;
      }
      server = s;
      if (failures > 0)
        log.info(`Serving ${opts.what} after retrying`, { address: opts.address, attempts: failures + 1 });
      resolveStarted(s);
    } catch (err) {
      failures++;
      if (opts.hardFail && failures === 1)
        throw new Error(`failed to start ${opts.what} server on ${opts.address}`, { cause: err });
      const fields = { op: `listen ${opts.what}`, address: opts.address, err, retryInMs: retryMs };
      if (failures === 1) log.error(`Failed to start ${opts.what} server; will retry`, fields);
      else log.debug(`Still cannot start ${opts.what} server`, fields);
      timer = opts.clock.setTimer(retryMs, () => void attempt());
    }
  };
  await attempt();
  return {
    current: () => server,
    started,
    close: async () => {
      closed = true;
      timer?.cancel();
      timer = undefined;
      const s = server;
      server = undefined;
      await s?.close();
    },
  };
}
