// Time is injected everywhere it matters (sync runner, health, graceful termination), so
// tests drive it with a fake clock instead of sleeping.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimer(ms: number, fn: () => void): TimerHandle;
}

/**
 * The longest delay a Node.js timer takes: 2^31-1 ms (24.8 days, 596h31m23.647s). Node turns
 * a longer one (or a negative or NaN one) into 1 ms, so a long period would fire at once,
 * again and again. Configured durations are held to it on input (config/duration.ts).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The delay a timer is armed with: within [0, MAX_TIMER_MS], so a delay out of range fires
 * late (after 24.8 days, when asked for more) or at once (negative, NaN), never in a loop.
 */
export function timerDelay(ms: number): number {
  if (!(ms > 0)) return 0;
  return Math.min(ms, MAX_TIMER_MS);
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, timerDelay(ms));
    return { cancel: () => clearTimeout(t) };
  },
};

/** A clock that moves only when told to; timers fire in due order during advance(). */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): TimerHandle {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + timerDelay(ms), fn }); // as systemClock arms it
    return { cancel: () => this.timers.delete(id) };
  }

  /** Number of timers still pending. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward by ms, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let nextId: number | undefined;
      let nextAt = Infinity;
      for (const [id, timer] of this.timers) {
        if (timer.at <= end && (timer.at < nextAt || (timer.at === nextAt && id < (nextId ?? Infinity)))) {
          nextAt = timer.at;
          nextId = id;
        }
      }
      if (nextId === undefined) break;
      const timer = this.timers.get(nextId)!;
      this.timers.delete(nextId);
      this.t = Math.max(this.t, timer.at);
      timer.fn();
    }
    this.t = end;
  }
}
