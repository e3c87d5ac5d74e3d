// What client-go's rest.Config does around every request, for our API client: the
// client-side rate limit (--kube-api-qps, --kube-api-burst: a token bucket that starts full,
// as flowcontrol.NewTokenBucketRateLimiter) and the request observations behind
// rest_client_requests_total / rest_client_request_duration_seconds (the daemon turns them
// into metrics; sources know nothing of Prometheus).

import type { Clock } from '../base/clock.ts';
import { ApiError } from './kube-api.ts';
import type { KubeApi, Query, WatchEvent } from './kube-api.ts';

export class TokenBucket {
  private readonly qps: number;
  private readonly burst: number;
  private readonly clock: Clock;
  private tokens: number;
  private last: number;

  /** qps <= 0 disables the limit (client-go: a negative QPS means no rate limiter). */
  constructor(opts: { qps: number; burst: number; clock: Clock }) {
    this.qps = opts.qps;
    this.burst = Math.max(1, opts.burst);
    this.clock = opts.clock;
    this.tokens = this.burst;
    this.last = opts.clock.now();
  }

  /** Takes one token, waiting for it when the bucket is empty; resolves with the time waited (ms). */
  acquire(signal: AbortSignal): Promise<number> {
    if (this.qps <= 0) return Promise.resolve(0);
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.qps) / 1000);
    this.last = now;
    this.tokens -= 1; // reserved now, so that waiters queue in order
    if (this.tokens >= 0) return Promise.resolve(0);
    const waitMs = Math.ceil((-this.tokens * 1000) / this.qps);
    return new Promise((resolve, reject) => {
      const timer = this.clock.setTimer(waitMs, () => {
        signal.removeEventListener('abort', onAbort);
        resolve(waitMs);
      });
      const onAbort = (): void => {
        timer.cancel();
        this.tokens += 1; // give the reservation back
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

export interface RequestObservation {
  /** HTTP method (client-go's "method" and "verb" labels). */
  method: string;
  /** host[:port] of the server. */
  host: string;
  /** The HTTP status, or "<error>" when there was no answer (client-go's label). */
  code: string;
  /** From the request's start (after the rate limiter) to its end. */
  durationMs: number;
  /** Time spent waiting for the rate limiter. */
  waitedMs: number;
  /** A watch: the duration is the stream's life, not a latency. */
  watch: boolean;
}

export interface ClientLimits {
  limiter?: TokenBucket;
  observe?: (o: RequestObservation) => void;
  clock: Clock;
}

const hostOf = (server: string): string => {
  try {
    return new URL(server).host;
  } catch {
    return server;
  }
};

const codeOf = (e: unknown): string => (e instanceof ApiError ? String(e.status) : '<error>');

/**
 * `api` with the rate limit applied before every request and every request observed. A list's
 * continuation pages (`continue`) are not limited again: the list was admitted with its first
 * page, and its pages go one at a time. Upstream's first list is one request (resourceVersion=0,
 * from the watch cache); ours is a consistent list in pages of 500, and a token per page made
 * the lists of a cold start wait on the limiter: 41 pages at 10,000 Services × 10 endpoints took
 * 7.5 s at the default --kube-api-qps 5 / --kube-api-burst 10 (the test server served them in 0.9 s).
 */
export function limitedApi(api: KubeApi, limits: ClientLimits): KubeApi {
  const { clock } = limits;
  const around = async <T>(watch: boolean, signal: AbortSignal, f: () => Promise<T>, admitted = false): Promise<T> => {
    const waitedMs = limits.limiter && !admitted ? await limits.limiter.acquire(signal) : 0;
    const t0 = clock.now();
    const done = (code: string): void =>
      limits.observe?.({
        method: 'GET',
        host: hostOf(api.server),
        code,
        durationMs: clock.now() - t0,
        waitedMs,
        watch,
      });
    try {
      const out = await f();
      done('200');
      return out;
    } catch (e) {
      done(codeOf(e));
      throw e;
    }
  };
  return {
    get server() {
      return api.server;
    },
    get: (path: string, query: Query, signal: AbortSignal) =>
      around(false, signal, () => api.get(path, query, signal), query['continue'] !== undefined),
    watch: (path: string, query: Query, signal: AbortSignal, onEvent: (e: WatchEvent) => void) =>
      around(true, signal, () => api.watch(path, query, signal, onEvent)),
  };
}
