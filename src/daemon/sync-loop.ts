// The daemon's sync loop: the bounded-frequency runner plus everything an operator sees
// around a sync. It does not know how a sync is done (the proxier wiring passes `sync`);
// it decides when, whether full or partial, and reports:
//
//   - no sync until the sources have listed everything (no partial ruleset at start-up);
//     the first sync is full; after a failure (retry runs) and a repair request the next run
//     is full too; otherwise a run is partial unless the last full sync is fullSyncPeriod
//     (an hour, upstream's FullSyncPeriod since KEP-3453) old. The periodic run of
//     --sync-period is partial: drift is heard from the kernel's announcements and repaired
//     at once, so rewriting everything every 30 s bought little and held changes back.
//     Modes whose kernel state is never announced (IPVS virtual servers, ipsets) make every
//     periodic run a full one (`periodicFull`), which reads that state back and repairs it,
//     as upstream's IPVS proxier does on every sync;
//   - health: queuedUpdate on every change, updated after every successful sync;
//   - metrics: sync durations (all, full, partial), last (queued) timestamps, failures;
//   - systemd: READY=1 after the first successful full sync, STATUS= after each sync,
//     WATCHDOG=1 while healthy, STOPPING=1 on stop. Healthy is upstream's rule alone
//     (healthcheck/proxier_health.go): no change has waited 2 x --sync-period for a sync. How
//     long a sync has run does not count, so a long full sync (50,000 Services under load)
//     with no change waiting behind it is not "stuck"; one that holds a change that long is.

import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import { nullLogger, type Logger } from '../base/logger.ts';
import type { ProxyHealth } from '../health/proxy-health.ts';
import type { ProxyMetrics } from '../metrics/metrics.ts';
import { BoundedFrequencyRunner, type RunInfo, type RunReason } from '../sync/bounded-frequency-runner.ts';
import type { Notifier } from './sd-notify.ts';
import type { ProxyMode } from '../proxier/types.ts';
import { MODES } from './modes/index.ts';

/**
 * Upstream's burstSyncs (the iptables, IPVS and nftables proxiers): after a quiet gap a sync
 * starts at once even if the last began less than --min-sync-period ago, and a change that
 * arrived late once does not delay every later sync (bounded-frequency-runner.ts).
 */
export const BURST_SYNCS = 2;

/** Upstream's FullSyncPeriod (pkg/proxy/util): the longest time between two full syncs. */
export const FULL_SYNC_PERIOD_MS = 60 * 60_000;

export interface SyncRequest {
  /** Re-read and repair everything (first sync, hourly, after a failure or repair), or only what changed. */
  full: boolean;
  reason: RunReason;
  /** Aborted when the daemon stops. */
  signal: AbortSignal;
  /**
   * Every change kicked so far was taken by this sync while it ran (ArrivingChanges): the run
   * they asked for is not due, and their wait is not counted again by the next one.
   */
  answered?: () => void;
}

export interface SyncOutcome {
  /** Counts for the STATUS line and logs. */
  services: number;
  endpoints: number;
  /** Where the sync's time went (all families), for the sync log: planning, and the kernel's round trips. */
  planMs?: number;
  kernelMs?: number;
}

export interface SyncLoopOptions {
  mode: ProxyMode;
  syncPeriodMs: number;
  minSyncPeriodMs: number;
  /** The longest time between full syncs; default FULL_SYNC_PERIOD_MS (an hour). */
  fullSyncPeriodMs?: number;
  /** Every periodic run is full (IPVS: its virtual servers and ipsets are never announced). */
  periodicFull?: boolean;
  /** Told after every successful sync (the daemon's heap release watches them). */
  onSynced?: (done: { full: boolean; ms: number }) => void;
  /** First retry after a failed sync; default max(minSyncPeriod, 1 s), doubling up to syncPeriod. */
  retryIntervalMs?: number;
  /** The IP families the proxier programs. */
  families: readonly IPFamily[];
  sync: (req: SyncRequest) => Promise<SyncOutcome>;
  clock: Clock;
  health: ProxyHealth;
  notifier: Notifier;
  metrics?: ProxyMetrics;
  logger?: Logger;
}

export class SyncLoop {
  private readonly opts: SyncLoopOptions;
  private readonly log: Logger;
  private readonly runner: BoundedFrequencyRunner;
  private readonly abort = new AbortController();
  private lastOk = false;
  private readyDone = false;
  private repairPending = false;
  /** When the last successful full sync ended. */
  private lastFullAt = -Infinity;
  private readonly fullSyncPeriodMs: number;
  private runStartedAt: number | undefined;
  /** afterNextSync's callbacks: waiting for a sync to start, and waiting for the running one to succeed. */
  private afterWaiting: (() => void)[] = [];
  private afterRunning: (() => void)[] = [];
  private resolveReady!: () => void;
  /** Resolves after the first successful full sync (when READY=1 is sent). */
  readonly ready: Promise<void>;

  constructor(opts: SyncLoopOptions) {
    this.opts = opts;
    this.log = opts.logger ?? nullLogger;
    this.fullSyncPeriodMs = opts.fullSyncPeriodMs ?? FULL_SYNC_PERIOD_MS;
    this.ready = new Promise((resolve) => (this.resolveReady = resolve));
    this.runner = new BoundedFrequencyRunner((info) => this.runOnce(info), {
      name: `${opts.mode}-sync`,
      minIntervalMs: opts.minSyncPeriodMs,
      maxIntervalMs: opts.syncPeriodMs,
      burstRuns: BURST_SYNCS,
      ...(opts.retryIntervalMs !== undefined ? { retryIntervalMs: opts.retryIntervalMs } : {}),
      clock: opts.clock,
      logger: this.log,
    });
  }

  /** Starts syncing once `sourcesSynced` resolves (the sources have listed everything). */
  start(sourcesSynced: Promise<void>): void {
    this.opts.notifier.status(`${this.opts.mode}: waiting for Services and EndpointSlices to be listed`);
    sourcesSynced.then(
      () => {
        if (this.abort.signal.aborted) return;
        this.log.info('Sources synced; starting the first full sync', { mode: this.opts.mode });
        this.runner.start();
        this.runner.run();
      },
      (err: unknown) => {
        if (!this.abort.signal.aborted)
          this.log.error('Sources never synced; not syncing', { op: 'wait for sources', err });
      },
    );
  }

  /** A Service/EndpointSlice/Node change needing a sync arrived. Non-blocking; changes coalesce. */
  changed(): void {
    const now = this.opts.clock.now();
    for (const family of this.opts.families) {
      this.opts.health.queuedUpdate(family);
      this.opts.metrics?.syncProxyRulesLastQueuedTimestamp.set({ ip_family: family }, now / 1000);
    }
    this.runner.run();
  }

  /**
   * Our kernel objects were changed behind our back (proxier/drift/): a full sync as soon as
   * the minimum interval allows. Before the first sync there is nothing to repair.
   */
  repair(why: string): void {
    if (!this.readyDone || this.abort.signal.aborted) return;
    if (!this.repairPending) this.log.info('Repair sync requested', { mode: this.opts.mode, why });
    this.repairPending = true;
    this.runner.run();
  }

  /**
   * Runs `fn` once a sync that starts after this call has succeeded (so it has applied every
   * change delivered before the call); a failed sync passes it on to the next.
   */
  afterNextSync(fn: () => void): void {
    this.afterWaiting.push(fn);
  }

  /** True while a sync runs. */
  isSyncing(): boolean {
    return this.runStartedAt !== undefined;
  }

  /** The watchdog's predicate: no change has waited longer than the health timeout (2 x syncPeriod). */
  healthy(): boolean {
    return this.opts.health.isHealthy();
  }

  /** STOPPING=1, abort a sync in progress, wait for it, stop timers. Leaves the rules in place. */
  async stop(): Promise<void> {
    this.opts.notifier.stopping();
    this.opts.notifier.stopWatchdog();
    this.abort.abort();
    await this.runner.stop();
  }

  /** Whether this run rebuilds everything (as upstream's needFullSync || FullSyncPeriod elapsed). */
  private wantsFull(reason: RunReason, now: number): boolean {
    if (!this.readyDone || !this.lastOk || this.repairPending || reason === 'retry') return true;
    if (reason === 'periodic' && this.opts.periodicFull === true) return true;
    return now - this.lastFullAt >= this.fullSyncPeriodMs;
  }

  private async runOnce(info: RunInfo): Promise<void> {
    const full = this.wantsFull(info.reason, this.opts.clock.now());
    // The full sync the period asks for, in a run a change kicked: that change goes in first,
    // as a partial sync. The full sync would write it in its turn and count it applied at its
    // end (1.8 s at 10,000 Services x 10: every such change waited that long), and it takes
    // only changes that arrive after it has begun.
    if (full && info.reason === 'kick' && this.fullOnlyForPeriod()) await this.syncOnce(false, info);
    await this.syncOnce(full, info);
  }

  /** The last sync succeeded and nothing but the full-sync period asks for a full one. */
  private fullOnlyForPeriod(): boolean {
    return this.readyDone && this.lastOk && !this.repairPending && this.opts.periodicFull !== true;
  }

  private async syncOnce(full: boolean, info: RunInfo): Promise<void> {
    const { clock, metrics, health, notifier, mode, families } = this.opts;
    const start = clock.now();
    if (full) this.repairPending = false;
    this.runStartedAt = start;
    this.afterRunning.push(...this.afterWaiting.splice(0));
    let outcome: SyncOutcome;
    try {
      outcome = await this.opts.sync({
        full,
        reason: info.reason,
        signal: this.abort.signal,
        // A repair asked for meanwhile is no change the sync took: its run stays due.
        answered: () => {
          if (!this.repairPending) this.runner.answered();
        },
      });
    } catch (err) {
      this.afterWaiting.unshift(...this.afterRunning.splice(0));
      this.lastOk = false;
      metrics?.syncFailuresTotal.inc({ mode });
      if (metrics) MODES[mode].metrics.loopFailed?.(metrics, families);
      throw err; // the runner logs it and schedules the retry
    } finally {
      this.runStartedAt = undefined;
    }
    const end = clock.now();
    const seconds = (end - start) / 1000;
    this.lastOk = true;
    // From its end, as upstream: a full sync longer than the period is not followed by another.
    if (full) this.lastFullAt = end;
    for (const family of families) {
      metrics?.syncProxyRulesDuration.observe({ ip_family: family }, seconds);
      (full ? metrics?.syncFullProxyRulesDuration : metrics?.syncPartialProxyRulesDuration)?.observe(
        { ip_family: family },
        seconds,
      );
      metrics?.syncProxyRulesLastTimestamp.set({ ip_family: family }, end / 1000);
      health.updated(family);
    }
    this.log.debug('Synced proxy rules', {
      mode,
      full,
      reason: info.reason,
      services: outcome.services,
      endpoints: outcome.endpoints,
      ms: end - start,
      ...(outcome.planMs !== undefined ? { planMs: Math.round(outcome.planMs) } : {}),
      ...(outcome.kernelMs !== undefined ? { kernelMs: Math.round(outcome.kernelMs) } : {}),
      waitedMs: info.waitedMs,
    });
    notifier.status(
      `${mode}: ${outcome.services} services, ${outcome.endpoints} endpoints, last sync ${new Date(end).toISOString()} (${full ? 'full' : 'partial'})`,
    );
    this.opts.onSynced?.({ full, ms: end - start });
    if (!this.readyDone && full) {
      this.readyDone = true;
      notifier.ready();
      notifier.startWatchdog(() => this.healthy());
      this.log.info('First full sync done; ready', { mode, services: outcome.services, endpoints: outcome.endpoints });
      this.resolveReady();
    }
    for (const fn of this.afterRunning.splice(0)) fn();
  }
}
