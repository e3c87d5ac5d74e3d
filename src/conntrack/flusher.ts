// ConntrackFlusher: deletes the UDP/SCTP conntrack entries a committed sync made stale,
// in the background, bounded, and retried; and, after a restart, reconciles the table with
// the desired state instead (upstream issue 122740: a restart must not flush the entries of
// healthy Services; the first checkout has no stale targets by design).
//
//   schedule(targets, desired)   after each committed sync: returns at once; the work runs
//                                off the sync loop. Targets arriving while a run is in flight
//                                coalesce into the next run (equal targets merge).
//   reconcile(desired)           after the first committed sync of a (re)started daemon:
//                                deletes entries to frontends whose reply source is not a
//                                serving endpoint, nothing else (plan.ts).
//
// Each run: the filters a kernel-side flush deletes exactly (Linux 6.12+; plan.ts,
// kernelFlushable) go first, one request each, at most `maxKernelFlushes` per run (each walks
// the whole table); then one dump per family and protocol for the rest (kernel-filtered by
// what they share), a pure selection (plan.ts), and deletes in batches of `batchSize`, all
// under one time bound (AbortSignal + `timeoutMs`). On a kernel without filtered flushes
// (6.1) the first flush is refused before deleting anything, and from then on every filter
// takes the dump. What failed — a dump, a flush, a batch with errors, a batch not
// reached before the deadline — keeps its targets for the next schedule() (at most
// `maxAttempts` runs); entries already gone (ENOENT) are not failures. Every run reports
// its figures to the injected `counters` callback. Planning lives in plan.ts; this file
// does the I/O.
//
// Wiring (one flusher serves both families; targets and states carry theirs):
//   const flusher = ConntrackFlusher.open({ logger, counters });   // its own ctnetlink socket
//   after the first committed sync of each family:  flusher.reconcile(desired)
//   after every committed sync:                     flusher.schedule(change.stale, desired)
//   a sync that failed to commit:                   flusher.hold(change.stale)
//   shutdown:                                       await flusher.close()
// schedule() with no targets still retries what failed before. The guard and the reconcile
// read the desired state when the run starts; one newer than the rules (a sync in flight)
// errs towards keeping entries, or deletes one early that the old rules re-create and the
// next flush removes.

import { errorMessage } from '../base/errors.ts';
import type { IPFamily } from '../base/ip.ts';
import type { Clock } from '../base/clock.ts';
import { systemClock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { DesiredState, StaleTarget } from '../model/index.ts';
import { filterText, openConntrack, tupleText } from '../netlink/conntrack/index.ts';
import type { DeleteOptions, DeleteReport, Flow, FlowFilter, FlushResult } from '../netlink/conntrack/index.ts';
import type { ConnectionOptions, SocketOptions } from '../netlink/core/index.ts';
import type { DumpGroup, IndexOptions, PendingTarget, PlannedFilter, ServingIndex } from './plan.ts';
import {
  kernelFlushable,
  mergeTargets,
  planFlush,
  reconcileDumps,
  retainFailed,
  selectReconcile,
  selectStale,
  servingIndex,
  withoutFilters,
} from './plan.ts';

/** What the flusher needs of a ConntrackClient (which provides it). */
export interface FlusherClient {
  dump(filter: FlowFilter, opts?: { signal?: AbortSignal }): Promise<Flow[]>;
  deleteMany(targets: Iterable<Flow>, opts?: DeleteOptions): Promise<DeleteReport>;
  /** Whether flushMatching may act on this filter (the kernel matches it exactly and was not found unable). */
  canFlush?(filter: FlowFilter): boolean;
  /** One kernel-side flush of the filter's entries; undefined (nothing deleted) when the kernel cannot. */
  flushMatching?(filter: FlowFilter, opts?: { signal?: AbortSignal }): Promise<FlushResult | undefined>;
}

/** The figures of one run, for metrics. */
export interface FlushRunReport {
  readonly mode: 'flush' | 'reconcile';
  /** Families reconciled (reconcile runs). */
  readonly families: readonly IPFamily[];
  /** Targets handled in the run (flush runs). */
  readonly targets: number;
  /** Entries selected for deletion. */
  readonly matched: number;
  /** Entries the kernel removed (for kernel-side flushes, as the table's size shrank: see FlushResult). */
  readonly deleted: number;
  /** Entries already gone when deleted (expired or removed by someone else): not errors. */
  readonly notFound: number;
  /** Entries a filter matched but the guard kept (their reply source serves the frontend). */
  readonly kept: number;
  /** Failed dumps, flushes and deletes, and a time-out or abort (one each). */
  readonly errors: number;
  /** Kernel-side flush requests that deleted (flush runs; 0 on a kernel before 6.12). */
  readonly kernelFlushes: number;
  readonly durationMs: number;
  /** The run hit its time bound (or close()) before it was done. */
  readonly timedOut: boolean;
  /** Targets kept for the next schedule(). */
  readonly retained: number;
  /** Targets given up after maxAttempts runs. */
  readonly dropped: number;
}

export interface ConntrackFlusherOptions {
  client: FlusherClient;
  logger: Logger;
  /** Called after every run (metrics: deleted entries, errors, duration). Exceptions are logged, not thrown. */
  counters?: (report: FlushRunReport) => void;
  /** Time bound of one run, dumps and deletes included. Default 10 s. */
  timeoutMs?: number;
  /** Entries per deleteMany call. Default 4096. */
  batchSize?: number;
  /** Runs a target may fail before it is given up (logged). Default 10. */
  maxAttempts?: number;
  /** false: never flush by filter, always dump and delete. Default true (used where the kernel can). */
  kernelFlush?: boolean;
  /** Kernel-side flushes per run at most (each walks the whole table); beyond, filters take the dump. Default 16. */
  maxKernelFlushes?: number;
  /** Local addresses, for un-DNATed node-port entries when node ports answer on every address (see plan.ts). */
  isLocalAddress?: IndexOptions['isLocalAddress'];
  clock?: Clock;
  /** Closed by close() (ConntrackFlusher.open sets it). */
  onClose?: () => void;
}

export const DEFAULT_FLUSH_TIMEOUT_MS = 10_000;
export const DEFAULT_FLUSH_BATCH = 4096;
export const DEFAULT_MAX_ATTEMPTS = 10;
export const DEFAULT_MAX_KERNEL_FLUSHES = 16;

/** What one flush run has done so far (deleteBatches adds to deleted, notFound, errors). */
interface RunTotals {
  /** Keys of the targets to retry: a dump, flush or delete for them failed or was not reached. */
  readonly failedKeys: Set<string>;
  deleted: number;
  notFound: number;
  errors: number;
  matched: number;
  kernelFlushes: number;
  aborted: boolean;
}

class FlushTimeout extends Error {
  constructor(ms: number) {
    super(`conntrack flush did not finish within ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

export class ConntrackFlusher {
  private readonly client: FlusherClient;
  private readonly log: Logger;
  private readonly counters: ((r: FlushRunReport) => void) | undefined;
  private readonly timeoutMs: number;
  private readonly batchSize: number;
  private readonly maxAttempts: number;
  private readonly kernelFlush: boolean;
  private readonly maxKernelFlushes: number;
  private readonly clock: Clock;
  private readonly indexOpts: IndexOptions;
  private readonly onClose: (() => void) | undefined;

  /** Targets for the next run. */
  private pending = new Map<string, PendingTarget>();
  /** Targets a run failed, waiting for the next schedule(). */
  private failed = new Map<string, PendingTarget>();
  /** Families to reconcile in the next run. */
  private pendingReconcile = new Set<IPFamily>();
  /** Reconciles that failed, moved to pendingReconcile by the next schedule(). */
  private readonly pendingReconcileLater = new Set<IPFamily>();
  /** The latest desired state per family (the flush guard and reconcile read it at run time). */
  private readonly desired = new Map<IPFamily, DesiredState>();
  private running: Promise<void> | undefined;
  private readonly closing = new AbortController();
  private idleWaiters: (() => void)[] = [];

  constructor(o: ConntrackFlusherOptions) {
    this.client = o.client;
    this.log = o.logger.child({ component: 'conntrack-flusher' });
    this.counters = o.counters;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS;
    this.batchSize = o.batchSize ?? DEFAULT_FLUSH_BATCH;
    this.maxAttempts = o.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.kernelFlush = o.kernelFlush ?? true;
    this.maxKernelFlushes = Math.max(0, Math.floor(o.maxKernelFlushes ?? DEFAULT_MAX_KERNEL_FLUSHES));
    this.clock = o.clock ?? systemClock;
    this.indexOpts = o.isLocalAddress ? { isLocalAddress: o.isLocalAddress } : {};
    this.onClose = o.onClose;
  }

  /**
   * A flusher over its own ctnetlink socket in this process's namespace; close() closes it.
   * (Options of openConntrack: timeoutMs per exchange and so on.)
   */
  static open(
    o: Omit<ConntrackFlusherOptions, 'client' | 'onClose'> & { netlink?: ConnectionOptions & SocketOptions },
  ): ConntrackFlusher {
    const { netlink, ...rest } = o;
    const { client, conn } = openConntrack(netlink ?? {});
    return new ConntrackFlusher({ ...rest, client, onClose: () => conn.close() });
  }

  /**
   * Queues the stale targets of a committed sync and returns at once. `desired` (the state
   * that sync programmed) enables the guard of plan.ts; pass it. Failed targets of earlier
   * runs are retried with these.
   */
  schedule(targets: readonly StaleTarget[], desired?: DesiredState): void {
    if (this.closing.signal.aborted) return;
    if (desired) this.desired.set(desired.family, desired);
    mergeTargets(this.pending, this.failed.values());
    this.failed.clear();
    for (const f of this.pendingReconcileLater) this.pendingReconcile.add(f);
    this.pendingReconcileLater.clear();
    mergeTargets(this.pending, targets);
    this.kick();
  }

  /**
   * Queues targets of a sync that did not commit: they run with the next schedule(), not
   * before (deleting an entry before the new rules are in would let the old ones re-create it).
   */
  hold(targets: readonly StaleTarget[]): void {
    if (this.closing.signal.aborted) return;
    mergeTargets(this.failed, targets);
  }

  /**
   * Queues a reconcile of desired.family against the conntrack table (after a restart) and
   * returns at once. Only entries to frontends whose reply source is not a serving endpoint
   * go; a failed reconcile is retried at the next schedule().
   */
  reconcile(desired: DesiredState): void {
    if (this.closing.signal.aborted) return;
    this.desired.set(desired.family, desired);
    this.pendingReconcile.add(desired.family);
    this.kick();
  }

  /** Targets waiting: queued for the next run or kept after a failure. */
  get backlog(): number {
    return this.pending.size + this.failed.size;
  }

  /** Resolves when no run is in flight or queued. */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Aborts the run in flight, drops what is queued, and waits for the run to end. */
  async close(): Promise<void> {
    if (!this.closing.signal.aborted) this.closing.abort(new Error('conntrack flusher closed'));
    await this.idle();
    this.pending.clear();
    this.failed.clear();
    this.pendingReconcile.clear();
    this.pendingReconcileLater.clear();
    this.onClose?.();
  }

  private kick(): void {
    if (this.running) return; // the loop picks the new work up when the current run ends
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    // Off the caller's stack: the sync loop's own follow-up runs first.
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      while (!this.closing.signal.aborted && (this.pending.size > 0 || this.pendingReconcile.size > 0)) {
        if (this.pendingReconcile.size > 0) {
          const families = [...this.pendingReconcile];
          this.pendingReconcile.clear();
          await this.runReconcile(families);
        }
        if (this.pending.size > 0) {
          const batch = this.pending;
          this.pending = new Map();
          await this.runFlush(batch);
        }
      }
    } catch (e) {
      // Runs catch their own errors; this is a bug of ours, never a rejection for the caller.
      this.log.error('Conntrack flusher failed', { error: String((e as Error)?.stack ?? e) });
    } finally {
      this.running = undefined;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** A signal that aborts at the time bound or on close(), and its cleanup. */
  private runSignal(): { signal: AbortSignal; done: () => void } {
    const ac = new AbortController();
    const timer = this.clock.setTimer(this.timeoutMs, () => ac.abort(new FlushTimeout(this.timeoutMs)));
    const onClose = (): void => ac.abort(this.closing.signal.reason);
    this.closing.signal.addEventListener('abort', onClose, { once: true });
    if (this.closing.signal.aborted) onClose();
    return {
      signal: ac.signal,
      done: () => {
        timer.cancel();
        this.closing.signal.removeEventListener('abort', onClose);
      },
    };
  }

  private index(family: IPFamily): ServingIndex | undefined {
    const d = this.desired.get(family);
    return d ? servingIndex(d, this.indexOpts) : undefined;
  }

  private report(r: FlushRunReport): void {
    try {
      this.counters?.(r);
    } catch (e) {
      this.log.warn('Conntrack flusher counters callback failed', { error: String(e) });
    }
  }

  /** Deletes in batches; returns the [start, end) index ranges of batches that failed or were not reached. */
  private async deleteBatches(
    flows: readonly Flow[],
    signal: AbortSignal,
    totals: { deleted: number; notFound: number; errors: number },
  ): Promise<{ failed: [number, number][]; aborted: boolean }> {
    const failed: [number, number][] = [];
    let aborted = false;
    const size = Math.max(1, Math.floor(this.batchSize));
    for (let start = 0; start < flows.length; start += size) {
      const end = Math.min(flows.length, start + size);
      if (aborted || signal.aborted) {
        aborted = true;
        failed.push([start, end]);
        continue;
      }
      try {
        const r = await this.client.deleteMany(flows.slice(start, end), { signal });
        totals.deleted += r.deleted;
        totals.notFound += r.notFound;
        if (r.errors.length > 0) {
          totals.errors += r.errors.length;
          failed.push([start, end]);
          this.log.warn('Some conntrack entries could not be deleted', {
            errors: r.errors.length,
            first: r.errors[0]!.message,
            batch: end - start,
          });
        }
      } catch (e) {
        if (signal.aborted) aborted = true;
        else {
          totals.errors++;
          this.log.warn('Deleting conntrack entries failed', {
            error: errorMessage(e),
            batch: end - start,
          });
        }
        failed.push([start, end]);
      }
    }
    return { failed, aborted };
  }

  /**
   * The kernel-side flushes of one group. Returns the filters done with (flushed, or failed
   * and left for the next run); the rest of the group goes through the dump.
   */
  private async flushGroup(
    group: DumpGroup,
    index: ServingIndex | undefined,
    budget: { left: number },
    signal: AbortSignal,
    run: RunTotals,
  ): Promise<Set<PlannedFilter>> {
    const done = new Set<PlannedFilter>();
    const client = this.client;
    if (!this.kernelFlush || !client.flushMatching || !client.canFlush) return done;
    const flushable = kernelFlushable(group, index, (f) => client.canFlush!(f));
    // Each flush walks the whole table: past the budget, the group's one dump (one walk)
    // takes all of its filters instead.
    if (flushable.length === 0 || flushable.length > budget.left) return done;
    budget.left -= flushable.length;
    for (const pf of flushable) {
      if (signal.aborted) break;
      let r: FlushResult | undefined;
      try {
        r = await client.flushMatching(pf.filter, { signal });
      } catch (e) {
        // Not dumped now: its targets are retried with the next schedule(), as a failed dump's.
        done.add(pf);
        for (const k of pf.targets) run.failedKeys.add(k);
        if (signal.aborted) run.aborted = true;
        else {
          run.errors++;
          this.log.warn('Flushing conntrack entries by filter failed', {
            filter: filterText(pf.filter),
            error: errorMessage(e),
          });
        }
        continue;
      }
      if (!r) break; // the kernel cannot (before 6.12): this filter and the rest take the dump
      done.add(pf);
      run.kernelFlushes++;
      run.deleted += r.deleted;
      run.matched += r.deleted;
    }
    return done;
  }

  private async runFlush(batch: Map<string, PendingTarget>): Promise<void> {
    const t0 = this.clock.now();
    const { signal, done } = this.runSignal();
    const run: RunTotals = {
      failedKeys: new Set<string>(),
      deleted: 0,
      notFound: 0,
      errors: 0,
      matched: 0,
      kernelFlushes: 0,
      aborted: false,
    };
    let kept = 0;
    try {
      kept = await this.flushBatch(batch, signal, run);
    } catch (e) {
      // A bad target (an address the filter refuses): it would fail again, so it is dropped.
      run.errors++;
      this.log.error('Conntrack flush could not be planned', { error: errorMessage(e), targets: batch.size });
    } finally {
      done();
    }
    if (run.aborted) run.errors++;
    this.finishFlush(batch, run, kept, this.clock.now() - t0, signal);
  }

  /**
   * Plans the batch, flushes what the kernel can flush by filter, dumps the rest and deletes
   * the stale entries; returns how many entries were kept (still served).
   */
  private async flushBatch(batch: Map<string, PendingTarget>, signal: AbortSignal, run: RunTotals): Promise<number> {
    const { failedKeys } = run;
    let kept = 0;
    const plan = planFlush(batch);
    const indexes = new Map<IPFamily, ServingIndex | undefined>();
    const indexOf = (family: IPFamily): ServingIndex | undefined => {
      if (!indexes.has(family)) indexes.set(family, this.index(family));
      return indexes.get(family);
    };
    const budget = { left: this.maxKernelFlushes };
    const toDelete: Flow[] = [];
    /** The targets that chose each entry of toDelete (same index). */
    const owners: (readonly string[])[] = [];
    for (const whole of plan.groups) {
      const flushed = signal.aborted
        ? new Set<PlannedFilter>()
        : await this.flushGroup(whole, indexOf(whole.family), budget, signal, run);
      const group = withoutFilters(whole, flushed);
      if (!group) continue;
      if (signal.aborted) {
        run.aborted = true;
        for (const k of group.targets) failedKeys.add(k);
        continue;
      }
      let flows: Flow[];
      try {
        flows = await this.client.dump(group.dump, { signal });
      } catch (e) {
        if (signal.aborted) run.aborted = true;
        else {
          run.errors++;
          this.log.warn('Dumping conntrack entries failed', { filter: filterText(group.dump), error: errorMessage(e) });
        }
        for (const k of group.targets) failedKeys.add(k);
        continue;
      }
      const sel = selectStale(group, flows, indexOf(group.family));
      kept += sel.kept;
      for (const s of sel.selected) {
        toDelete.push(s.flow);
        owners.push(s.targets);
      }
    }
    run.matched += toDelete.length;
    const del = await this.deleteBatches(toDelete, signal, run);
    run.aborted ||= del.aborted;
    for (const [start, end] of del.failed)
      for (let i = start; i < end; i++) for (const k of owners[i]!) failedKeys.add(k);
    return kept;
  }

  /** Keeps the failed targets for the next run (up to maxAttempts), then logs and reports the run. */
  private finishFlush(
    batch: Map<string, PendingTarget>,
    run: RunTotals,
    kept: number,
    durationMs: number,
    signal: AbortSignal,
  ): void {
    const aborted = run.aborted;
    const failed = [...run.failedKeys].map((k) => batch.get(k)!).filter(Boolean);
    const { keep, dropped } = retainFailed(failed, this.maxAttempts);
    if (!this.closing.signal.aborted) mergeTargets(this.failed, keep);
    for (const d of dropped)
      this.log.error('Gave up deleting stale conntrack entries', {
        reason: d.target.reason,
        service: d.target.service,
        attempts: d.attempts,
      });
    const fields = {
      targets: batch.size,
      matched: run.matched,
      deleted: run.deleted,
      notFound: run.notFound,
      kept,
      errors: run.errors,
      kernelFlushes: run.kernelFlushes,
      durationMs,
      retained: keep.length,
    };
    if (aborted)
      this.log.warn('Conntrack flush stopped before it was done', {
        ...fields,
        reason: String(signal.reason?.message ?? signal.reason),
      });
    else if (run.errors > 0)
      this.log.warn('Conntrack flush had errors; its targets are retried at the next sync', fields);
    else this.log.debug('Flushed stale conntrack entries', fields);
    const { retained, ...counts } = fields;
    this.report({ mode: 'flush', families: [], ...counts, timedOut: aborted, retained, dropped: dropped.length });
  }

  private async runReconcile(families: readonly IPFamily[]): Promise<void> {
    const t0 = this.clock.now();
    const { signal, done } = this.runSignal();
    const totals = { deleted: 0, notFound: 0, errors: 0 };
    const retry = new Set<IPFamily>();
    let matched = 0;
    let aborted = false;
    try {
      for (const family of families) {
        const index = this.index(family);
        if (!index) continue;
        const stale: Flow[] = [];
        for (const filter of reconcileDumps(index)) {
          if (signal.aborted) {
            aborted = true;
            retry.add(family);
            break;
          }
          try {
            for (const f of selectReconcile(index, await this.client.dump(filter, { signal }))) stale.push(f);
          } catch (e) {
            if (signal.aborted) aborted = true;
            else {
              totals.errors++;
              this.log.warn('Dumping conntrack entries failed', {
                filter: filterText(filter),
                error: errorMessage(e),
              });
            }
            retry.add(family);
          }
        }
        matched += stale.length;
        for (const f of stale.slice(0, 5))
          this.log.debug('Stale conntrack entry', { family, flow: tupleText(f.orig), reply: tupleText(f.reply) });
        const del = await this.deleteBatches(stale, signal, totals);
        aborted ||= del.aborted;
        if (del.failed.length > 0) retry.add(family);
      }
    } finally {
      done();
    }
    if (aborted) totals.errors++;
    // A reconcile that failed runs again with the next schedule() (with the state then).
    if (!this.closing.signal.aborted) for (const f of retry) this.pendingReconcileLater.add(f);
    const durationMs = this.clock.now() - t0;
    const fields = {
      families: families.join(','),
      matched,
      deleted: totals.deleted,
      notFound: totals.notFound,
      errors: totals.errors,
      durationMs,
    };
    if (aborted || totals.errors > 0)
      this.log.warn('Conntrack reconcile did not finish; it is retried at the next sync', fields);
    else this.log.info('Reconciled conntrack entries with the programmed Services', fields);
    this.report({
      mode: 'reconcile',
      families,
      targets: 0,
      matched,
      deleted: totals.deleted,
      notFound: totals.notFound,
      kept: 0,
      errors: totals.errors,
      kernelFlushes: 0,
      durationMs,
      timedOut: aborted,
      retained: retry.size,
      dropped: 0,
    });
  }
}
