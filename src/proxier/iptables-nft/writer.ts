// The iptables-nft ruleset writer of one family: every mode whose rules are iptables rules
// (iptables, userspace, IPVS's companion rules) writes through one of these. It owns what
// writing needs beyond the plans: the batch budgets, the batch sinks, what the last sync
// committed (the mirror, state.ts) and whether it may be trusted (trust.ts), the handles of
// rules a full sync added without echo (learn-handles.ts), the canary (canary.ts), and the
// cleanup. A mode hands it a skeleton and units and says which chains are its own.

import type { Logger } from '../../base/logger.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { SyncProblem } from '../types.ts';
import { Canary } from './canary.ts';
import type { CanaryOptions } from './canary.ts';
import type { RuleCodec } from './codec.ts';
import { BatchSink, sendGroups } from './groups.ts';
import type { Budget, Op, Plan } from './groups.ts';
import { readChains, readKernel } from './kernel-state.ts';
import type { KernelState } from './kernel-state.ts';
import { learnHandles } from './learn-handles.ts';
import { Encoder } from './plan-common.ts';
import { planFull } from './plan-full.ts';
import { planPartial } from './plan-partial.ts';
import { removeAll } from './remove.ts';
import type { WriterState } from './state.ts';
import { MirrorTrust } from './trust.ts';
import type { Skeleton, Unit, UnitSource } from './units.ts';
import type { BatchSender, TableClient } from './writer-types.ts';

export interface WriterBudgets {
  /** Partial syncs and cleanup: half the socket's limit per batch, a quarter for echoed messages. */
  readonly echo: Budget;
  /** Full syncs: the whole socket, no echo (handles learned afterwards). */
  readonly full: Budget;
  /** Half the socket, no echo (modes that keep no mirror). */
  readonly plain: Budget;
}

/**
 * The budgets for a socket whose largest batch is `maxBatchBytes`. Half the socket's limit per
 * batch keeps each commit (which holds the kernel's lock) bounded; a quarter for messages whose
 * echo comes back in the receive buffer. A full sync asks for no echo and may fill the socket:
 * every commit that adds a jump makes the kernel walk every rule reachable from the built-in
 * chains (nf_tables_validate; 66 ms at 5,000 Services, 207 ms at 10,000), so a rewrite under
 * existing jumps (a restart, the hourly rewrite) costs that per batch.
 */
export function writerBudgets(maxBatchBytes = 4 << 20): WriterBudgets {
  const half = Math.max(16384, Math.floor(maxBatchBytes / 2));
  const echoBytes = Math.max(8192, Math.floor(maxBatchBytes / 4));
  return {
    echo: { bytes: half, echoBytes },
    full: { bytes: Math.max(16384, maxBatchBytes), echoBytes, echo: false },
    plain: { bytes: half, echoBytes, echo: false },
  };
}

export interface IptablesNftWriterOptions {
  /** Clients bound to (ip|ip6, table) for each table the mode writes. */
  readonly clients: ReadonlyMap<IptTable, TableClient>;
  /** Sends batches spanning the tables (one of the clients, usually). */
  readonly sender: BatchSender;
  /** Sends the late groups (stale chains' removal) and cleanup; default: sender. */
  readonly lateSender?: BatchSender;
  readonly codec: RuleCodec;
  /** The chains of this mode (stale ones are removed, and jumps to them). */
  readonly isOurs: (table: IptTable, chain: string) => boolean;
  readonly logger: Logger;
  readonly maxBatchBytes?: number;
  readonly now?: () => number;
  /**
   * Keep what each full sync committed, learn the handles of its shared rules, and allow
   * partial syncs and trusted full syncs; absent: every write is a full one against the kernel.
   */
  readonly mirror?: boolean;
  /** Full syncs in half-socket batches (no mirror kept, so nothing to learn afterwards). */
  readonly halfBatches?: boolean;
  /**
   * The skeleton's owned chains changed rule by rule, by handle (plan-diff.ts), instead of
   * flushed and refilled when they differ: for short chains that change a rule at a time.
   */
  readonly diffOwned?: boolean;
  /**
   * At least this often a full sync refills every owned chain instead of trusting the mirror;
   * default 1 h.
   */
  readonly rewritePeriodMs?: number;
  /** Told of every group about to be sent (metrics). */
  readonly onPlan?: (groups: readonly (readonly Op[])[]) => void;
  /** The canary chains, checked while the mirror is trusted. */
  readonly canary?: CanaryOptions;
}

export interface FullWrite {
  readonly skeleton: Skeleton;
  /** Per owner, iterated once. */
  readonly units: Iterable<UnitSource>;
  /** The mirror may stand in for the kernel (the sync's begin() said so). */
  readonly trust: boolean;
  /** Owned chains someone else changed (chainId): refilled even when trusted. */
  readonly tainted?: ReadonlySet<string>;
}

export interface WriteResult {
  readonly kernelMs: number;
  /** nf_tables messages sent. */
  readonly messages: number;
  readonly errors: SyncProblem[];
  readonly batches: number;
  readonly longestBatchMs: number;
}

export class IptablesNftWriter {
  readonly trust = new MirrorTrust();
  readonly budgets: WriterBudgets;
  readonly enc: Encoder;
  private readonly o: IptablesNftWriterOptions;
  private readonly now: () => number;
  private readonly canary: Canary | undefined;
  private mirror: WriterState | undefined;
  private rewrittenAt = -Infinity;

  constructor(o: IptablesNftWriterOptions) {
    this.o = o;
    this.now = o.now ?? (() => performance.now());
    this.enc = new Encoder(o.codec);
    this.budgets = writerBudgets(o.maxBatchBytes);
    this.canary = o.canary ? new Canary(o.canary, this.trust, o.logger) : undefined;
  }

  /** What the last full or partial sync committed (mirror mode only). */
  get state(): WriterState | undefined {
    return this.mirror;
  }

  /** Asks for a full resync through `kick` when a canary chain disappears. */
  watchCanary(kick: () => void): void {
    this.canary?.watch(kick);
  }

  /** At the start of a sync: true (a full one is due) when a canary went missing while trusted. */
  canaryGone(): Promise<boolean> {
    return this.canary ? this.canary.checkGone() : Promise.resolve(false);
  }

  /**
   * Writes the whole ruleset: lists what the kernel holds where the plan compares (the
   * skeleton's chains, the shared and built-in ones; with a trusted mirror only those, the
   * owners' chains taken as the mirror says) and sends the difference.
   */
  async writeFull(w: FullWrite, signal?: AbortSignal): Promise<WriteResult> {
    const tr = this.now();
    const fixed = [...w.skeleton.chains, ...w.skeleton.shared];
    const listedChains = new Set(fixed.map((c) => `${c.table}/${c.name}`));
    let trusted =
      this.o.mirror && w.trust && this.now() - this.rewrittenAt < (this.o.rewritePeriodMs ?? 3_600_000)
        ? this.mirror
        : undefined;
    // Trusting the mirror, the chains it made are taken as present: only the fixed and the
    // built-in chains are read (stale chains of others' making wait for the periodic rewrite).
    let light = trusted ? await readChains(this.o.clients, this.o.codec, fixed) : undefined;
    if (trusted && light && !handlesPresent(trusted, light)) {
      // Someone removed rules of ours (`iptables -t nat -F` leaves the canary chains): the
      // owners' chains cannot be trusted either.
      this.o.logger.info('Rules of ours in shared chains are gone; rewriting every chain');
      light = undefined;
    }
    if (!light) trusted = undefined;
    const kernel = light ?? (await readKernel(this.o.clients, this.o.codec, (t, c) => listedChains.has(`${t}/${c}`)));
    if (!trusted) this.rewrittenAt = this.now();
    let kernelMs = this.now() - tr;
    const timed = async (f: () => Promise<unknown>): Promise<void> => {
      const ts = this.now();
      await f();
      kernelMs += this.now() - ts;
    };
    const budget = this.o.halfBatches ? this.budgets.plain : this.budgets.full;
    const sink = new BatchSink(this.o.clients, this.o.sender, budget, signal, this.now);
    const drain = (p: Plan): Promise<void> => {
      this.o.onPlan?.(p.groups);
      return timed(() => sink.add(p.groups));
    };
    const made =
      light && trusted
        ? new Set([...trusted.units.values()].flatMap((u) => u.chains.map((c) => `${c.table}/${c.name}`)))
        : undefined;
    const tainted = w.tainted;
    const { plan, state } = await planFull({
      desired: { skeleton: w.skeleton, units: w.units },
      kernel,
      enc: this.enc,
      isOurs: this.o.isOurs,
      drain,
      ...(this.o.diffOwned ? { diffOwned: true } : {}),
      ...(trusted ? { trusted } : {}),
      ...(made ? { assumePresent: (t: IptTable, c: string): boolean => made.has(`${t}/${c}`) } : {}),
      ...(tainted && tainted.size > 0 ? { tainted: (t: IptTable, c: string) => tainted.has(`${t}/${c}`) } : {}),
    });
    await drain(plan);
    await timed(() => sink.finish());
    if (this.o.mirror) await timed(() => this.learn(state));
    const late = await this.sendLate(plan.late, signal, timed);
    if (this.o.mirror) this.mirror = state;
    this.canary?.start();
    return {
      kernelMs,
      errors: late.errors,
      messages: sink.result.messages + late.messages,
      batches: sink.result.batches + late.batches,
      longestBatchMs: Math.max(sink.result.longestBatchMs, late.longestBatchMs),
    };
  }

  /** The handles of the rules the full sync added without echo; all of them, or it failed. */
  private async learn(state: WriterState): Promise<void> {
    const missing = await learnHandles(state, this.o.clients, this.o.codec);
    // Without them a partial sync could not delete those rules: the next sync is full again.
    if (missing > 0)
      throw new Error(
        `${missing} rules written to shared chains were not found listing them again (someone changed them meanwhile?)`,
      );
  }

  /** Stale chains' removal: its failure is reported, not thrown (retried at the next full sync). */
  private async sendLate(
    groups: readonly (readonly Op[])[],
    signal: AbortSignal | undefined,
    timed: (f: () => Promise<unknown>) => Promise<void>,
  ): Promise<{ errors: SyncProblem[]; messages: number; batches: number; longestBatchMs: number }> {
    const budget = this.o.halfBatches ? this.budgets.plain : this.budgets.echo;
    const late = new BatchSink(this.o.clients, this.o.lateSender ?? this.o.sender, budget, signal, this.now);
    const errors: SyncProblem[] = [];
    if (groups.length > 0) {
      try {
        await timed(async () => {
          await late.add(groups);
          await late.finish();
        });
      } catch (e) {
        if (!this.o.mirror) throw e;
        errors.push({ what: 'stale chains not removed (retried at the next full sync)', cause: e });
        this.o.logger.warn('Stale chains not removed', { err: e });
      }
    }
    const { messages, batches, longestBatchMs } = late.result;
    return { errors, messages, batches, longestBatchMs };
  }

  /**
   * Writes only the changed owners against the mirror, without reading the kernel: their
   * chains refilled, their rules in shared chains added or deleted by handle. `committed` is
   * called once the kernel took the batches (before the echoes are checked).
   */
  async writePartial(
    changed: ReadonlyMap<string, Unit | undefined>,
    signal: AbortSignal,
    committed?: () => void,
  ): Promise<WriteResult> {
    const state = this.mirror;
    if (!state) throw new Error('a partial sync needs a full one first');
    const { plan, commit } = planPartial({ state, changed, enc: this.enc });
    const tk = this.now();
    this.o.onPlan?.(plan.groups);
    const r = await sendGroups(plan.groups, this.o.clients, this.o.sender, this.budgets.echo, signal, this.now);
    const kernelMs = this.now() - tk;
    commit();
    committed?.();
    for (const id of changed.keys()) {
      if (state.units.get(id)?.shared.some((e) => e.handle === undefined)) {
        // An echo was lost: the next sync reads the kernel instead of trusting the mirror.
        throw new Error(`the kernel did not echo the handle of a new rule of ${id}; a full sync follows`);
      }
    }
    return { kernelMs, messages: r.messages, errors: [], batches: r.batches, longestBatchMs: r.longestBatchMs };
  }

  /** Stops the canary timer. */
  stop(): void {
    this.canary?.stop();
  }

  /** Our jumps, then our chains; nothing else. The mirror is forgotten. */
  async cleanup(signal?: AbortSignal): Promise<void> {
    this.stop();
    const budget = this.o.halfBatches ? this.budgets.plain : this.budgets.echo;
    await removeAll(this.o.clients, this.o.lateSender ?? this.o.sender, this.o.codec, this.o.isOurs, budget, signal);
    this.mirror = undefined;
    this.trust.due();
  }
}

/** Every rule the mirror says is in a shared or built-in chain is still there (by handle). */
function handlesPresent(state: WriterState, kernel: KernelState): boolean {
  const have = new Map<string, Set<bigint>>();
  const present = (table: string, chain: string, h: bigint): boolean => {
    const id = `${table}/${chain}`;
    let set = have.get(id);
    if (!set) have.set(id, (set = new Set((kernel.rules.get(id) ?? []).map((e) => e.handle))));
    return set.has(h);
  };
  for (const e of state.skeleton.shared)
    if (e.handle === undefined || !present(e.table, e.chain, e.handle)) return false;
  for (const u of state.units.values())
    for (const e of u.shared) if (e.handle === undefined || !present(e.table, e.chain, e.handle)) return false;
  return true;
}
