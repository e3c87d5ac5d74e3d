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

import type { Clock } from '../../base/clock.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, EndpointSelection, ServicePortInfo } from '../../model/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { DescribeOptions, PortDescription, Proxier, SyncReport, SysctlWriter, TrafficSample } from '../types.ts';
import { SyncFailedError } from '../types.ts';
import type { CanaryProbe } from '../iptables-nft/canary.ts';
import type { DriftTarget } from '../drift/chain-watch.ts';
import { describeIptPort } from './describe.ts';
import type { IptContext } from './types.ts';
import type { RuleCodec } from '../iptables-nft/codec.ts';
import { FIXED_NAMES, skeletonOf, unitOf } from './desired.ts';
import { globalContext, portContext } from './context.ts';
import type { IptablesOptions } from './context.ts';
import { nodePortIPs } from './node-ips.ts';
import { iptablesTrafficCounters } from './traffic.ts';
import { servicePortRules } from './rules.ts';
import { globalRules } from './global.ts';
import type { Unit, UnitSource } from '../iptables-nft/units.ts';
import { chainId } from '../iptables-nft/units.ts';
import { IptablesNftWriter } from '../iptables-nft/writer.ts';
import { SyncTally } from './sync-tally.ts';
import { Chain, isServicePortChain } from './names.ts';
import type { BatchSender, TableClient } from '../iptables-nft/writer-types.ts';

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
  private readonly now: () => number;
  /** Budgets, batches, the mirror of what was committed and its trust, the canary. */
  private readonly writer: IptablesNftWriter;
  private ctxKey = '';
  /** The node-port addresses the last full sync wrote, sorted and joined. */
  private nodePortKey = '';
  /** The model objects each committed unit was made from (they are never mutated: compared by identity). */
  private inputs = new Map<string, PortInputs>();
  /** The numbers of upstream's iptables metrics (sync-tally.ts). */
  private readonly tally = new SyncTally();
  /** The port context of the last successful sync (describe() makes its units again). */
  private lastCtx: IptContext | undefined;

  constructor(o: IptablesProxierOptions) {
    this.o = o;
    this.log = o.logger.child({ proxier: 'iptables', family: o.family });
    this.now = o.now ?? (() => performance.now());
    this.writer = new IptablesNftWriter({
      clients: o.clients,
      sender: this.tally.watch(o.sender),
      lateSender: o.sender,
      codec: o.codec,
      isOurs,
      logger: this.log,
      ...(o.maxBatchBytes !== undefined ? { maxBatchBytes: o.maxBatchBytes } : {}),
      now: this.now,
      mirror: true,
      ...(o.rewritePeriodMs !== undefined ? { rewritePeriodMs: o.rewritePeriodMs } : {}),
      onPlan: (groups) => this.tally.plan(groups),
      ...(o.clock
        ? {
            canary: {
              chain: Chain.CANARY,
              probe: o.clients,
              clock: o.clock,
              intervalMs: o.canaryIntervalMs ?? 10_000,
            },
          }
        : {}),
    });
  }

  async sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    if (desired.family !== this.o.family)
      throw new Error(`an ${this.o.family} proxier was given ${desired.family} state`);
    const ctx = portContext(desired, this.o);
    const key = JSON.stringify(ctx);
    const trust = this.writer.trust;
    let full = trust.fullDue || change.full || !this.writer.state || key !== this.ctxKey;
    // Full syncs come hourly: a node address moved in or out of nodePortAddresses' CIDRs is
    // looked for by every partial one (one address dump, only with CIDRs).
    const npa = desired.nodePortAddresses;
    if (!full && !npa.matchAll && !npa.primary) {
      const ips = (await nodePortIPs(desired, this.o.localAddresses)).sort().join(',');
      if (ips !== this.nodePortKey) full = true;
    }
    if (await this.writer.canaryGone()) {
      this.log.info('Canary chain gone (someone flushed our tables); full resync');
      full = true;
    }
    const wasTrusted = trust.begin();
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
    trust.succeeded();
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
    if (!this.writer.state) return false;
    const trust = this.writer.trust;
    if (table === undefined || chain === undefined || (what === 'chain' && isOurs(table, chain))) {
      trust.distrustAll();
    } else if (!isOurs(table, chain)) {
      if (jump === undefined || !isOurs(table, jump)) return false;
      trust.due();
    } else if (isServicePortChain(chain)) {
      trust.taint(chainId(table, chain));
    } else {
      trust.due();
    }
    return true;
  }

  private async fullSync(desired: DesiredState, signal: AbortSignal, trustState: boolean): Promise<SyncReport> {
    const t0 = this.now();
    // Taken now: drift announced while this sync runs is for the next one.
    const tainted = this.writer.trust.takeTainted();
    const ips = desired.nodePortAddresses.matchAll ? [] : await nodePortIPs(desired, this.o.localAddresses);
    this.nodePortKey = [...ips].sort().join(',');
    const gctx = globalContext(desired, ips, this.o);
    if (gctx.localhostNodePorts && this.o.sysctl) await this.o.sysctl.set(ROUTE_LOCALNET, 1);
    const skeleton = this.tally.skeleton(skeletonOf(globalRules(gctx)));
    const inputs = new Map<string, PortInputs>();
    const units = this.unitSources(desired, gctx, inputs);
    const r = await this.writer.writeFull({ skeleton, units, trust: trustState, tainted }, signal);
    this.inputs = inputs;
    const total = this.now() - t0;
    return {
      full: true,
      servicesChanged: desired.services.size,
      kernelMs: r.kernelMs,
      planMs: Math.max(0, total - r.kernelMs),
      errors: r.errors,
      batches: r.batches,
      longestBatchMs: r.longestBatchMs,
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
    const r = await this.writer.writePartial(changed, signal, () => {
      for (const id of change.services) {
        const info = desired.services.get(id);
        if (info) this.inputs.set(id, { info, sel: desired.selections.get(id) });
        else this.inputs.delete(id);
      }
    });
    const total = this.now() - t0;
    return {
      full: false,
      servicesChanged: changed.size,
      kernelMs: r.kernelMs,
      planMs: Math.max(0, total - r.kernelMs),
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
    this.writer.watchCanary(kick);
  }

  /** Stops the canary timer. */
  stop(): void {
    this.writer.stop();
  }

  async cleanup(): Promise<void> {
    await this.writer.cleanup();
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

/**
 * Chains this mode owns: upstream's fixed names and the service-port chains. Not kubelet's
 * KUBE-FIREWALL: we fill it while running (as upstream, with the same martian drop kubelet
 * writes), but like upstream's cleanup we never delete it or the jumps to it.
 */
export function isOurs(_table: IptTable, chain: string): boolean {
  if (chain === Chain.FIREWALL) return false;
  return FIXED_NAMES.has(chain) || isServicePortChain(chain);
}
