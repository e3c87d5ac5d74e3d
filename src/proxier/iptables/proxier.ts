// The iptables proxier: upstream's KUBE-* chains in the iptables-nft tables of one family,
// written over nf_tables netlink (docs/iptables-ruleset.md).
//
// A full sync (the first, hourly ones, after a failure, drift or a canary's disappearance) lists
// what the kernel holds in our chains and in the built-in ones, and writes the difference:
// owned chains refilled when their content differs, the long shared chains diffed rule by
// rule, jumps inserted where missing, stale chains removed. A partial sync regenerates only
// the changed service ports and diffs them against what the last sync committed: their
// chains refilled, single rules of the shared chains added or deleted by handle. Rules of
// others in the same tables are never touched.

import type { Clock, TimerHandle } from '../../base/clock.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, EndpointSelection, ServicePortInfo } from '../../model/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { DescribeOptions, PortDescription, Proxier, SyncReport, TrafficSample } from '../types.ts';
import { SyncFailedError } from '../types.ts';
import type { CanaryProbe } from './canary.ts';
import type { DriftTarget } from '../drift/chain-watch.ts';
import { describeIptPort } from './describe.ts';
import type { IptContext } from './types.ts';
import { canaryPresent } from './canary.ts';
import type { RuleCodec } from '../iptables-nft/codec.ts';
import { FIXED_NAMES, skeletonOf, unitOf } from './desired.ts';
import { globalContext, portContext } from './context.ts';
import type { IptablesOptions } from './context.ts';
import { BatchSink, sendGroups } from '../iptables-nft/groups.ts';
import type { Budget, Plan } from '../iptables-nft/groups.ts';
import { readChains, readKernel } from '../iptables-nft/kernel-state.ts';
import type { KernelState } from '../iptables-nft/kernel-state.ts';
import { learnHandles } from '../iptables-nft/learn-handles.ts';
import { nodePortIPs } from './node-ips.ts';
import { Encoder } from '../iptables-nft/plan-common.ts';
import { planFull } from '../iptables-nft/plan-full.ts';
import { planPartial } from '../iptables-nft/plan-partial.ts';
import { removeAll } from '../iptables-nft/remove.ts';
import { iptablesTrafficCounters } from './traffic.ts';
import { servicePortRules } from './rules.ts';
import { globalRules } from './global.ts';
import type { WriterState } from '../iptables-nft/state.ts';
import type { Unit, UnitSource } from '../iptables-nft/units.ts';
import { chainId } from '../iptables-nft/units.ts';
import { SyncTally } from './sync-tally.ts';
import { Chain, isServicePortChain } from './names.ts';
import type { BatchSender, TableClient } from '../iptables-nft/writer-types.ts';
import { errorMessage } from '../../base/errors.ts';

/** The sysctl writer the daemon passes (route_localnet); same shape as the IPVS mode's. */
export interface SysctlWriter {
  set(path: string, value: number): Promise<void>;
}

export const ROUTE_LOCALNET = 'net/ipv4/conf/all/route_localnet';

/**
 * The receive buffer the mode's netlink socket should read into (the connection's
 * recvMessageBytes). The kernel sizes dump datagrams after the reader's buffer (up to 32 KiB)
 * and walks the table from its start again for each one: listing 55,000 chains at 5,000
 * Services cost 2.9 s more kernel time in 4 KiB datagrams (the size peeking gives). Every
 * reply on that socket (dump parts, acks, echoes) is far smaller than this.
 */
export const IPTABLES_RECV_BYTES = 65536;

export interface IptablesProxierOptions extends IptablesOptions {
  readonly family: IPFamily;
  /** Clients bound to (ip|ip6, nat), (…, filter), (…, mangle). */
  readonly clients: ReadonlyMap<IptTable, TableClient & CanaryProbe>;
  /** Sends batches spanning the three tables (one of the clients, usually). */
  readonly sender: BatchSender;
  readonly codec: RuleCodec;
  readonly logger: Logger;
  /** The node's addresses of this family, for nodePortAddresses that are not "all". */
  readonly localAddresses?: () => Promise<readonly string[]>;
  /** route_localnet for localhost node ports (IPv4); absent: not written. */
  readonly sysctl?: SysctlWriter;
  /** The socket's largest batch; batches are kept at a quarter of it (the echoes come back in the receive buffer). */
  readonly maxBatchBytes?: number;
  readonly clock?: Clock;
  /**
   * At least this often a full sync refills every service-port chain instead of trusting what
   * the last sync committed (upstream's iptables mode restores everything hourly); default 1 h.
   */
  readonly rewritePeriodMs?: number;
  /** Told when a full sync starts (true) and ends (false): the drift watch stops listening meanwhile. */
  readonly onFullSync?: (running: boolean) => void;
  /** How often the canary chains are checked; default 10 s (upstream: 30 s). */
  readonly canaryIntervalMs?: number;
  readonly now?: () => number;
}

export class IptablesProxier implements Proxier, DriftTarget {
  readonly mode = 'iptables' as const;
  private readonly o: IptablesProxierOptions;
  private readonly log: Logger;
  private readonly enc: Encoder;
  private readonly now: () => number;
  private readonly budget: Budget;
  private readonly fullBudget: Budget;
  private state: WriterState | undefined;
  private ctxKey = '';
  private needFull = true;
  /** The node-port addresses the last full sync wrote, sorted and joined. */
  private nodePortKey = '';
  /** The state mirrors the kernel: the last sync succeeded and no canary went missing since. */
  private trusted = false;
  /** The model objects each committed unit was made from (they are never mutated: compared by identity). */
  private inputs = new Map<string, PortInputs>();
  private rewrittenAt = -Infinity;
  private timer: TimerHandle | undefined;
  private onDrift: (() => void) | undefined;
  private polling = false;
  /** The numbers of upstream's iptables metrics (sync-tally.ts). */
  private readonly tally = new SyncTally();
  private readonly sender: BatchSender;
  /** The port context of the last successful sync (describe() makes its units again). */
  private lastCtx: IptContext | undefined;
  /** Service-port chains someone else changed since the last full sync began (../drift/chain-watch.ts). */
  private tainted = new Set<string>();
  /** Drift of anything (a chain of ours deleted, announcements lost), perhaps while a sync runs. */
  private distrust = false;

  constructor(o: IptablesProxierOptions) {
    this.o = o;
    this.log = o.logger.child({ proxier: 'iptables', family: o.family });
    this.enc = new Encoder(o.codec);
    this.now = o.now ?? (() => performance.now());
    this.sender = this.tally.watch(o.sender);
    // Half the socket's limit per batch (keeps each commit, which holds the kernel's lock,
    // bounded), and a quarter for messages whose echo comes back in the receive buffer.
    const max = o.maxBatchBytes ?? 4 << 20;
    this.budget = { bytes: Math.max(16384, Math.floor(max / 2)), echoBytes: Math.max(8192, Math.floor(max / 4)) };
    // A full sync asks for no echo and may fill the socket: every commit that adds a jump makes
    // the kernel walk every rule reachable from the built-in chains (nf_tables_validate; 66 ms
    // at 5,000 Services, 207 ms at 10,000), so a rewrite under existing jumps (a restart, the
    // hourly rewrite) costs that per batch. iptables-nft-restore sends the whole ruleset in one
    // batch (SO_SNDBUFFORCE, which the netlink package does not expose), holding the lock longer.
    this.fullBudget = { bytes: Math.max(16384, max), echoBytes: this.budget.echoBytes, echo: false };
  }

  async sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    if (desired.family !== this.o.family)
      throw new Error(`an ${this.o.family} proxier was given ${desired.family} state`);
    const ctx = portContext(desired, this.o);
    const key = JSON.stringify(ctx);
    let full = this.needFull || change.full || !this.state || key !== this.ctxKey;
    // Full syncs come hourly: a node address moved in or out of nodePortAddresses' CIDRs is
    // looked for by every partial one (one address dump, only with CIDRs).
    const npa = desired.nodePortAddresses;
    if (!full && !npa.matchAll && !npa.primary) {
      const ips = (await nodePortIPs(desired, this.o.localAddresses)).sort().join(',');
      if (ips !== this.nodePortKey) full = true;
    }
    if (this.trusted && !(await canaryPresent(this.o.clients))) {
      this.log.info('Canary chain gone (someone flushed our tables); full resync');
      full = true;
      this.trusted = false;
    }
    this.needFull = true; // until this sync succeeds
    const wasTrusted = this.trusted && !this.distrust;
    this.distrust = false;
    this.trusted = false;
    this.tally.begin(full);
    let report: SyncReport;
    if (full) this.o.onFullSync?.(true);
    try {
      report = full
        ? await this.fullSync(desired, signal, wasTrusted)
        : await this.partialSync(desired, change, ctx, signal);
    } catch (e) {
      this.tally.fail();
      throw new SyncFailedError(e, !full, this.tally.commitFailed);
    } finally {
      if (full) this.o.onFullSync?.(false);
    }
    report = { ...report, iptables: this.tally.commit() };
    this.ctxKey = key;
    this.lastCtx = ctx;
    // Drift seen while this sync ran is repaired by the next one.
    this.needFull = this.tainted.size > 0 || this.distrust;
    this.trusted = !this.distrust;
    return report;
  }

  /**
   * Someone else changed a rule of `chain` in `table`, deleted the chain (`what`), or anything
   * (no chain) (../drift/chain-watch.ts). A service-port chain is refilled by the next full sync; the
   * fixed and shared chains (our jumps in the built-in ones: `jump`, where a removed rule
   * jumped) are listed and compared by every full sync anyway. A chain of ours deleted, or
   * announcements lost: nothing committed is trusted any more. True when it concerns us (then
   * a full sync is due).
   */
  drifted(table?: IptTable, chain?: string, what: 'rule' | 'chain' = 'rule', jump?: string): boolean {
    if (!this.state) return false;
    if (table === undefined || chain === undefined || (what === 'chain' && isOurs(table, chain))) {
      this.trusted = false;
      this.distrust = true;
    } else if (!isOurs(table, chain)) {
      if (jump === undefined || !isOurs(table, jump)) return false;
    } else if (isServicePortChain(chain)) {
      this.tainted.add(chainId(table, chain));
    }
    this.needFull = true;
    return true;
  }

  private async fullSync(desired: DesiredState, signal: AbortSignal, trustState: boolean): Promise<SyncReport> {
    const t0 = this.now();
    // Taken now: drift announced while this sync runs is for the next one.
    const tainted = this.tainted;
    this.tainted = new Set();
    const ips = desired.nodePortAddresses.matchAll ? [] : await nodePortIPs(desired, this.o.localAddresses);
    this.nodePortKey = [...ips].sort().join(',');
    const gctx = globalContext(desired, ips, this.o);
    if (gctx.localhostNodePorts && this.o.sysctl) await this.o.sysctl.set(ROUTE_LOCALNET, 1);
    const skeleton = this.tally.skeleton(skeletonOf(globalRules(gctx)));
    const inputs = new Map<string, PortInputs>();
    const units = this.unitSources(desired, gctx, inputs);
    const tr = this.now();
    // Rules are listed only where the plan compares them with the kernel: the skeleton's
    // chains and the shared ones (and the built-in chains). Service-port chains are trusted
    // from the last sync when it can be, else refilled.
    const fixed = [...skeleton.chains, ...skeleton.shared];
    const listedChains = new Set(fixed.map((c) => `${c.table}/${c.name}`));
    let trusted =
      trustState && this.now() - this.rewrittenAt < (this.o.rewritePeriodMs ?? 3_600_000) ? this.state : undefined;
    // Trusting the state, the chains it made are taken as present: only the fixed and the
    // built-in chains are read (stale chains of others' making wait for the hourly rewrite).
    let light = trusted ? await readChains(this.o.clients, this.o.codec, fixed) : undefined;
    if (trusted && light && !handlesPresent(trusted, light)) {
      // Someone removed rules of ours (`iptables -t nat -F` leaves the canary chains): the
      // service-port chains cannot be trusted either.
      this.log.info('Rules of ours in shared chains are gone; rewriting every chain');
      light = undefined;
    }
    if (!light) trusted = undefined;
    const kernel = light ?? (await readKernel(this.o.clients, this.o.codec, (t, c) => listedChains.has(`${t}/${c}`)));
    if (!trusted) this.rewrittenAt = this.now();
    let kernelMs = this.now() - tr;
    const sink = new BatchSink(this.o.clients, this.sender, this.fullBudget, signal, () => this.now());
    const timed = async (f: () => Promise<unknown>): Promise<void> => {
      const ts = this.now();
      await f();
      kernelMs += this.now() - ts;
    };
    const drain = (p: Plan): Promise<void> => {
      this.tally.plan(p.groups);
      return timed(() => sink.add(p.groups));
    };
    const made =
      light && trusted
        ? new Set([...trusted.units.values()].flatMap((u) => u.chains.map((c) => `${c.table}/${c.name}`)))
        : undefined;
    const assumePresent = made ? (t: IptTable, c: string): boolean => made.has(`${t}/${c}`) : undefined;
    const { plan, state } = await planFull({
      desired: { skeleton, units },
      kernel,
      enc: this.enc,
      isOurs,
      drain,
      ...(trusted ? { trusted } : {}),
      ...(assumePresent ? { assumePresent } : {}),
      ...(tainted.size > 0 ? { tainted: (t: IptTable, c: string) => tainted.has(chainId(t, c)) } : {}),
    });
    await drain(plan);
    await timed(() => sink.finish());
    let missing = 0;
    await timed(async () => {
      missing = await learnHandles(state, this.o.clients, this.o.codec);
    });
    // Without them a partial sync could not delete those rules: the next sync is full again.
    if (missing > 0)
      throw new Error(
        `${missing} rules written to shared chains were not found listing them again (someone changed them meanwhile?)`,
      );
    const errors: string[] = [];
    const late = new BatchSink(this.o.clients, this.o.sender, this.budget, signal, () => this.now());
    if (plan.late.length > 0) {
      try {
        await timed(async () => {
          await late.add(plan.late);
          await late.finish();
        });
      } catch (e) {
        errors.push(`stale chains not removed (retried at the next full sync): ${errorMessage(e)}`);
        this.log.warn('Stale chains not removed', { err: e });
      }
    }
    const totals = {
      batches: sink.result.batches + late.result.batches,
      longest: Math.max(sink.result.longestBatchMs, late.result.longestBatchMs),
    };
    this.state = state;
    this.inputs = inputs;
    this.startCanary();
    const total = this.now() - t0;
    return {
      full: true,
      servicesChanged: desired.services.size,
      kernelMs,
      planMs: Math.max(0, total - kernelMs),
      errors,
      batches: totals.batches,
      longestBatchMs: totals.longest,
    };
  }

  /**
   * Every service port as the full plan takes it, lazily: unchanged (same inputs and context
   * as the last sync) or with its rules to make. Records each port's inputs in `inputs`.
   */
  private unitSources(
    desired: DesiredState,
    gctx: ReturnType<typeof globalContext>,
    inputs: Map<string, PortInputs>,
  ): Generator<UnitSource> {
    const last = this.inputs;
    const sameContext = this.ctxKey === JSON.stringify(portContext(desired, this.o));
    const tally = this.tally;
    return (function* (): Generator<UnitSource> {
      for (const [id, info] of desired.services) {
        const sel = desired.selections.get(id);
        inputs.set(id, { info, sel });
        const was = last.get(id);
        const unchanged = sameContext && was !== undefined && was.info === info && was.sel === sel;
        tally.keep(id);
        yield { id, unchanged, unit: unitMaker(tally, id, info, sel, gctx) };
      }
    })();
  }

  /** `ctx`: portContext(desired), as sync() made it (it counts every endpoint: made once). */
  private async partialSync(
    desired: DesiredState,
    change: ChangeSet,
    ctx: IptContext,
    signal: AbortSignal,
  ): Promise<SyncReport> {
    const t0 = this.now();
    const changed = new Map<string, Unit | undefined>();
    for (const id of change.services) {
      const info = desired.services.get(id);
      changed.set(
        id,
        info
          ? this.tally.unit(id, unitOf(servicePortRules(info, desired.selections.get(id), ctx)))
          : this.tally.drop(id),
      );
    }
    const state = this.state!;
    const { plan, commit } = planPartial({ state, changed, enc: this.enc });
    const tk = this.now();
    this.tally.plan(plan.groups);
    const r = await sendGroups(plan.groups, this.o.clients, this.sender, this.budget, signal, this.now);
    const kernelMs = this.now() - tk;
    commit();
    for (const id of change.services) {
      const info = desired.services.get(id);
      if (info) this.inputs.set(id, { info, sel: desired.selections.get(id) });
      else this.inputs.delete(id);
    }
    for (const id of changed.keys()) {
      if (state.units.get(id)?.shared.some((e) => e.handle === undefined)) {
        // An echo was lost: the next sync reads the kernel instead of trusting the mirror.
        throw new Error(`the kernel did not echo the handle of a new rule of ${id}; a full sync follows`);
      }
    }
    const total = this.now() - t0;
    return {
      full: false,
      servicesChanged: changed.size,
      kernelMs,
      planMs: Math.max(0, total - kernelMs),
      errors: [],
      batches: r.batches,
      longestBatchMs: r.longestBatchMs,
    };
  }

  /** For explain: the port's rules in the kernel beside those the last sync wrote (describe.ts). */
  describe(info: ServicePortInfo, opts?: DescribeOptions): Promise<PortDescription> {
    const last = this.inputs.get(info.id);
    const unit = last && this.lastCtx ? unitOf(servicePortRules(last.info, last.sel, this.lastCtx)) : undefined;
    return describeIptPort(info, { clients: this.o.clients, family: this.o.family, unit }, opts);
  }

  /** New connections per service port and frontend kind, from our nat rules' counters (traffic.ts). */
  trafficCounters(): Promise<readonly TrafficSample[]> {
    const ports = [...this.inputs.values()].map((p) => p.info);
    return iptablesTrafficCounters(this.o.clients.get('nat'), this.o.family, ports);
  }

  /** Asks for a full resync through `kick` when the canary chains disappear. */
  watch(kick: () => void): void {
    this.onDrift = kick;
  }

  private startCanary(): void {
    if (this.timer || !this.o.clock) return;
    const every = this.o.canaryIntervalMs ?? 10_000;
    const tick = (): void => {
      this.timer = this.o.clock!.setTimer(every, tick);
      if (this.polling || this.needFull) return;
      this.polling = true;
      canaryPresent(this.o.clients)
        .then((ok) => {
          if (ok || this.needFull) return;
          this.log.info('Canary chain gone (someone flushed our tables); asking for a full resync');
          this.needFull = true;
          this.trusted = false;
          this.onDrift?.();
        })
        .catch((e: unknown) => this.log.warn('Canary check failed', { err: e }))
        .finally(() => (this.polling = false));
    };
    this.timer = this.o.clock.setTimer(every, tick);
  }

  /** Stops the canary timer. */
  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }

  async cleanup(): Promise<void> {
    this.stop();
    await removeAll(this.o.clients, this.o.sender, this.o.codec, isOurs, this.budget);
    this.state = undefined;
    this.needFull = true;
  }
}

/**
 * Makes a service port's unit. A function of its own: the full sync's state keeps this closure
 * (for its lazy digests) until the port changes, and one made inside unitSources would keep that
 * sync's whole DesiredState and both its inputs maps alive with it (V8 keeps one context per scope).
 */
function unitMaker(
  tally: SyncTally,
  id: string,
  info: ServicePortInfo,
  sel: EndpointSelection | undefined,
  gctx: ReturnType<typeof globalContext>,
): () => Unit {
  return () => tally.unit(id, unitOf(servicePortRules(info, sel, gctx)));
}

interface PortInputs {
  readonly info: ServicePortInfo;
  readonly sel: EndpointSelection | undefined;
}

/** Every rule the state says is in a shared or built-in chain is still there (by handle). */
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

/**
 * Chains this mode owns: upstream's fixed names and the service-port chains. Not kubelet's
 * KUBE-FIREWALL: we fill it while running (as upstream, with the same martian drop kubelet
 * writes), but like upstream's cleanup we never delete it or the jumps to it.
 */
export function isOurs(_table: IptTable, chain: string): boolean {
  if (chain === Chain.FIREWALL) return false;
  return FIXED_NAMES.has(chain) || isServicePortChain(chain);
}
