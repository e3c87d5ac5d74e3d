// Decides *when* the proxier syncs, like upstream's pkg/proxy/runner BoundedFrequencyRunner:
//
//   - run() is a non-blocking, coalescing kick: any number of kicks before the next run
//     become one run.
//   - minInterval and burstRuns: runs pass a token bucket as upstream's (qps 1/minInterval,
//     burst burstRuns; the proxiers use 2, upstream's burstSyncs): a token comes back every
//     minInterval, at most burstRuns are kept, a run takes one. Bursts of changes coalesce
//     into one run while the bucket is empty, and after a quiet gap a run starts at once.
//     With burst 1 a run starts no sooner than minInterval after the previous one *started*,
//     so changes arriving once a second with a 1 s minimum start a run at max(arrival,
//     previous start + 1 s): one late arrival delays every later run by as much and the lag
//     never shrinks. The second token absorbs such lateness. (Measured from the end instead,
//     every run would push the next one later by its own length.)
//   - maxInterval: a run happens at least every maxInterval even without kicks (the
//     periodic sync; the daemon decides whether it is full, sync-loop.ts).
//   - after a failed run, another follows after retryInterval, doubling on each further
//     consecutive failure up to maxRetryInterval (upstream retries at a fixed interval;
//     the backoff keeps a broken kernel or API from being hammered). A success resets it.
//   - runs never overlap: fn is awaited, and kicks during a run queue one more run.
//
// Time comes from an injected Clock. Nothing runs until start(); then nothing runs until
// the first kick or maxInterval, so the daemon kicks once its sources have listed everything.

import type { Clock, TimerHandle } from '../base/clock.ts';
import { nullLogger, type Logger } from '../base/logger.ts';

/** Why a run happened: the daemon makes 'retry' runs (and some 'periodic' ones) full syncs. */
export type RunReason = 'kick' | 'periodic' | 'retry';

export interface RunInfo {
  reason: RunReason;
  /** Failures in a row before this run (0 after a success). */
  consecutiveFailures: number;
  /** How long the oldest kick this run answers waited for it to start (0 without a kick). */
  waitedMs: number;
}

export interface RunnerOptions {
  name: string;
  minIntervalMs: number;
  maxIntervalMs: number;
  /** First retry delay after a failure; default min(maxIntervalMs, max(minIntervalMs, 1s)). */
  retryIntervalMs?: number;
  /** Cap of the doubling retry delay; default maxIntervalMs. */
  maxRetryIntervalMs?: number;
  /** Runs the token bucket keeps for after a quiet gap (upstream's burstRuns); default 1. */
  burstRuns?: number;
  clock: Clock;
  logger?: Logger;
}

export class BoundedFrequencyRunner {
  readonly name: string;
  private readonly fn: (info: RunInfo) => Promise<void> | void;
  private readonly minMs: number;
  private readonly maxMs: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly burst: number;
  private readonly clock: Clock;
  private readonly log: Logger;

  private started = false;
  private stopped = false;
  private kicked = false;
  /** When the oldest kick not yet answered by a run arrived. */
  private kickedAt: number | undefined;
  private retryDue = false;
  private failures = 0;
  /** The token bucket: `tokens` as counted at `tokensAt` (refilled lazily, see tokensAt()). */
  private tokens = 0;
  private tokensAt = 0;
  /** When the current maxInterval period ends (reset after every run). */
  private periodicAt = 0;
  /** When a pending retry falls due. */
  private retryAt = 0;
  private timer: TimerHandle | undefined;
  private inFlight: Promise<void> | undefined;
  private runs = 0;

  constructor(fn: (info: RunInfo) => Promise<void> | void, opts: RunnerOptions) {
    const { name, minIntervalMs, maxIntervalMs } = opts;
    for (const [k, v] of [
      ['minIntervalMs', minIntervalMs],
      ['maxIntervalMs', maxIntervalMs],
    ] as const) {
      if (!Number.isFinite(v) || v < 0) throw new RangeError(`${name}: ${k} (${v}) must be a finite number >= 0`);
    }
    // Upstream panics here: a misconfiguration should fail at start, not at 3 a.m.
    if (maxIntervalMs < minIntervalMs) {
      throw new RangeError(`${name}: maxInterval (${maxIntervalMs}ms) must be >= minInterval (${minIntervalMs}ms)`);
    }
    if (maxIntervalMs === 0) throw new RangeError(`${name}: maxInterval must be greater than 0`);
    this.name = name;
    this.fn = fn;
    this.minMs = minIntervalMs;
    this.maxMs = maxIntervalMs;
    this.retryMs = opts.retryIntervalMs ?? Math.min(maxIntervalMs, Math.max(minIntervalMs, 1000));
    this.maxRetryMs = Math.max(this.retryMs, opts.maxRetryIntervalMs ?? maxIntervalMs);
    this.burst = opts.burstRuns ?? 1;
    if (!Number.isInteger(this.burst) || this.burst < 1) {
      throw new RangeError(`${name}: burstRuns (${this.burst}) must be an integer >= 1`);
    }
    this.tokens = this.burst;
    if (!(this.retryMs > 0)) throw new RangeError(`${name}: retryInterval (${this.retryMs}ms) must be greater than 0`);
    this.clock = opts.clock;
    this.log = opts.logger ?? nullLogger;
  }

  /** Starts the periodic timer. Idempotent. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.periodicAt = this.clock.now() + this.maxMs;
    this.schedule();
  }

  /** Asks for a run as soon as minInterval allows. Never blocks; kicks coalesce. */
  run(): void {
    if (this.stopped) return;
    this.kicked = true;
    this.kickedAt ??= this.clock.now();
    if (this.started && this.inFlight === undefined) this.schedule();
  }

  /**
   * The kicks so far were answered by the run in progress (it took what they asked for while it
   * ran): no run is due for them, and a later kick's wait is counted from that kick.
   */
  answered(): void {
    this.kicked = false;
    this.kickedAt = undefined;
  }

  /** Stops timers and waits for a run in progress to finish. No run starts afterwards. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    await this.inFlight;
  }

  /** Resolves when no run is in progress (for tests and shutdown). */
  async idle(): Promise<void> {
    while (this.inFlight !== undefined) await this.inFlight;
  }

  get isRunning(): boolean {
    return this.inFlight !== undefined;
  }

  /** Completed runs so far. */
  get runCount(): number {
    return this.runs;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  private schedule(): void {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.stopped || !this.started || this.inFlight !== undefined) return;
    const now = this.clock.now();
    const earliest = this.tokenDueAt(now);
    let at = this.periodicAt;
    if (this.kicked) at = Math.min(at, earliest);
    if (this.retryDue) at = Math.min(at, this.retryAt);
    at = Math.max(at, earliest);
    this.timer = this.clock.setTimer(Math.max(0, at - now), () => this.fire());
  }

  private fire(): void {
    this.timer = undefined;
    if (this.stopped || this.inFlight !== undefined) return;
    const now = this.clock.now();
    const reason: RunReason = this.kicked ? 'kick' : this.retryDue && now >= this.retryAt ? 'retry' : 'periodic';
    const waitedMs = this.kicked && this.kickedAt !== undefined ? now - this.kickedAt : 0;
    this.kicked = false;
    this.kickedAt = undefined;
    this.takeToken(now);
    const info: RunInfo = { reason, consecutiveFailures: this.failures, waitedMs };
    let result: Promise<void> | void;
    try {
      result = this.fn(info);
    } catch (err) {
      this.finish(info, false, err);
      this.schedule();
      return;
    }
    if (result === undefined || typeof (result as Promise<void>).then !== 'function') {
      // A synchronous fn finishes now (at the same clock time it started).
      this.finish(info, true, undefined);
      this.schedule();
      return;
    }
    this.inFlight = Promise.resolve(result)
      .then(
        () => this.finish(info, true, undefined),
        (err: unknown) => this.finish(info, false, err),
      )
      .finally(() => {
        this.inFlight = undefined;
        this.schedule();
      });
  }

  private finish(info: RunInfo, ok: boolean, err: unknown): void {
    if (ok) {
      this.failures = 0;
      this.retryDue = false;
    } else {
      this.failures++;
      const delay = Math.min(this.maxRetryMs, this.retryMs * 2 ** Math.min(30, this.failures - 1));
      this.log.error('Sync failed; will retry', {
        runner: this.name,
        reason: info.reason,
        failures: this.failures,
        retryInMs: delay,
        err,
      });
      this.retryDue = true;
      this.retryAt = this.clock.now() + delay;
    }
    this.runs++;
    this.periodicAt = this.clock.now() + this.maxMs;
  }

  /** The bucket's tokens at `now` (>= the last time counted): one more every minInterval, at most burst. */
  private tokensAtTime(now: number): number {
    if (this.minMs === 0) return this.burst;
    return Math.min(this.burst, this.tokens + (now - this.tokensAt) / this.minMs);
  }

  /** When the bucket next holds a whole token (now if it does). */
  private tokenDueAt(now: number): number {
    const have = this.tokensAtTime(now);
    return have >= 1 ? now : now + (1 - have) * this.minMs;
  }

  /**
   * A run starts: it takes a token. The timer fires when one is due, so the count only dips
   * below 0 by a timer's rounding, which the next refill absorbs.
   */
  private takeToken(now: number): void {
    this.tokens = this.tokensAtTime(now) - 1;
    this.tokensAt = now;
  }
}
