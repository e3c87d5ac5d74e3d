// The IPVS proxier: virtual servers over generic netlink, ipsets over nfnetlink, VIPs on
// kube-ipvs0 over rtnetlink. One instance per IP family, as upstream.
//
// A sync plans the changed service ports (plan.ts), folds them into the desired index
// (state.ts) and writes only the keys they touched, comparing with the applied mirror (what
// our own calls left in the kernel). A full sync (the first, the periodic one, and any after a
// failure) re-plans every port, re-reads the kernel (services, their destinations, kube-ipvs0
// addresses, the node's addresses, our ipsets) into the mirror and so repairs whatever someone
// changed by hand. An incremental sync reads nothing back: its cost follows the change, not
// the number of Services.
//
// IPVS and ipset have no transactions, so the order of writes is what keeps traffic flowing
// (apply.ts: add before remove, each step's writes pipelined).
//
// Ownership: IPVS services carry no name. As upstream (cleanLegacyService), every address
// virtual server of this family outside excludeCIDRs is ours; fwmark services never are.

import { errorMessage } from '../../base/errors.ts';
import { SerialQueue } from '../../base/serial.ts';
import type { Clock, TimerHandle } from '../../base/clock.ts';
import { cidrContains, parseCIDR, parseIP } from '../../base/ip.ts';
import type { CIDR, IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, LoadBalancing, ServicePortId, ServicePortInfo } from '../../model/index.ts';
import { formatEntry, isSetBusy, isSetNotFound } from '../../netlink/ipset/index.ts';
import type { IpsetClient } from '../../netlink/ipset/index.ts';
import {
  IP_VS_SVC_F_PERSISTENT,
  isDestinationNotFound,
  isFwmarkKey,
  isServiceNotFound,
} from '../../netlink/ipvs/index.ts';
import type { IpvsAddrKey, IpvsClient, IpvsOp } from '../../netlink/ipvs/index.ts';
import { isNoSuchLink } from '../../netlink/route/index.ts';
import type { RouteChange, RouteClient } from '../../netlink/route/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { PortDescription, Proxier, SyncProblem, SyncReport, TrafficSample } from '../types.ts';
import { problemText } from '../types.ts';
import { describeIpvsPort, ipvsTrafficCounters } from './describe.ts';
import { companionChainDrifted, dummyLinkDrift } from './drift.ts';
import { applyTouched } from './apply.ts';
import type { ApplyContext } from './apply.ts';
import { GracefulQueue, gracefulVerdict } from './graceful.ts';
import {
  DEFAULT_HASH_SIZE,
  DEFAULT_MAX_ELEM,
  DEFAULT_SCHEDULER,
  DUMMY_DEVICE,
  KNOWN_SCHEDULERS,
  SETS,
  ipsetName,
} from './names.ts';
import type { SetKey } from './names.ts';
import { destKey, NodePortAddressPicker, planPort, vsKey } from './plan.ts';
import type { PlanContext } from './plan.ts';
import type { CompanionSink } from './companion.ts';
import { companionRules, toIptablesSave } from './rules.ts';
import type { CompanionRules } from './rules.ts';
import { AppliedMirror, DesiredIndex, newTouched } from './state.ts';
import type { AppliedVs, Touched } from './state.ts';
import { ipvsSysctls } from './sysctl.ts';
import { SchedulerProbes } from './scheduler.ts';
import type { SysctlWriter } from '../types.ts';

export interface IpvsProxierOptions {
  readonly family: IPFamily;
  /** --ipvs-scheduler; '' or absent: rr. A name the kernel does not ship is a construction error. */
  readonly scheduler?: string;
  /** --load-balancing: the algorithm of Services without the annotation (rr, mh or lc); absent: the scheduler above. */
  readonly loadBalancing?: LoadBalancing;
  /** --ipvs-strict-arp: arp_ignore=1, arp_announce=2. */
  readonly strictARP?: boolean;
  /** --ipvs-exclude-cidrs: virtual servers on these addresses are never touched. */
  readonly excludeCIDRs?: readonly string[];
  /** --ipvs-tcp-timeout / --ipvs-tcpfin-timeout / --ipvs-udp-timeout in seconds; 0 or absent: leave the kernel's. */
  readonly tcpTimeoutSeconds?: number;
  readonly tcpFinTimeoutSeconds?: number;
  readonly udpTimeoutSeconds?: number;
  /** Longest a drained real server with open connections is kept (default 15 min). */
  readonly gracefulTerminationMs?: number;
  /** How often drained real servers are checked (default 5 s; upstream checks every minute). */
  readonly gracefulCheckIntervalMs?: number;
  /** maxelem of hash sets (default 65536 as upstream; a full set is a named sync error, not a silent drop). */
  readonly ipsetMaxElem?: number;
  readonly ipsetHashSize?: number;
}

export interface IpvsProxierDeps {
  readonly ipvs: IpvsClient;
  readonly ipset: IpsetClient;
  readonly route: RouteClient;
  readonly sysctl: SysctlWriter;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Writes the iptables-nft companion rules (companion.ts) after each sync that changed them;
   * absent: the rules are not written (companionRules() still computes them).
   */
  readonly companion?: CompanionSink;
  /** --iptables-masquerade-bit (default 14), for the companion rules. */
  readonly masqueradeBit?: number;
  /** Monotonic milliseconds for the report's timings, as in the other proxiers; default performance.now. */
  readonly now?: () => number;
}

/** What one sync's kernel calls cost and which failed: made anew per sync, so nothing leaks between syncs. */
interface SyncStats {
  /** Kernel calls, a pipelined burst counting once. */
  ops: number;
  /** Netlink requests, a pipelined burst counting each message. */
  requests: number;
  kernelMs: number;
  errors: SyncProblem[];
  /** Writing the companion rules failed (upstream: its iptables-restore failed). */
  companionFailed: boolean;
}

const newStats = (): SyncStats => ({ ops: 0, requests: 0, kernelMs: 0, errors: [], companionFailed: false });

/** A sync that wrote what it could and failed some kernel calls; the next sync is full. */
export class IpvsSyncError extends Error {
  readonly report: SyncReport;
  constructor(report: SyncReport) {
    super(
      `ipvs sync: ${report.errors.length} kernel operation(s) failed: ${report.errors.slice(0, 5).map(problemText).join('; ')}${report.errors.length > 5 ? ' ...' : ''}`,
    );
    this.name = 'IpvsSyncError';
    this.report = report;
  }
}

/** The probe upstream's CanUseIPVSProxier makes (TEST-NET-2, RFC 5737). */
const PROBE: IpvsAddrKey = { family: 'IPv4', protocol: 'tcp', address: '198.51.100.0', port: 20000 };

const VS_FLAG_MASK = ~(IP_VS_SVC_F_PERSISTENT | 0x0002); /* HASHED is internal */

export class IpvsProxier implements Proxier {
  readonly mode = 'ipvs' as const;
  readonly family: IPFamily;
  readonly scheduler: string;
  private readonly schedulerProbes: SchedulerProbes;
  private readonly opts: IpvsProxierOptions;
  private readonly deps: IpvsProxierDeps;
  private readonly log: Logger;
  private readonly exclude: CIDR[];
  private readonly graceMs: number;
  private readonly checkMs: number;

  private readonly index = new DesiredIndex();
  private mirror = new AppliedMirror();
  private readonly graceful = new GracefulQueue();
  private ctx: PlanContext | undefined;
  /** The companion rules last written (iptables-save text), to skip unchanged ones. */
  private lastRules: string | undefined;
  /**
   * kube-ipvs0's index, learnt on the full sync (a link deleted by hand fails the next call, and that sync's
   * successor is full).
   */
  private link: number | string = DUMMY_DEVICE;
  /**
   * The node's own addresses (not kube-ipvs0's), as the last full sync read them. Upstream's
   * IPVS proxier lists them on every sync, but every upstream sync is a full one. The dump
   * walks every address of the node, kube-ipvs0's VIPs included (rtnetlink cannot leave one
   * link out, and filters by link only on strict-checking sockets), so reading it per sync
   * made a one-endpoint change cost O(Services). Read on full syncs only, an address added
   * to or removed from the node is noticed at the next full sync: at most the sync period
   * later (--ipvs-sync-period, default 30 s), the same bound upstream has while no Service
   * changes, and right after any failed sync. It moves NodePort VSes, which rarely matters
   * sooner: a node's addresses change seldom.
   */
  private nodeAddrs: string[] = [];
  private readonly nodePortPicker = new NodePortAddressPicker();
  private initialized = false;
  private needFull = true;
  private timer: TimerHandle | undefined;
  private readonly serial = new SerialQueue();
  private readonly now: () => number;
  /** The running sync's (or graceful check's) stats; kernelCall and fail add to it. */
  private stats = newStats();
  /** Kernel calls made by the last sync, a pipelined burst counting once (for logs and tests). */
  lastOps = 0;
  /** Netlink requests the last sync's writes and reads sent (a pipelined burst counts each message). */
  lastRequests = 0;

  constructor(opts: IpvsProxierOptions, deps: IpvsProxierDeps) {
    const scheduler = opts.scheduler || DEFAULT_SCHEDULER;
    if (!KNOWN_SCHEDULERS.includes(scheduler)) {
      throw new Error(`unknown IPVS scheduler ${JSON.stringify(scheduler)} (known: ${KNOWN_SCHEDULERS.join(', ')})`);
    }
    this.exclude = (opts.excludeCIDRs ?? []).map((c) => {
      const p = parseCIDR(c);
      if (!p) throw new Error(`invalid IPVS exclude CIDR ${JSON.stringify(c)}`);
      return p;
    });
    this.opts = opts;
    this.deps = deps;
    this.family = opts.family;
    this.scheduler = scheduler;
    this.schedulerProbes = new SchedulerProbes(scheduler);
    this.log = deps.logger.child({ proxier: 'ipvs', family: opts.family });
    this.graceMs = opts.gracefulTerminationMs ?? 15 * 60_000;
    this.checkMs = opts.gracefulCheckIntervalMs ?? 5_000;
    this.now = deps.now ?? (() => performance.now());
  }

  /** Makes and removes a probe virtual server with `scheduler` (upstream's check that it loads). */
  private async probeScheduler(scheduler: string, o: { signal?: AbortSignal }): Promise<void> {
    const { ipvs } = this.deps;
    await ipvs.deleteService(PROBE, o).catch((e: unknown) => {
      if (!isServiceNotFound(e)) throw e;
    });
    await ipvs.addService({ ...PROBE, scheduler }, o);
    await ipvs.deleteService(PROBE, o);
  }

  /**
   * Probes the schedulers these ports ask for that no port asked for before. One the kernel
   * lacks is said once; its ports keep --ipvs-scheduler rather than lose their virtual servers.
   */
  private async probeAskedSchedulers(
    infos: Iterable<ServicePortInfo | undefined>,
    o: { signal?: AbortSignal },
  ): Promise<void> {
    for (const s of this.schedulerProbes.unprobed(infos, this.opts.loadBalancing)) {
      try {
        await this.kernelCall(() => this.probeScheduler(s, o));
        this.schedulerProbes.record(s, true);
      } catch (e) {
        this.schedulerProbes.record(s, false);
        this.log.warn(
          `IPVS scheduler ${s} is unavailable; Services asking for it keep --ipvs-scheduler ${this.scheduler}`,
          { op: 'ipvs-scheduler', scheduler: s, error: errorMessage(e) },
        );
      }
    }
  }

  /** Runs `f` after every earlier sync, check or cleanup: one writer at a time. */
  private exclusive<T>(f: () => Promise<T>): Promise<T> {
    return this.serial.run(f);
  }

  /** Resolves when nothing is running or queued (tests drive the graceful timer with a fake clock). */
  whenIdle(): Promise<void> {
    return this.serial.idle();
  }

  /** Runs one kernel call, timed and counted in the running sync's stats; `requests`: the netlink requests it sends. */
  private async kernelCall<T>(f: () => Promise<T>, requests = 1): Promise<T> {
    const stats = this.stats;
    const t = this.now();
    stats.ops++;
    stats.requests += requests;
    try {
      return await f();
    } finally {
      stats.kernelMs += this.now() - t;
    }
  }

  private fail(what: string, e: unknown): void {
    this.stats.errors.push({ what, cause: e });
    this.log.error('ipvs kernel operation failed', { op: what, error: errorMessage(e) });
  }

  /**
   * Start-up checks and settings; the daemon calls it before serving so that a kernel without
   * IPVS, ipset types or the scheduler stops it with a message naming what is missing. sync()
   * calls it when the daemon did not.
   */
  async init(signal?: AbortSignal): Promise<void> {
    const o = signal ? { signal } : {};
    const { ipvs, ipset, sysctl } = this.deps;
    // IPVS first: without ip_vs, /proc/sys/net/ipv4/vs is missing and a sysctl error would mislead.
    try {
      await ipvs.familyId();
    } catch (e) {
      throw new Error(`IPVS mode is unavailable: ${errorMessage(e)} (is module ip_vs loadable?)`, { cause: e });
    }
    for (const [path, value] of ipvsSysctls(this.opts.strictARP ?? false)) {
      try {
        await sysctl.set(path, value);
      } catch (e) {
        throw new Error(`IPVS mode needs sysctl ${path}=${value}: ${errorMessage(e)}`, { cause: e });
      }
    }
    try {
      await this.probeScheduler(this.scheduler, o);
    } catch (e) {
      throw new Error(`IPVS scheduler ${JSON.stringify(this.scheduler)} is unavailable: ${errorMessage(e)}`, {
        cause: e,
      });
    }
    const fam = this.family === 'IPv6' ? 'inet6' : 'inet';
    for (const type of new Set(SETS.map((s) => s.type))) {
      try {
        await ipset.typeRevision(type, type === 'bitmap:port' ? 'inet' : fam, o);
      } catch (e) {
        throw new Error(
          `IPVS mode needs ipset type ${type}: ${errorMessage(e)} (is module ip_set_${type.replace(/[:,]/g, '_')} loadable?)`,
          { cause: e },
        );
      }
    }
    const t = {
      tcp: this.opts.tcpTimeoutSeconds ?? 0,
      tcpFin: this.opts.tcpFinTimeoutSeconds ?? 0,
      udp: this.opts.udpTimeoutSeconds ?? 0,
    };
    if (t.tcp > 0 || t.tcpFin > 0 || t.udp > 0) await ipvs.setTimeouts(t, o);
    this.initialized = true;
  }

  sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    return this.exclusive(async () => {
      try {
        return await this.doSync(desired, change, signal);
      } catch (e) {
        // Whatever failed (a dump, an abort), the mirror may be behind: re-read the kernel next time.
        this.needFull = true;
        throw e;
      }
    });
  }

  private async doSync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    const started = this.now();
    const stats = (this.stats = newStats());
    if (desired.family !== this.family) throw new Error(`ipvs proxier for ${this.family} got ${desired.family} state`);
    if (!this.initialized) await this.init(signal);
    const full = change.full || this.needFull;
    const o = { signal };

    // The node's addresses decide NodePort VSes and which external IPs are bound: read with
    // kube-ipvs0's on full syncs only (see nodeAddrs).
    let bound: string[] | undefined;
    if (full) {
      const { route } = this.deps;
      // Later address calls name the link by index: no look-up per address.
      this.link = (await this.kernelCall(() => route.ensureLink(DUMMY_DEVICE, 'dummy', o))).link.index;
      const addrs = await this.kernelCall(() => route.linkAndNodeAddresses(this.link, this.family, o));
      this.nodeAddrs = addrs.node;
      bound = addrs.link;
    }
    const nodeAddrs = this.nodeAddrs;
    const npa = desired.nodePortAddresses;
    const nodePortIPs = this.nodePortPicker.pick(npa, nodeAddrs, bound ?? this.mirror.addrs);
    const ctx: PlanContext = {
      family: this.family,
      scheduler: this.scheduler,
      ...(this.opts.loadBalancing === undefined ? {} : { loadBalancing: this.opts.loadBalancing }),
      schedulerUsable: this.schedulerProbes.usable,
      nodePortIPs,
      nodeAddresses: new Set(nodeAddrs),
      primaryIP: desired.node.primaryIP,
    };
    const ctxChanged = !this.ctx || !sameContext(this.ctx, ctx);
    this.ctx = ctx;

    let touched = newTouched();
    const replanAll = full || ctxChanged;
    const ids: Iterable<ServicePortId> = replanAll ? desired.services.keys() : change.services;
    await this.probeAskedSchedulers(replanAll ? desired.services.values() : infosOf(desired, change.services), o);
    const planT = this.now();
    if (replanAll) {
      // Every port is re-planned; ports the index knows that are gone get removed.
      for (const id of [...this.index.ports.keys()])
        if (!desired.services.has(id)) this.index.setPort(id, undefined, touched);
    }
    let planned = 0;
    for (const id of ids) {
      const info = desired.services.get(id);
      this.index.setPort(
        id,
        info ? planPort(info, desired.endpoints.get(id) ?? [], desired.selections.get(id), ctx) : undefined,
        touched,
      );
      planned++;
    }
    let planMs = this.now() - planT;

    if (full) {
      await this.readKernel(bound ?? [], o);
      touched = this.everything();
    }
    await applyTouched(this.applyContext(), touched, o);
    this.scheduleCheck();
    await this.writeCompanion(desired, full, signal);

    const total = this.now() - started;
    planMs = Math.max(planMs, total - stats.kernelMs);
    const report: SyncReport = {
      full,
      servicesChanged: full ? desired.services.size : planned,
      kernelMs: stats.kernelMs,
      planMs,
      errors: stats.errors,
      ...(stats.companionFailed ? { companionFailed: true } : {}),
    };
    this.lastOps = stats.ops;
    this.lastRequests = stats.requests;
    if (stats.errors.length > 0) {
      this.needFull = true;
      throw new IpvsSyncError(report);
    }
    this.needFull = false;
    this.log.debug('ipvs sync done', {
      full,
      services: report.servicesChanged,
      kernelOps: stats.ops,
      kernelRequests: stats.requests,
      kernelMs: Math.round(stats.kernelMs),
      planMs: Math.round(planMs),
    });
    return report;
  }

  /**
   * Rules change only when a set becomes (non-)empty or the masquerade policy moves: written then, and on full syncs.
   */
  private async writeCompanion(desired: DesiredState, full: boolean, signal: AbortSignal): Promise<void> {
    const sink = this.deps.companion;
    if (!sink) return;
    const rules = this.companionRules(
      desired,
      this.deps.masqueradeBit !== undefined ? { masqueradeBit: this.deps.masqueradeBit } : {},
    );
    const text = toIptablesSave(rules);
    if (!full && text === this.lastRules) return;
    try {
      await this.kernelCall(() => sink.write(rules, signal));
      this.lastRules = text;
    } catch (e) {
      this.lastRules = undefined;
      this.stats.companionFailed = true;
      this.fail('write companion rules', e);
    }
  }

  /**
   * The drift watch (drift/chain-watch.ts): whether a change someone else made to `chain` of
   * `table` (undefined: the table or anything; `jump`: where a removed rule jumped) concerns our
   * companion rules (drift.ts).
   */
  drifted(table?: IptTable, chain?: string, _what?: 'rule' | 'chain', jump?: string): boolean {
    return companionChainDrifted(this.lastRules !== undefined, table, chain, jump);
  }

  /** The link drift watch (drift/link-watch.ts): what a removal by someone else undid of kube-ipvs0 (drift.ts). */
  linkDrifted(c?: RouteChange): string | undefined {
    const linkIndex = typeof this.link === 'number' ? this.link : undefined;
    return dummyLinkDrift({ linkIndex, wants: (a) => this.index.addrs.has(a) }, c);
  }

  /** Every key of the index and the mirror: what a full sync compares. */
  private everything(): Touched {
    const t = newTouched();
    for (const k of this.index.vss.map.keys()) t.vss.add(k);
    for (const k of this.mirror.vss.keys()) t.vss.add(k);
    for (const a of this.index.addrs.map.keys()) t.addrs.add(a);
    for (const a of this.mirror.addrs) t.addrs.add(a);
    for (const s of SETS) {
      const keys = new Set<string>();
      for (const k of this.index.entries.get(s.key)?.map.keys() ?? []) keys.add(k);
      for (const k of this.mirror.entries.get(s.key)?.keys() ?? []) keys.add(k);
      t.entries.set(s.key, keys);
    }
    return t;
  }

  private ours(addr: IpvsAddrKey): boolean {
    if (addr.family !== this.family) return false;
    const ip = parseIP(addr.address);
    return !!ip && !this.exclude.some((c) => cidrContains(c, ip));
  }

  private applyContext(): ApplyContext {
    const { ipvs, ipset, route, clock } = this.deps;
    return {
      ipvs,
      ipset,
      route,
      clock,
      family: this.family,
      link: this.link,
      index: this.index,
      mirror: this.mirror,
      graceful: this.graceful,
      kernelCall: (f, requests) => this.kernelCall(f, requests),
      fail: (what, e) => this.fail(what, e),
    };
  }

  /**
   * Full sync: make sure the sets exist, then read services, destinations and set members
   * into a new mirror. `bound`: kube-ipvs0's addresses, read with the node's (doSync).
   */
  private async readKernel(bound: readonly string[], o: { signal: AbortSignal }): Promise<void> {
    const { ipvs, ipset } = this.deps;
    const fam = this.family === 'IPv6' ? 'inet6' : 'inet';
    const mirror = new AppliedMirror();
    for (const s of SETS) {
      const name = ipsetName(s.key, this.family);
      try {
        await this.kernelCall(() =>
          ipset.create(name, s.type, {
            ...(s.type === 'bitmap:port'
              ? { portRange: { from: 0, to: 65535 } }
              : {
                  family: fam,
                  hashSize: this.opts.ipsetHashSize ?? DEFAULT_HASH_SIZE,
                  maxElem: this.opts.ipsetMaxElem ?? DEFAULT_MAX_ELEM,
                }),
            comment: true,
            exist: true,
            ...o,
          }),
        );
        const [info] = await this.kernelCall(() => ipset.list(name, o));
        const m = mirror.set(s.key);
        for (const e of info?.entries ?? []) m.set(formatEntry(e), e);
      } catch (e) {
        this.fail(`ensure ipset ${name}`, e);
      }
    }
    const services = await this.kernelCall(() => ipvs.listServices(o));
    for (const s of services) {
      if (isFwmarkKey(s)) continue;
      const addr: IpvsAddrKey = { family: s.family, protocol: s.protocol, address: s.address, port: s.port };
      if (!this.ours(addr)) continue;
      const vs: AppliedVs = {
        addr,
        scheduler: s.scheduler,
        flags: s.flags & VS_FLAG_MASK,
        timeout: s.timeout,
        dests: new Map(),
      };
      try {
        for (const d of await this.kernelCall(() => ipvs.listDestinations(addr, o)))
          vs.dests.set(destKey(d.address, d.port), { address: d.address, port: d.port, weight: d.weight });
      } catch (e) {
        if (!isServiceNotFound(e)) throw e;
        continue;
      }
      mirror.vss.set(vsKey(addr), vs);
    }
    for (const a of bound) mirror.addrs.add(a);
    this.mirror = mirror;
    for (const t of this.graceful.list()) {
      const vs = mirror.vss.get(t.vsKey);
      if (!vs?.dests.has(t.destKey)) this.graceful.delete(t.vsKey, t.destKey);
    }
  }

  private scheduleCheck(): void {
    if (this.timer || this.graceful.size === 0) return;
    this.timer = this.deps.clock.setTimer(this.checkMs, () => {
      this.timer = undefined;
      this.exclusive(() => this.checkGraceful()).catch((e: unknown) =>
        this.log.error('graceful termination check failed', { error: errorMessage(e) }),
      );
    });
  }

  /**
   * Deletes drained real servers that have no connections left or whose grace period is over.
   * The counters need one destination dump per virtual server with draining servers; the
   * deletes of all of them then go out pipelined (IpvsClient.applyMany), not one by one.
   */
  private async checkGraceful(): Promise<void> {
    this.stats = newStats();
    try {
      const now = this.deps.clock.now();
      const ops: IpvsOp[] = [];
      const of: { vk: string; vs: AppliedVs; dk: string; connections: number; since: number }[] = [];
      for (const [vk, items] of this.graceful.byVs()) {
        const vs = this.mirror.vss.get(vk);
        if (!vs) {
          this.graceful.dropVs(vk);
          continue;
        }
        let dests;
        try {
          dests = await this.kernelCall(() => this.deps.ipvs.listDestinations(vs.addr));
        } catch (e) {
          if (isServiceNotFound(e)) {
            this.graceful.dropVs(vk);
            continue;
          }
          throw e;
        }
        const byKey = new Map(dests.map((x) => [destKey(x.address, x.port), x]));
        for (const t of items) {
          const d = byKey.get(t.destKey);
          const verdict = gracefulVerdict(d, t, now, this.graceMs);
          if (verdict === 'wait') continue;
          if (verdict === 'gone') {
            vs.dests.delete(t.destKey);
            this.graceful.delete(vk, t.destKey);
            continue;
          }
          ops.push({ op: 'delete-destination', service: vs.addr, destination: { address: t.address, port: t.port } });
          of.push({ vk, vs, dk: t.destKey, connections: d ? d.activeConns + d.inactiveConns : 0, since: t.since });
        }
      }
      if (ops.length === 0) return;
      const results = await this.kernelCall(() => this.deps.ipvs.applyMany(ops), ops.length);
      results.forEach((e, i) => {
        const { vk, vs, dk, connections, since } = of[i]!;
        if (e && !isDestinationNotFound(e) && !isServiceNotFound(e)) {
          // Stays queued: the next tick tries again.
          this.log.warn('deleting a drained real server failed', { vs: vk, dest: dk, error: errorMessage(e) });
          return;
        }
        vs.dests.delete(dk);
        this.graceful.delete(vk, dk);
        if (!e) this.log.debug('drained real server deleted', { vs: vk, dest: dk, connections, afterMs: now - since });
      });
    } finally {
      // Even after a failed check: the queue is retried on the next tick.
      this.scheduleCheck();
    }
  }

  /** Real servers being drained, for tests and debugging. */
  terminating(): { vs: string; dest: string; since: number }[] {
    return this.graceful.list().map((t) => ({ vs: t.vsKey, dest: t.destKey, since: t.since }));
  }

  /** The ipsets and their desired entries count, and the LB no-node-access entries: input for the companion rules. */
  rulesInput(): { nonEmptySets: Set<SetKey>; noNodeAccess: ReturnType<DesiredIndex['noNodeAccess']> } {
    return { nonEmptySets: this.index.nonEmptySets(), noNodeAccess: this.index.noNodeAccess() };
  }

  /**
   * The iptables-nft companion rules for the state of the last sync (rules.ts); the companion sink
   * (companion.ts) writes them.
   */
  companionRules(desired: DesiredState, opts: { masqueradeBit?: number; randomFully?: boolean } = {}): CompanionRules {
    return companionRules({
      family: this.family,
      ...this.rulesInput(),
      masqueradeAll: desired.masquerade.all,
      detectLocal: desired.masquerade.detectLocal,
      ...(opts.masqueradeBit !== undefined ? { masqueradeBit: opts.masqueradeBit } : {}),
      ...(opts.randomFully !== undefined ? { randomFully: opts.randomFully } : {}),
    });
  }

  /** explain: the port's virtual and real servers read back from the kernel, beside the last plan. */
  describe(info: ServicePortInfo): Promise<PortDescription> {
    return describeIpvsPort(this.deps.ipvs, info, this.index.ports.get(info.id), this.ctx);
  }

  /** The kernel's stats of every planned virtual server (opt-in per-Service metrics). */
  trafficCounters(): Promise<readonly TrafficSample[]> {
    return ipvsTrafficCounters(this.deps.ipvs, this.index.ports, this.ctx);
  }

  /** Removes our virtual servers, ipsets and kube-ipvs0; leaves every other object alone. */
  cleanup(): Promise<void> {
    return this.exclusive(async () => {
      this.timer?.cancel();
      this.timer = undefined;
      this.graceful.clear();
      const { ipvs, ipset, route } = this.deps;
      const problems: string[] = [];
      // Rules first: they reference the sets, which cannot be destroyed while referenced.
      if (this.deps.companion) {
        await this.deps.companion
          .remove()
          .catch((e: unknown) => problems.push(`remove companion rules: ${errorMessage(e)}`));
        this.lastRules = undefined;
      }
      try {
        const ours: IpvsAddrKey[] = [];
        for (const s of await ipvs.listServices()) if (!isFwmarkKey(s) && this.ours(s)) ours.push(s);
        const ops = ours.map((s): IpvsOp => ({ op: 'delete-service', service: s }));
        (await ipvs.applyMany(ops)).forEach((e, i) => {
          if (e && !isServiceNotFound(e)) problems.push(`delete ipvs service ${vsKey(ours[i]!)}: ${errorMessage(e)}`);
        });
      } catch (e) {
        problems.push(`list or delete ipvs services: ${errorMessage(e)}`);
      }
      for (const s of SETS) {
        const name = ipsetName(s.key, this.family);
        await ipset.destroy(name).catch((e: unknown) => {
          if (isSetNotFound(e)) return;
          problems.push(
            `destroy ipset ${name}: ${errorMessage(e)}${isSetBusy(e) ? ' (still referenced by a rule)' : ''}`,
          );
        });
      }
      await route.deleteLink(DUMMY_DEVICE).catch((e: unknown) => {
        if (!isNoSuchLink(e)) problems.push(`delete link ${DUMMY_DEVICE}: ${errorMessage(e)}`);
      });
      this.index.clear();
      this.mirror = new AppliedMirror();
      this.ctx = undefined;
      this.link = DUMMY_DEVICE;
      this.needFull = true;
      if (problems.length > 0) throw new Error(`ipvs cleanup: ${problems.join('; ')}`);
    });
  }
}

function* infosOf(desired: DesiredState, ids: Iterable<ServicePortId>): Iterable<ServicePortInfo | undefined> {
  for (const id of ids) yield desired.services.get(id);
}

function sameContext(a: PlanContext, b: PlanContext): boolean {
  if (
    a.primaryIP !== b.primaryIP ||
    a.loadBalancing !== b.loadBalancing ||
    a.nodePortIPs.length !== b.nodePortIPs.length ||
    a.nodeAddresses.size !== b.nodeAddresses.size
  )
    return false;
  for (let i = 0; i < a.nodePortIPs.length; i++) if (a.nodePortIPs[i] !== b.nodePortIPs[i]) return false;
  for (const x of a.nodeAddresses) if (!b.nodeAddresses.has(x)) return false;
  return true;
}
