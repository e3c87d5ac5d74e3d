// Process-level behaviour, with the process injected so it can be tested:
//   - SIGTERM / SIGINT: log, run the shutdown (stop watchers and servers; the programmed
//     rules stay, as upstream, so traffic keeps flowing across a restart), exit 0. A
//     shutdown that takes longer than the bound, or a second signal, exits 1 at once.
//   - an uncaught exception or unhandled rejection: logged with its stack, exit 1.

import type { Logger } from '../base/logger.ts';
import { timerDelay } from '../base/clock.ts';

export interface ProcessLike {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

export interface SignalOptions {
  proc: ProcessLike;
  logger: Logger;
  shutdown: () => Promise<void>;
  exit: (code: number) => void;
  /** Bound on the shutdown; default 10 s. */
  shutdownTimeoutMs?: number;
  setTimer?: (ms: number, fn: () => void) => { cancel(): void };
}

/** Installs the handlers; returns a function that removes them. */
export function installProcessHandlers(opts: SignalOptions): () => void {
  const { proc, logger, exit } = opts;
  const timeoutMs = opts.shutdownTimeoutMs ?? 10_000;
  const setTimer =
    opts.setTimer ??
    ((ms: number, fn: () => void) => {
      const t = setTimeout(fn, timerDelay(ms));
      t.unref();
      return { cancel: () => clearTimeout(t) };
    });
  let stopping = false;

  const onSignal = (...args: unknown[]): void => {
    const signal = String(args[0] ?? 'signal');
    if (stopping) {
      logger.warn('Second signal during shutdown; exiting now', { signal });
      exit(1);
      return;
    }
    stopping = true;
    logger.info('Shutting down; leaving the programmed rules in place', { signal });
    const timer = setTimer(timeoutMs, () => {
      logger.error('Shutdown did not finish in time; exiting', { signal, timeoutMs });
      exit(1);
    });
    opts.shutdown().then(
      () => {
        timer.cancel();
        exit(0);
      },
      (err: unknown) => {
        timer.cancel();
        logger.error('Shutdown failed', { op: 'shutdown', err });
        exit(1);
      },
    );
  };
  const onFatal = (...args: unknown[]): void => {
    const err = args[0] instanceof Error ? args[0] : new Error(String(args[0]));
    logger.error('Unexpected exception; exiting', { err });
    exit(1);
  };

  proc.on('SIGTERM', onSignal);
  proc.on('SIGINT', onSignal);
  proc.on('uncaughtException', onFatal);
  proc.on('unhandledRejection', onFatal);
  return () => {
    proc.off('SIGTERM', onSignal);
    proc.off('SIGINT', onSignal);
    proc.off('uncaughtException', onFatal);
    proc.off('unhandledRejection', onFatal);
  };
}
