// Per service port counters, plain numbers bumped in place: nothing is allocated per packet or
// per connection to count.

import type { Logger, LogFields } from '../../../base/logger.ts';
import type { Clock } from '../../../base/clock.ts';

export interface PortCounters {
  /** TCP connections accepted; for UDP, client associations opened. */
  accepted: number;
  /** A connect to an endpoint failed and the next one was tried. */
  failedOver: number;
  /** No endpoint, or every attempt failed: the client was reset/refused. */
  refused: number;
  /** Refused at once because the daemon's descriptor budget was spent (descriptor-budget.ts). */
  overBudget: number;
  bytesIn: number;
  bytesOut: number;
  active: number;
}

export const newCounters = (): PortCounters => ({
  accepted: 0,
  failedOver: 0,
  refused: 0,
  overBudget: 0,
  bytesIn: 0,
  bytesOut: 0,
  active: 0,
});

/**
 * Logs a recurring condition (EMFILE, every endpoint refusing) at most once per interval per key,
 * with how many were suppressed in between: a flood of connections must not become a flood of
 * log lines.
 */
export class RateLimitedLog {
  private readonly last = new Map<string, { at: number; suppressed: number }>();
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly intervalMs: number;

  constructor(logger: Logger, clock: Clock, intervalMs = 10_000) {
    this.logger = logger;
    this.clock = clock;
    this.intervalMs = intervalMs;
  }

  warn(key: string, msg: string, fields: LogFields = {}): void {
    const now = this.clock.now();
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.suppressed++;
      return;
    }
    this.logger.warn(msg, seen?.suppressed ? { ...fields, suppressed: seen.suppressed } : fields);
    this.last.set(key, { at: now, suppressed: 0 });
  }

  /** Forgets the keys of a closed port ("<name>/..."), so the map does not grow with churn. */
  forgetPrefix(prefix: string): void {
    for (const key of this.last.keys()) if (key.startsWith(prefix)) this.last.delete(key);
  }
}
