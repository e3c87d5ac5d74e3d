// One resource's list+watch loop (client-go's Reflector and the store of its informer).
//
//   list (paged) ──reconcile store──> watch from the list's resourceVersion ──events──> store
//        ^                                   │ ends (timeoutSeconds, idle, cut, error)
//        │ 410 Gone / ERROR 410              │
//        └───────────────────────────────────┴──> backoff (exponential, jitter, bounded)
//                                                  then watch again from the last
//                                                  resourceVersion seen (event or bookmark)
//
// A 410 relists at once the first time; 410s that keep coming (a storm: a confused server or
// proxy) back off between relists like any other failure, however healthy each watch looked
// before its 410, until none has come for GONE_QUIET_MS.
//
// A 504 "Too large resource version" (the server is behind us) backs off and relists.
//
// The store is what the handler has been told. A relist is reconciled against it, so an
// object deleted while we were away is delivered as a delete, an object changed as an
// update, and an unchanged one (same resourceVersion) not at all. A periodic resync
// re-delivers every stored object as an update with prev === cur, as upstream's informer
// resync does. Every wait goes through the injected Clock and every request through an
// AbortSignal, so stop() ends the loop promptly wherever it is.

import type { Clock, TimerHandle } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { Converted } from './convert.ts';
import type { KubeApi, Query, WatchEvent } from './kube-api.ts';
import { DeadlineError, isGone, isNotFound, isTooLargeResourceVersion, statusError } from './kube-api.ts';
import type { RejectCounter } from './types.ts';

export interface BackoffOptions {
  /** First retry delay. */
  initialMs: number;
  /** Upper bound of any delay, jitter included. */
  maxMs: number;
  factor: number;
  /** 0..1: each delay is stretched by up to this fraction, at random. */
  jitter: number;
}

/** client-go's reflector defaults: 800 ms doubling up to 30 s, with jitter. */
export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 800, maxMs: 30_000, factor: 2, jitter: 0.5 };

/** The delay before retry number `attempt` (0-based). Pure; exported for tests. */
export function backoffDelay(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const base = opts.initialMs * Math.pow(opts.factor, Math.min(attempt, 64));
  const jittered = Math.min(base, opts.maxMs) * (1 + opts.jitter * random());
  return Math.max(0, Math.min(opts.maxMs, Math.round(jittered)));
}

/** Resolves after ms on the clock, or as soon as the signal aborts. Never rejects. */
export function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      timer.cancel();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimer(ms, done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * A watch that brought nothing, not even a bookmark, for this long is presumed hung (the
 * connection open, the server or a middlebox silent) and re-established from its last
 * resourceVersion. kube-apiserver's watch cache sends a bookmark about every minute to a watch
 * that allows them; client-go notices a dead HTTP/2 connection by its pings within about 45 s,
 * which HTTP/1.1 does not have. A server that sends no periodic bookmarks costs one cheap
 * re-watch (no relist) per quiet watch per period.
 */
const WATCH_IDLE_MS = 90_000;

/**
 * 410s this far apart are separate events (an etcd compaction every 5 minutes), each relisted
 * at once; closer ones are a storm and back off. Upstream's reflector resets its back-off after
 * 2 minutes without a failure.
 */
const GONE_QUIET_MS = 120_000;

/** An AbortSignal that aborts after ms on the clock (AbortSignal.timeout ignores our Clock). */
function clockTimeout(
  clock: Clock,
  ms: number,
  reason: string,
): { signal: AbortSignal; cancel(): void; reset(): void } {
  const ctrl = new AbortController();
  let timer: TimerHandle | undefined;
  const arm = () => {
    timer?.cancel();
    timer = clock.setTimer(ms, () => ctrl.abort(new TimeoutError(reason)));
  };
  arm();
  return { signal: ctrl.signal, cancel: () => timer?.cancel(), reset: arm };
}

export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

export interface ReflectorEvents<T> {
  add(key: string, obj: T): void;
  update(key: string, prev: T, cur: T): void;
  delete(key: string, prev: T): void;
  /** The first list has been delivered (or, for an optional resource, found absent). */
  synced(): void;
}

export interface ReflectorOptions<T> {
  /** Kind, for logs and rejects. */
  kind: string;
  api: KubeApi;
  /** Collection path, e.g. /api/v1/services. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  convert: (raw: unknown) => Converted<T>;
  /** Client-side guard mirroring the selectors; an object that fails it is treated as absent. */
  accept?: (obj: T) => boolean;
  onReject?: RejectCounter;
  clock: Clock;
  logger: Logger;
  backoff?: Partial<BackoffOptions>;
  /** Re-deliver the whole store this often (upstream configSyncPeriod); 0 disables. */
  resyncPeriodMs?: number;
  /** Watches ask the server to end them after [min, 2*min) seconds, as client-go does. Default 300. */
  minWatchTimeoutSeconds?: number;
  /** A watch with no event for this long is abandoned and reopened. Default: 90 s (WATCH_IDLE_MS). */
  watchIdleTimeoutMs?: number;
  /** Each list page must answer within this. Default 60 s. */
  listTimeoutMs?: number;
  /** Page size of lists (limit/continue). Default 500. */
  listPageSize?: number;
  /** A watch that delivered nothing and ended sooner than this counts as a failure. Default 1 s. */
  minHealthyWatchMs?: number;
  /**
   * The API may not be served (404), e.g. networking.k8s.io/v1 ServiceCIDRs on an older
   * server: then the kind counts as synced and empty, and the reflector retries at the
   * maximum backoff, quietly, in case the server gains it.
   */
  optional?: boolean;
  random?: () => number;
}

interface ListMetaLike {
  resourceVersion?: unknown;
  continue?: unknown;
}

interface ListPage {
  items: unknown[];
  resourceVersion: string;
  continue: string;
}

function resourceVersionOf(obj: unknown): string | undefined {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const meta = (obj as { metadata?: ListMetaLike }).metadata;
  return typeof meta?.resourceVersion === 'string' && meta.resourceVersion !== '' ? meta.resourceVersion : undefined;
}

export class Reflector<T extends { metadata?: { resourceVersion?: string } }> {
  private readonly o: ReflectorOptions<T>;
  private readonly backoff: BackoffOptions;
  private readonly log: Logger;
  private store = new Map<string, T>();
  private lastRv = '';
  private isSynced = false;
  private events: ReflectorEvents<T> | undefined;
  private resyncTimer: TimerHandle | undefined;

  constructor(opts: ReflectorOptions<T>) {
    this.o = opts;
    this.backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
    this.log = opts.logger.child({ kind: opts.kind, path: opts.path });
  }

  get synced(): boolean {
    return this.isSynced;
  }

  /** The last resourceVersion seen (list, event or bookmark). */
  get resourceVersion(): string {
    return this.lastRv;
  }

  /** A copy of what the handler currently holds. */
  snapshot(): Map<string, T> {
    return new Map(this.store);
  }

  /** Runs until the signal aborts. Never rejects. */
  async run(events: ReflectorEvents<T>, signal: AbortSignal): Promise<void> {
    this.events = guarded(events, this.log);
    this.scheduleResync(signal);
    let attempt = 0;
    let needList = true;
    // 410s in a row: counted on the clock, not reset by a watch that looked healthy, as a server
    // may send events or a bookmark (or take its time) before every 410.
    let gone = 0;
    let lastGoneAt = -Infinity;
    let absent = false;
    try {
      while (!signal.aborted) {
        try {
          if (needList) {
            await this.list(signal);
            needList = false;
            if (absent) this.log.info('API is now served');
            absent = false;
          }
          const w = await this.watchOnce(signal);
          // A watch that ran well and then ended or broke starts the backoff over.
          if (w.healthy) attempt = 0;
          if (w.error !== undefined) throw w.error;
          if (w.healthy) continue;
          throw new Error(`watch ended after ${w.ms} ms without an event`);
        } catch (err) {
          if (signal.aborted) break;
          if (isGone(err)) {
            // Our resourceVersion was compacted away: list again, now, and reconcile.
            // Another 410 soon after (a storm) waits, growing, like any other failure.
            needList = true;
            const now = this.o.clock.now();
            gone = now - lastGoneAt > GONE_QUIET_MS ? 1 : gone + 1;
            lastGoneAt = now;
            if (gone === 1) {
              this.log.info('resourceVersion too old, relisting', {
                resourceVersion: this.lastRv,
                error: describe(err),
              });
              continue;
            }
            await this.retryAfter(err, gone - 2, gone - 1, false, signal);
            continue;
          } else if (isTooLargeResourceVersion(err)) {
            // The server is behind us. Usually a lagging cache that catches up in seconds:
            // back off as usual, and relist (consistently) in case it never does.
            needList = true;
          } else if (this.o.optional && isNotFound(err)) {
            if (!absent) this.log.info('API not served by this server; carrying on without it');
            absent = true;
            needList = true;
            // Whatever it held before (a server downgraded under us) is gone with it.
            if (this.store.size > 0) this.replaceStore(new Map());
            this.lastRv = '';
            this.markSynced();
            await sleep(this.o.clock, this.backoff.maxMs, signal);
            continue;
          }
          // A request that hit its deadline already waited it out: the server sees one request
          // per deadline, and retrying soon keeps convergence within seconds of its recovery.
          const hung = err instanceof DeadlineError || err instanceof TimeoutError;
          if (!hung) attempt++;
          await this.retryAfter(err, hung ? 0 : attempt - 1, attempt, !needList, signal);
        }
      }
    } finally {
      this.resyncTimer?.cancel();
      this.resyncTimer = undefined;
    }
  }

  /** Logs a failure (one line per retry) and waits out back-off step `step`. */
  private async retryAfter(
    err: unknown,
    step: number,
    attempt: number,
    resume: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    const delay = backoffDelay(step, this.backoff, this.o.random);
    this.log.warn('list/watch failed; retrying', {
      error: describe(err),
      attempt,
      retryInMs: delay,
      then: resume ? `watch from ${this.lastRv}` : 'relist',
      server: this.o.api.server,
    });
    await sleep(this.o.clock, delay, signal);
  }

  private scheduleResync(signal: AbortSignal): void {
    const period = this.o.resyncPeriodMs ?? 0;
    if (period <= 0 || signal.aborted) return;
    this.resyncTimer = this.o.clock.setTimer(period, () => {
      if (signal.aborted) return;
      if (this.isSynced && this.events) {
        for (const [key, obj] of this.store) this.events.update(key, obj, obj);
      }
      this.scheduleResync(signal);
    });
  }

  private markSynced(): void {
    if (this.isSynced) return;
    this.isSynced = true;
    this.events?.synced();
  }

  private baseQuery(): Query {
    const q: Query = {};
    if (this.o.labelSelector) q['labelSelector'] = this.o.labelSelector;
    if (this.o.fieldSelector) q['fieldSelector'] = this.o.fieldSelector;
    return q;
  }

  private reject(key: string | undefined, reason: string): void {
    this.log.warn('skipping object', { object: key ?? '(unnamed)', reason });
    this.o.onReject?.({ kind: this.o.kind, key, reason, origin: this.o.path });
  }

  /**
   * A consistent (quorum) list, paged. Upstream's first list asks for resourceVersion=0 (the
   * watch cache, possibly stale) to spare the API server; we prefer never to program state
   * older than what we already had, and a node's few lists are cheap.
   */
  private async list(signal: AbortSignal): Promise<void> {
    // Each page is converted as it arrives and then dropped: only the compact objects of the
    // whole list are held until it is complete, never the pages' JSON. The next page is asked
    // for before this one is converted, so that the server builds it meanwhile.
    const next = new Map<string, T>();
    let rv = '';
    let pending: Promise<ListPage> | undefined = this.fetchPage('', signal);
    while (pending !== undefined) {
      const page: ListPage = await pending;
      rv = page.resourceVersion;
      pending = page.continue !== '' && !signal.aborted ? this.fetchPage(page.continue, signal) : undefined;
      // Awaited on the next turn; a failure while this page is converted is not unhandled.
      pending?.catch(() => {});
      for (const item of page.items) this.take(item, next);
    }
    signal.throwIfAborted();
    this.replaceStore(next);
    this.lastRv = rv;
    this.log.debug('listed', { count: this.store.size, resourceVersion: rv });
    this.markSynced();
  }

  /** One page of a list, within listTimeoutMs. */
  private async fetchPage(cont: string, signal: AbortSignal): Promise<ListPage> {
    const timeout = clockTimeout(this.o.clock, this.o.listTimeoutMs ?? 60_000, `list ${this.o.path} timed out`);
    let page: unknown;
    try {
      const q: Query = { ...this.baseQuery(), limit: String(this.o.listPageSize ?? 500) };
      if (cont) q['continue'] = cont;
      page = await this.o.api.get(this.o.path, q, AbortSignal.any([signal, timeout.signal]));
    } catch (err) {
      if (timeout.signal.aborted && !signal.aborted) throw timeout.signal.reason;
      throw err;
    } finally {
      timeout.cancel();
    }
    if (typeof page !== 'object' || page === null) throw new Error(`list ${this.o.path}: answer is not an object`);
    const p = page as { items?: unknown; metadata?: ListMetaLike };
    if (p.items !== undefined && p.items !== null && !Array.isArray(p.items)) {
      throw new Error(`list ${this.o.path}: items is not a list`);
    }
    return {
      items: (p.items as unknown[] | null | undefined) ?? [],
      resourceVersion: typeof p.metadata?.resourceVersion === 'string' ? p.metadata.resourceVersion : '',
      continue: typeof p.metadata?.continue === 'string' ? p.metadata.continue : '',
    };
  }

  /** One listed object into the next store. */
  private take(item: unknown, next: Map<string, T>): void {
    const c = this.o.convert(item);
    if (!c.ok) {
      this.reject(c.key, c.reason);
      // Keep what we had for it: a bad update never takes away a good object.
      const had = c.key !== undefined ? this.store.get(c.key) : undefined;
      if (c.key !== undefined && had !== undefined) next.set(c.key, had);
      return;
    }
    if (this.o.accept && !this.o.accept(c.obj)) return;
    if (next.has(c.key)) {
      this.reject(c.key, 'listed twice');
      return;
    }
    next.set(c.key, c.obj);
  }

  /** A relist's result becomes the store; the handler hears the difference. */
  private replaceStore(next: Map<string, T>): void {
    const events = this.events!;
    const prev = this.store;
    this.store = next;
    for (const [key, old] of prev) if (!next.has(key)) events.delete(key, old);
    for (const [key, obj] of next) {
      const old = prev.get(key);
      if (old === undefined) events.add(key, obj);
      else if (old !== obj && !sameVersion(old, obj)) events.update(key, old, obj);
    }
  }

  private apply(e: WatchEvent): void {
    const events = this.events!;
    switch (e.type) {
      case 'ERROR':
        throw statusError(this.o.path, 0, e.object);
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED': {
        const c = this.o.convert(e.object);
        if (!c.ok) {
          this.reject(c.key, c.reason);
          break;
        }
        const old = this.store.get(c.key);
        if (this.o.accept && !this.o.accept(c.obj)) {
          // It left our selection (e.g. gained service.kubernetes.io/service-proxy-name).
          if (old !== undefined) {
            this.store.delete(c.key);
            events.delete(c.key, old);
          }
          break;
        }
        this.store.set(c.key, c.obj);
        if (old === undefined) events.add(c.key, c.obj);
        else if (!sameVersion(old, c.obj)) events.update(c.key, old, c.obj);
        break;
      }
      case 'DELETED': {
        const c = this.o.convert(e.object);
        if (c.key === undefined) {
          this.reject(undefined, c.ok ? 'no name' : c.reason);
          break;
        }
        const old = this.store.get(c.key);
        if (old !== undefined) {
          this.store.delete(c.key);
          events.delete(c.key, old);
        }
        break;
      }
    }
    const rv = resourceVersionOf(e.object);
    if (rv !== undefined) this.lastRv = rv;
  }

  /** One watch. Rejects only when the signal aborts; other failures come back as `error`. */
  private async watchOnce(signal: AbortSignal): Promise<{ healthy: boolean; ms: number; error?: unknown }> {
    const min = this.o.minWatchTimeoutSeconds ?? 300;
    const random = this.o.random ?? Math.random;
    const timeoutSeconds = Math.floor(min * (1 + random()));
    const idleMs = this.o.watchIdleTimeoutMs ?? Math.min(timeoutSeconds * 1000 + 30_000, WATCH_IDLE_MS);
    const idle = clockTimeout(this.o.clock, idleMs, `watch ${this.o.path} idle for ${idleMs} ms`);
    const started = this.o.clock.now();
    let count = 0;
    const q: Query = {
      ...this.baseQuery(),
      resourceVersion: this.lastRv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(timeoutSeconds),
    };
    const ws = AbortSignal.any([signal, idle.signal]);
    const minHealthy = this.o.minHealthyWatchMs ?? 1000;
    const result = (error?: unknown) => {
      const ms = this.o.clock.now() - started;
      const healthy = count > 0 || ms >= minHealthy;
      return error === undefined ? { healthy, ms } : { healthy, ms, error };
    };
    try {
      await this.o.api.watch(this.o.path, q, ws, (e) => {
        if (ws.aborted) return;
        idle.reset();
        // An ERROR event is not progress: a server answering every watch with one must back off.
        if (e.type !== 'ERROR') count++;
        this.apply(e);
      });
      return result();
    } catch (err) {
      if (signal.aborted) throw err;
      if (idle.signal.aborted) {
        // Nothing arrived for a whole watch period: the connection is presumed dead.
        this.log.info('watch idle; reopening', { idleMs });
        return result();
      }
      return result(err);
    } finally {
      idle.cancel();
    }
  }
}

/**
 * A handler that throws is a bug in the handler, not in the stream: it is logged, and the
 * store (what the handler was told) moves on, so one bad object cannot wedge the loop.
 */
function guarded<T>(events: ReflectorEvents<T>, log: Logger): ReflectorEvents<T> {
  const call = (what: string, key: string | undefined, fn: () => void) => {
    try {
      fn();
    } catch (err) {
      log.error('event handler failed', { event: what, object: key, error: describe(err) });
    }
  };
  return {
    add: (key, obj) => call('add', key, () => events.add(key, obj)),
    update: (key, prev, cur) => call('update', key, () => events.update(key, prev, cur)),
    delete: (key, prev) => call('delete', key, () => events.delete(key, prev)),
    synced: () => call('synced', undefined, () => events.synced()),
  };
}

function sameVersion(
  a: { metadata?: { resourceVersion?: string } },
  b: { metadata?: { resourceVersion?: string } },
): boolean {
  const ra = a.metadata?.resourceVersion;
  return ra !== undefined && ra !== '' && ra === b.metadata?.resourceVersion;
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${describe(err.cause)}` : '';
  const code = (err as { code?: unknown }).code;
  return `${err.message}${typeof code === 'string' ? ` (${code})` : ''}${cause}`;
}
