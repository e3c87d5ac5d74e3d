// systemd notification (Type=notify units) behind a small interface, so the daemon's
// lifecycle can be tested with a recording fake:
//
//   READY=1 after the first successful full sync; STATUS=<short state> as it changes;
//   WATCHDOG=1 every half WatchdogSec (WATCHDOG_USEC) while the health predicate holds,
//   so a wedged sync loop stops the pings and systemd restarts us; STOPPING=1 on shutdown.
//
// The real implementation uses the `sd-notify` native package (libsystemd's sd_notify),
// loaded lazily: outside systemd (no NOTIFY_SOCKET) nothing is loaded and every call is a
// no-op, and a package that fails to load is logged once and degrades to a no-op.

import { createRequire } from 'node:module';
import type { Clock, TimerHandle } from '../base/clock.ts';
import { nullLogger, type Logger } from '../base/logger.ts';

export interface Notifier {
  ready(): void;
  status(text: string): void;
  stopping(): void;
  watchdog(): void;
  /** WatchdogSec in ms when systemd asked for pings (for this process); undefined otherwise. */
  readonly watchdogUsecMs: number | undefined;
  /**
   * Pings WATCHDOG=1 now and every watchdogUsecMs/2 while healthy() is true; a tick with
   * healthy() false sends nothing (and is logged). No-op without a watchdog.
   */
  startWatchdog(healthy: () => boolean): void;
  stopWatchdog(): void;
}

/** The subset of the `sd-notify` package we use (index.js / notify.cc). */
export interface SdNotifyBinding {
  ready(): void;
  stopping(pid: number): void;
  watchdog(): void;
  sendStatus(text: string): void;
}

export interface NotifierOptions {
  env?: NodeJS.ProcessEnv;
  clock: Clock;
  logger?: Logger;
  /** Inject the binding (tests); default: require('sd-notify') on first use. */
  binding?: SdNotifyBinding;
  pid?: number;
}

/** Parses WATCHDOG_USEC (honouring WATCHDOG_PID, as sd_watchdog_enabled does) into ms. */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv, pid: number): number | undefined {
  const usec = env.WATCHDOG_USEC;
  if (usec === undefined || !/^\d+$/.test(usec)) return undefined;
  const wpid = env.WATCHDOG_PID;
  if (wpid !== undefined && wpid !== '' && Number(wpid) !== pid) return undefined;
  const ms = Number(usec) / 1000;
  return ms > 0 ? ms : undefined;
}

abstract class WatchdogLoop {
  private timer: TimerHandle | undefined;
  private wasHealthy = true;
  protected abstract readonly clock: Clock;
  protected abstract readonly log: Logger;
  abstract readonly watchdogUsecMs: number | undefined;
  abstract watchdog(): void;

  startWatchdog(healthy: () => boolean): void {
    this.stopWatchdog();
    const period = this.watchdogUsecMs;
    if (period === undefined) return;
    const tick = (): void => {
      let ok = false;
      try {
        ok = healthy();
      } catch (err) {
        this.log.error('Watchdog health check threw', { err });
      }
      if (ok) this.watchdog();
      if (ok !== this.wasHealthy) {
        if (ok) this.log.info('Healthy again; resuming systemd watchdog pings');
        else
          this.log.error(
            'Unhealthy; withholding systemd watchdog pings (systemd will restart the service if this lasts)',
            { watchdogMs: period },
          );
        this.wasHealthy = ok;
      }
      this.timer = this.clock.setTimer(period / 2, tick);
    };
    tick();
  }

  stopWatchdog(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }
}

class SdNotifier extends WatchdogLoop implements Notifier {
  protected readonly clock: Clock;
  protected readonly log: Logger;
  readonly watchdogUsecMs: number | undefined;
  private readonly enabled: boolean;
  private readonly pid: number;
  private binding: SdNotifyBinding | undefined;
  private loadFailed = false;

  constructor(opts: NotifierOptions) {
    super();
    const env = opts.env ?? process.env;
    this.clock = opts.clock;
    this.log = opts.logger ?? nullLogger;
    this.pid = opts.pid ?? process.pid;
    this.enabled = env.NOTIFY_SOCKET !== undefined && env.NOTIFY_SOCKET !== '';
    this.watchdogUsecMs = this.enabled ? watchdogIntervalMs(env, this.pid) : undefined;
    this.binding = opts.binding;
  }

  private get b(): SdNotifyBinding | undefined {
    if (!this.enabled || this.loadFailed) return undefined;
    if (this.binding === undefined) {
      try {
        const require = createRequire(import.meta.url);
        this.binding = require('sd-notify') as SdNotifyBinding;
      } catch (err) {
        this.loadFailed = true;
        this.log.error('Cannot load the sd-notify package; systemd notifications are off', {
          op: 'load sd-notify',
          err,
        });
        return undefined;
      }
    }
    return this.binding;
  }

  ready(): void {
    this.b?.ready();
  }

  status(text: string): void {
    // One line: sd_notify separates assignments by newlines.
    this.b?.sendStatus(text.replace(/\s*\n\s*/g, ' '));
  }

  stopping(): void {
    this.b?.stopping(this.pid);
  }

  watchdog(): void {
    this.b?.watchdog();
  }
}

/** The real notifier (no-op outside systemd). */
export function createNotifier(opts: NotifierOptions): Notifier {
  return new SdNotifier(opts);
}

export type NotifyMessage = 'READY=1' | 'STOPPING=1' | 'WATCHDOG=1' | `STATUS=${string}`;

/** A notifier that records what it would send, for daemon tests. */
export class RecordingNotifier extends WatchdogLoop implements Notifier {
  readonly messages: NotifyMessage[] = [];
  protected readonly clock: Clock;
  protected readonly log: Logger;
  readonly watchdogUsecMs: number | undefined;

  constructor(opts: { clock: Clock; watchdogMs?: number; logger?: Logger }) {
    super();
    this.clock = opts.clock;
    this.log = opts.logger ?? nullLogger;
    this.watchdogUsecMs = opts.watchdogMs;
  }

  ready(): void {
    this.messages.push('READY=1');
  }
  status(text: string): void {
    this.messages.push(`STATUS=${text}`);
  }
  stopping(): void {
    this.messages.push('STOPPING=1');
  }
  watchdog(): void {
    this.messages.push('WATCHDOG=1');
  }
}
