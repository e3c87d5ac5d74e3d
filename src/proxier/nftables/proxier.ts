// The nftables proxier: one table per IP family (docs/nftables-ruleset.md).
//
// A full sync (the first, hourly ones, and any after a failure or drift) reads what the kernel
// holds, rewrites the fixed skeleton and the pickers, writes every element that differs and
// deletes what no Service wants any more, in as few batches as the socket allows. A partial
// sync touches only the service ports the model says changed, from the mirror of what the
// last sync committed, in one batch: never a re-listing of the table (upstream's per-sync
// listing costs a minute at 44k Services).

import type { Logger } from '../../base/logger.ts';
import { masqueradeMark, nodePortIPsOf } from '../../model/index.ts';
import type {
  ChangeSet,
  DesiredState,
  EndpointSelection,
  LoadBalancing,
  ServicePortId,
  ServicePortInfo,
} from '../../model/index.ts';
import { isLoopback, parseIP } from '../../base/ip.ts';
import type { NftElement, NftInterface, NftTransaction } from '../../netlink/nftables/index.ts';
import { isExists, isNotFound } from '../../netlink/core/index.ts';
import type {
  ArrivingChanges,
  DescribeOptions,
  PortDescription,
  Proxier,
  SyncProblem,
  SyncReport,
  TrafficSample,
} from '../types.ts';
import { describeNftPort } from './describe.ts';
import { ElementIndex, emptyDelta, keyText, NO_ELEMENTS } from './elements.ts';
import type { ElementDelta } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import { traitsOf } from './family.ts';
import { cidrContainsText } from './cidr-match.ts';
import {
  CHAIN,
  isAffinitySet,
  isBalancingMap,
  isEndpointsMap,
  isPickChain,
  isPortChain,
  PORT_SETS,
  SET,
  TRAFFIC_SETS,
} from './names.ts';
import { planPort } from './port-plan.ts';
import type { PlanContext, PortPlan } from './port-plan.ts';
import { endpointsMap, pickerMaps, pickerName, pickerRules } from './pickers.ts';
import type { PickerSpec } from './pickers.ts';
import {
  localhostNodePortsSet,
  localhostRejectComment,
  skeletonChains,
  skeletonRules,
  skeletonSets,
} from './skeleton.ts';
import { readTrafficCounters, trafficSets } from './traffic.ts';
import { applyGroups, estimateTransaction, OpGroup } from './op-group.ts';
import { RefCounts } from './ref-counts.ts';
import { BatchSender, isRefusal, ServicePortRefusedError } from './batch-sender.ts';
import { EarlyChanges } from './early-changes.ts';
import type { KernelRead } from './early-changes.ts';

export interface NftablesProxierOptions {
  /** A client bound to (ip|ip6, "kube-proxy-ts"): NftClient for the kernel, FakeNft in tests. */
  nft: NftInterface;
  logger: Logger;
  /** Bit of the packet mark that asks for masquerading (upstream default 14). */
  masqueradeBit?: number;
  /** The node's addresses of this family, for nodePortAddresses that are not "all". */
  localAddresses?: () => Promise<readonly string[]>;
  /** Monotonic milliseconds, for the report's timings. */
  now?: () => number;
  /**
   * The largest batch the socket takes (NetlinkTransport.maxBatchBytes). Full syncs are cut
   * into batches of at most half of it. Unlimited when absent (FakeNft).
   */
  maxBatchBytes?: number;
  /** --service-traffic-metrics: count each Service port's traffic in the table (traffic.ts). */
  serviceTraffic?: boolean;
  /** Told when a full sync starts (true) and ends (false): the drift watch stops listening meanwhile. */
  onFullSync?: (running: boolean) => void;
  /**
   * KubeProxyNFTablesLocalhostNodePorts: loopback node ports are served by the daemon's
   * userspace proxy (localhost-nodeports.ts), so a loopback nodePortAddresses is not warned about.
   */
  localhostNodePorts?: boolean;
  /** --load-balancing: the node default for Services without the annotation (unset: random, as upstream). */
  loadBalancing?: LoadBalancing;
  /**
   * The same table through a second socket, for a full sync's reads of the kernel. The kernel
   * takes a while to dump a large set (it walks the set from its start for every reply: about
   * 0.3 s for a 100,000-element map in 64 KiB replies, 1.3 s in 4 KiB ones), and a socket
   * carries one exchange at a time: on their own socket the dumps do not hold the changes the
   * full sync lets through meanwhile, which go out on `nft`'s. Default: `nft` (they wait).
   */
  reader?: NftInterface;
}

export class NftablesProxier implements Proxier {
  readonly mode = 'nftables' as const;
  private readonly nft: NftInterface;
  private readonly reader: NftInterface;
  private readonly log: Logger;
  private readonly traits: FamilyTraits;
  private readonly mark: number;
  private readonly localAddresses: (() => Promise<readonly string[]>) | undefined;
  private readonly now: () => number;
  private readonly serviceTraffic: boolean;
  private readonly onFullSync: ((running: boolean) => void) | undefined;
  private readonly localhostNodePorts: boolean;
  private readonly loadBalancing: LoadBalancing | undefined;
  /**
   * What each programmed service port was planned from (objects the model holds anyway).
   * Its plan is computed again when it changes, rather than kept: plans are pure, and a
   * large cluster's plans would double the daemon's memory.
   */
  private ports = new Map<ServicePortId, PortInputs>();
  private index = new ElementIndex();
  /** How many service ports use each picker (by chain name), and how many pickers each endpoints map. */
  private pickers = new RefCounts<PickerSpec>();
  /** The endpoints maps the pickers read. */
  private maps = new Set<string>();
  private ctx: PlanContext | undefined;
  private needFull = true;
  private readonly batchBudget: number;
  /** The loopback-covering nodePortAddresses CIDRs last warned about ('' for none). */
  private localhostWarned = '';
  /** The node-port-ips the last full sync wrote, joined (nodePortIPsMoved). */
  private nodePortKey = '';
  /**
   * Service ports the kernel refused, with the inputs it refused: skipped by full syncs until
   * they change (a partial sync that touches one tries it again).
   */
  private refused = new Map<ServicePortId, PortInputs>();

  constructor(opts: NftablesProxierOptions) {
    this.nft = opts.nft;
    this.reader = opts.reader ?? opts.nft;
    this.log = opts.logger.child({ proxier: 'nftables', family: opts.nft.scope.family });
    const fam = opts.nft.scope.family;
    if (fam !== 'ip' && fam !== 'ip6') throw new Error(`the nftables proxier needs an ip or ip6 table, not ${fam}`);
    this.traits = traitsOf(fam === 'ip' ? 'IPv4' : 'IPv6');
    this.mark = masqueradeMark(opts.masqueradeBit);
    this.localAddresses = opts.localAddresses;
    this.now = opts.now ?? (() => performance.now());
    this.serviceTraffic = opts.serviceTraffic ?? false;
    this.onFullSync = opts.onFullSync;
    this.localhostNodePorts = opts.localhostNodePorts ?? false;
    this.loadBalancing = opts.loadBalancing;
    this.batchBudget = opts.maxBatchBytes === undefined ? Infinity : Math.max(4096, Math.floor(opts.maxBatchBytes / 2));
  }

  async sync(
    desired: DesiredState,
    change: ChangeSet,
    signal: AbortSignal,
    arriving?: ArrivingChanges,
  ): Promise<SyncReport> {
    if (desired.family !== this.traits.ipFamily)
      throw new Error(`a ${this.traits.ipFamily} proxier was given ${desired.family} state`);
    const full = this.needFull || change.full;
    this.needFull = true; // until this sync succeeds
    const report = full
      ? await this.fullSync(desired, signal, arriving)
      : await this.partialSync(desired, change, signal, arriving);
    this.needFull = false;
    return report;
  }

  /** explain: the port's objects read back from the kernel, and what the last sync planned for it. */
  describe(info: ServicePortInfo, opts?: DescribeOptions): Promise<PortDescription> {
    return describeNftPort(this.nft, info, this.ctx && this.plan(this.ports.get(info.id)), opts);
  }

  /** The traffic counters of every programmed service port (--service-traffic-metrics only). */
  async trafficCounters(): Promise<readonly TrafficSample[]> {
    if (!this.serviceTraffic) return [];
    return readTrafficCounters(
      this.nft,
      [...this.ports.values()].map((p) => p.info),
    );
  }

  private planContext(desired: DesiredState): PlanContext {
    const d = desired.masquerade.detectLocal;
    const ctx = {
      traits: this.traits,
      masqueradeAll: desired.masquerade.all,
      masqueradeMark: this.mark,
      nodeIP: desired.node.primaryIP,
      serviceTraffic: this.serviceTraffic,
      localhostNodePorts: this.localhostNodePorts && desired.nodePortAddresses.localhost,
      ...(this.loadBalancing !== undefined ? { loadBalancing: this.loadBalancing } : {}),
    };
    if (d.implemented && (d.mode === 'BridgeInterface' || d.mode === 'InterfaceNamePrefix') && d.interfaceName !== '') {
      // nft's wildcard ("veth*") matches every interface whose name starts with the prefix.
      const localInterface = d.mode === 'InterfaceNamePrefix' ? `${d.interfaceName}*` : d.interfaceName;
      return { ...ctx, detectLocal: true, localInterface };
    }
    const cidrBased = (d.mode === 'ClusterCIDR' || d.mode === 'NodeCIDR') && d.implemented && d.cidrs.length > 0;
    return { ...ctx, detectLocal: cidrBased };
  }

  private inputsOf(desired: DesiredState, id: ServicePortId): PortInputs | undefined {
    const info = desired.services.get(id);
    return info && { info, sel: desired.selections.get(id) };
  }

  private plan(inputs: PortInputs | undefined): PortPlan | undefined {
    return inputs && planPort(this.ctx!, inputs.info, inputs.sel);
  }

  /** A picker's chain and the maps it reads, created when its first user appears. */
  private createPicker(
    g: OpGroup,
    spec: PickerSpec,
    mapExists: (name: string) => boolean,
    existingChains: ReadonlySet<string>,
  ): void {
    for (const m of pickerMaps(spec)) if (!mapExists(m)) g.add(endpointsMap(this.traits, m));
    const chain = pickerName(spec);
    if (!existingChains.has(chain)) g.add({ kind: 'chain', name: chain });
    else g.flush({ kind: 'chain', name: chain });
    for (const r of pickerRules(this.ctx!, spec)) g.add(r);
  }

  /**
   * Rewrites the table to match `desired`, repairing drift. The kernel is read first (chain
   * and set names, the elements of the shared sets and maps), so unchanged elements are left
   * alone. Work is cut into batches that fit the socket (and keep each commit short), in an
   * order that never shows a half-wired Service: the skeleton first; then, per service
   * port, its frontends and endpoints in one batch, with the pickers they are the first to
   * need; deletions last. Batches are sent as they fill up, so that a large cluster's
   * operations are never all in memory at once.
   */
  private async fullSync(desired: DesiredState, signal: AbortSignal, arriving?: ArrivingChanges): Promise<SyncReport> {
    this.onFullSync?.(true);
    try {
      return await this.fullSyncRounds(desired, signal, arriving);
    } finally {
      this.onFullSync?.(false);
    }
  }

  private async fullSyncRounds(
    desired: DesiredState,
    signal: AbortSignal,
    arriving: ArrivingChanges | undefined,
  ): Promise<SyncReport> {
    for (const [id, was] of this.refused) {
      const now = this.inputsOf(desired, id);
      if (now?.info !== was.info || now.sel !== was.sel) this.refused.delete(id);
    }
    const problems: SyncProblem[] = [];
    const readAgain = new Set<ServicePortId>();
    // Each round that the kernel refuses a service port ends with it set aside; the next
    // round starts over from what the kernel holds. Bounded: a kernel that refuses
    // everything fails the sync (and the daemon retries) rather than looping.
    for (let round = 0; ; round++) {
      try {
        const report = await this.fullSyncRound(desired, signal, arriving);
        return { ...report, errors: [...problems, ...report.errors], refused: problems.length };
      } catch (e) {
        if (!(e instanceof ServicePortRefusedError) || round >= MAX_REFUSED_PER_SYNC) throw e;
        if (isNotFound(e.cause) && !(await this.tableExists())) {
          // Not the port's fault: our table was deleted while the sync wrote (drift). The
          // next round reads the kernel again and rewrites everything, the port included.
          this.log.debug('our table vanished during the full sync; starting it again', { servicePort: e.id });
          continue;
        }
        if (isExists(e.cause) && this.reader !== this.nft && !readAgain.has(e.id)) {
          // Perhaps not the port's fault either: a read on the reader socket can miss an element
          // that changes applied meanwhile shifted (readKernel), and an add of it is refused
          // when the kernel holds another value. The next round reads again; a second refusal
          // of the same port is its own.
          readAgain.add(e.id);
          this.log.debug('service port refused as existing; reading the kernel again', { servicePort: e.id });
          continue;
        }
        this.refused.set(e.id, this.inputsOf(desired, e.id)!);
        // Reported in the sync's errors (the daemon logs them and counts `refused`).
        problems.push({
          what: `service port ${JSON.stringify(e.id)} refused, skipped until it changes (everything else is programmed)`,
          cause: e.cause,
        });
        this.log.debug('service port refused by the kernel; starting the full sync again without it', {
          servicePort: e.id,
        });
      }
    }
  }

  /** Whether our table is in the kernel now (listing its sets fails with ENOENT when it is not). */
  private async tableExists(): Promise<boolean> {
    try {
      await this.nft.list('set');
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  }

  private async fullSyncRound(
    desired: DesiredState,
    signal: AbortSignal,
    arriving: ArrivingChanges | undefined,
  ): Promise<SyncReport> {
    const t0 = this.now();
    const before = this.ctx;
    this.ctx = this.planContext(desired);

    const tk = this.now();
    // Until this sync writes, the kernel is what the last one left: changes that arrive while
    // it reads are partial syncs against the mirror, and what they did corrects what was read.
    const early = arriving && before && sameContext(before, this.ctx) ? new EarlyChanges() : undefined;
    const read = await this.readKernel(() =>
      early ? this.applyBeforeWriting(desired, arriving!, signal, early) : Promise.resolve(),
    );
    early?.correct(read, (set) => tracked(set, this.serviceTraffic), elementId, elementValue);
    const { chains: existing, sets: existingSets, elements: inKernel } = read;
    const readMs = this.now() - tk;
    const batches = new BatchSender(this.batchBudget, (groups) => this.sendGroups(groups, signal), signal);

    const st: FullSyncState = {
      existingChains: existing,
      existingSets,
      inKernel,
      ports: new Map(),
      index: new ElementIndex(),
      pickers: new RefCounts(),
      maps: new Set(),
      delta: emptyDelta(),
      wantedChains: new Set(),
      wantedSets: new Set(),
    };
    const { ports, index, pickers, maps, delta, wantedChains, wantedSets } = st;
    await batches.push(this.skeletonGroup(desired, await this.fixedElements(desired), existing, existingSets));
    await this.writePorts(st, desired, batches, arriving);

    const last = new OpGroup();
    for (const k of inKernel.values())
      if (!index.wants(k.element.set, k.element.key)) last.delete(deletable(k.element));
    await batches.push(last);
    await batches.flush();
    // Unreferenced chains and sets go in a transaction of their own, as upstream's cleanup:
    // its failure leaves harmless leftovers (retried at the next full sync) and is counted
    // (kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total), not a failed sync.
    const cleanup = new OpGroup();
    for (const name of existing) {
      if ((isPortChain(name) && !wantedChains.has(name)) || (isPickChain(name) && !pickers.has(name)))
        cleanup.removeChain(name);
    }
    for (const name of existingSets) {
      const portSet = isAffinitySet(name) || isBalancingMap(name);
      if ((portSet && !wantedSets.has(name)) || (isEndpointsMap(name) && !maps.has(name)))
        cleanup.delete({ kind: 'set', name, key: [this.traits.addrType] });
    }
    let cleanupFailed = false;
    try {
      await batches.push(cleanup);
      await batches.flush();
    } catch (e) {
      if (signal.aborted) throw e;
      cleanupFailed = true;
      delta.conflicts.push({
        what: 'cleanup of stale chains and sets failed (retried at the next full sync)',
        cause: e,
      });
    }

    const kernelMs = readMs + batches.kernelMs;
    const planMs = this.now() - t0 - kernelMs;
    this.ports = ports;
    this.index = index;
    this.pickers = pickers;
    this.maps = maps;
    for (const c of early?.deferred ?? []) arriving!.applied(c);
    this.log.debug('full sync', {
      servicePorts: ports.size,
      pickers: pickers.size,
      batches: batches.count,
      planMs,
      kernelMs,
      readMs,
      changesWhileReading: early ? early.applied + early.deferred.length : 0,
      ...(read.interrupted > 0 ? { dumpsInterrupted: read.interrupted } : {}),
    });
    return {
      full: true,
      servicesChanged: ports.size,
      kernelMs,
      planMs,
      errors: delta.conflicts,
      batches: batches.count,
      longestBatchMs: batches.longestMs,
      ...(cleanupFailed ? { cleanupFailed } : {}),
    };
  }

  /**
   * Every service port's group, in batches; between batches, the changes that arrived
   * meanwhile (applyArrived). `desired` is live: changes applied in between move it on (a Map
   * iterated while it changes visits what is added and skips what is deleted), and ports they
   * brought in are done.
   */
  private async writePorts(
    st: FullSyncState,
    desired: DesiredState,
    batches: BatchSender,
    arriving: ArrivingChanges | undefined,
  ): Promise<void> {
    const refused = this.refused;
    const between = async (): Promise<void> => {
      if (arriving) await this.applyArrived(st, desired, arriving, batches);
    };
    await batches.flush();
    await between();
    let sliceFrom = this.now();
    let n = 0;
    for (const [id, info] of desired.services) {
      if ((refused.size > 0 && refused.has(id)) || st.ports.has(id)) continue;
      const g = this.portGroup(st, id, info, desired.selections.get(id));
      if (g.size > 0 && !batches.fits(g)) {
        // Awaited only when a batch is due: the loop runs once per service port.
        await batches.flush();
        // Changes waiting are applied now, once every port planned so far is in the kernel.
        if (arriving?.waiting() === true) {
          batches.add(g, id);
          await batches.flush();
          await between();
          sliceFrom = this.now();
          continue;
        }
      }
      if (g.size > 0) batches.add(g, id);
      // A repair of an unchanged table writes little and so sends little: planning alone
      // would hold the event loop for the whole sync. Every SLICE_MS the loop lets the watch
      // streams in, and takes what they brought once what is planned is in the kernel.
      if (++n % 64 !== 0 || this.now() - sliceFrom < SLICE_MS) continue;
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceFrom = this.now();
      if (arriving?.waiting() === true) {
        await batches.flush();
        await between();
      }
    }
  }

  /** One service port's part of a full sync: its plan recorded in `st`, and what the kernel must see (in one batch). */
  private portGroup(
    st: FullSyncState,
    id: ServicePortId,
    info: ServicePortInfo,
    sel: EndpointSelection | undefined,
  ): OpGroup {
    const plan = planPort(this.ctx!, info, sel);
    st.ports.set(id, { info, sel });
    const g = new OpGroup();
    for (const p of plan.pickers) {
      const name = pickerName(p);
      // The first user brings the picker (its maps, chain and rules) into its own batch.
      if (!st.pickers.has(name))
        this.createPicker(g, p, (m) => st.existingSets.has(m) || st.maps.has(m), st.existingChains);
      st.pickers.acquire(name, p);
      for (const m of pickerMaps(p)) st.maps.add(m);
    }
    for (const set of plan.sets) {
      st.wantedSets.add(set.name);
      if (!st.existingSets.has(set.name)) g.add(set);
    }
    for (const c of plan.chains) {
      st.wantedChains.add(c.name);
      if (c.keep && st.existingChains.has(c.name)) continue;
      if (st.existingChains.has(c.name)) g.flush({ kind: 'chain', name: c.name });
      else g.add({ kind: 'chain', name: c.name });
      for (const r of c.rules) g.add(r);
    }
    // Only the elements this port brought into the index: one that several ports share is
    // written once, a conflicting one (the first owner keeps the key) not at all.
    const added = st.delta.add;
    st.index.update(id, NO_ELEMENTS, plan, st.delta);
    for (let i = 0; i < added.length; i++) writeElement(st, g, added[i]!);
    added.length = 0;
    return g;
  }

  /** Changes that arrive while a full sync reads the kernel: a partial sync of the mirror, recorded. */
  private async applyBeforeWriting(
    desired: DesiredState,
    arriving: ArrivingChanges,
    signal: AbortSignal,
    early: EarlyChanges,
  ): Promise<void> {
    if (!arriving.waiting()) return;
    const change = arriving.take();
    if (!change) return;
    const { groups } = this.partialGroups(desired, change);
    const tx = this.nft.newTransaction();
    applyGroups(groups, tx);
    // Too much for one batch: left to the full sync (it writes every port from `desired`).
    if (estimateTransaction(tx) > this.batchBudget) {
      early.deferred.push(change);
      return;
    }
    try {
      if (tx.size > 0) await this.run(tx, signal);
    } catch (e) {
      // Refused (drift the mirror does not know of, which this sync is about to repair):
      // nothing of it was applied, and the full sync writes it.
      if (!isRefusal(e) || signal.aborted) throw e;
      early.deferred.push(change);
      return;
    }
    for (const g of groups) early.effects.push(g.effects());
    early.applied++;
    arriving.applied(change);
  }

  /**
   * Changes that arrived while this full sync runs, applied between its batches (in batches
   * of their own) rather than after it: a port the sync has written is moved from what it
   * wrote to the new plan, a port it has not reached yet is written now as the sync would
   * (and skipped when reached), a port deleted before it was reached has its elements deleted
   * now. Nothing is removed (chains, sets, pickers): the clean-up at the end removes what
   * nobody wants, and `existingChains`/`existingSets`/`inKernel` are kept true for it.
   */
  private async applyArrived(
    st: FullSyncState,
    desired: DesiredState,
    arriving: ArrivingChanges,
    batches: BatchSender,
  ): Promise<void> {
    const change = arriving.take();
    if (!change) return;
    for (const id of change.services) {
      this.refused.delete(id); // changed: tried again
      const inputs = this.inputsOf(desired, id);
      let g: OpGroup;
      if (st.ports.has(id)) g = this.moveWritten(st, id, inputs);
      else if (inputs) g = this.portGroup(st, id, inputs.info, inputs.sel);
      else g = this.dropUnreached(st, id);
      if (g.size === 0) continue;
      if (!batches.fits(g)) await batches.flush();
      batches.add(g, id);
    }
    await batches.flush();
    arriving.applied(change);
  }

  /** A port this full sync has written, changed (or deleted) since: from what it wrote to its new plan. */
  private moveWritten(st: FullSyncState, id: ServicePortId, inputs: PortInputs | undefined): OpGroup {
    const g = new OpGroup();
    const before = this.plan(st.ports.get(id))!;
    const after = this.plan(inputs);
    const oldChains = new Map(before.chains.map((c) => [c.name, c]));
    for (const c of after?.chains ?? []) {
      const old = oldChains.get(c.name);
      oldChains.delete(c.name);
      st.wantedChains.add(c.name);
      if (old?.signature === c.signature) continue;
      if (old || st.existingChains.has(c.name)) g.flush({ kind: 'chain', name: c.name });
      else g.add({ kind: 'chain', name: c.name });
      for (const r of c.rules) g.add(r);
    }
    for (const name of oldChains.keys()) {
      st.wantedChains.delete(name);
      st.existingChains.add(name); // so that the clean-up removes it
    }
    const oldSets = new Set(before.sets.map((x) => x.name));
    for (const x of after?.sets ?? []) {
      st.wantedSets.add(x.name);
      if (!oldSets.delete(x.name) && !st.existingSets.has(x.name)) g.add(x);
    }
    for (const name of oldSets) {
      st.wantedSets.delete(name);
      st.existingSets.add(name);
    }
    for (const p of after?.pickers ?? []) {
      const name = pickerName(p);
      if (!st.pickers.has(name))
        this.createPicker(g, p, (m) => st.existingSets.has(m) || st.maps.has(m), st.existingChains);
      st.pickers.acquire(name, p);
      for (const m of pickerMaps(p)) st.maps.add(m);
    }
    for (const p of before.pickers) {
      const name = pickerName(p);
      st.pickers.release(name);
      if (!st.pickers.has(name)) st.existingChains.add(name);
    }
    const d = emptyDelta();
    st.index.update(id, before, after ?? NO_ELEMENTS, d);
    for (const e of [...d.remove, ...d.replace]) {
      g.delete(deletable(e));
      st.inKernel.delete(elementId(e));
    }
    for (const e of d.replace) g.add(e);
    for (const e of d.add) writeElement(st, g, e);
    st.delta.conflicts.push(...d.conflicts);
    if (inputs) st.ports.set(id, inputs);
    else st.ports.delete(id);
    return g;
  }

  /**
   * A port deleted before this full sync reached it: the elements the last sync wrote for it
   * that the kernel still holds and no port written since wants, deleted now (its chains and
   * sets by the clean-up). The old mirror is this sync's to drop.
   */
  private dropUnreached(st: FullSyncState, id: ServicePortId): OpGroup {
    const g = new OpGroup();
    const old = this.plan(this.ports.get(id));
    this.ports.delete(id);
    if (!old) return g;
    const d = emptyDelta();
    this.index.update(id, old, NO_ELEMENTS, d);
    for (const e of [...d.remove, ...d.replace]) {
      const k = st.inKernel.get(elementId(e));
      if (!k || st.index.wants(e.set, e.key)) continue;
      g.delete(deletable(k.element));
      st.inKernel.delete(elementId(e));
    }
    return g;
  }

  /** Chain and set names, and the elements of the sets and maps Services fill, as the kernel holds them. */
  private async readKernel(between: () => Promise<void>): Promise<KernelRead & { interrupted: number }> {
    const elements = new Map<string, { element: NftElement; value: string }>();
    let chains: Set<string>;
    try {
      chains = new Set((await this.reader.listChains()).map((c) => c.name));
    } catch (e) {
      if (isNotFound(e)) return { chains: new Set(), sets: new Set(), elements, interrupted: 0 };
      throw e;
    }
    if (chains.size === 0) return { chains, sets: new Set(), elements, interrupted: 0 };
    await between();
    // Listed on the writing socket: that client learns the sets' key and data types from it,
    // which it needs to encode elements of a set this process has not made (after a restart).
    const sets = new Set((await this.nft.listSets()).map((s) => s.name));
    await between();
    // On its own socket a dump of elements runs while `between` applies changes. It is no
    // snapshot then: the kernel walks the set again from its start for every reply, skipping
    // what it sent, so an element a change added or deleted meanwhile can shift others past a
    // reply's edge (missed or sent twice), and it does not mark such a dump interrupted (6.18,
    // measured). What the changes did is replayed onto the read (EarlyChanges); an element
    // shifted out of it is written again, which the kernel takes as it is (an add without
    // NLM_F_EXCL; it refuses one only if the kernel's value differs, that is, drift at that
    // very element: fullSyncRounds then reads again). On the writing socket the dump is a
    // snapshot, as before.
    const ownSocket = this.reader !== this.nft;
    let interrupted = 0;
    const onInterrupted = ownSocket ? { onInterrupted: () => interrupted++ } : {};
    let sliceFrom = this.now();
    for (const set of [...sets]) {
      if (!tracked(set, this.serviceTraffic)) continue;
      if (set === SET.localhostNodePorts && !this.ctx?.localhostNodePorts) continue;
      let pages;
      try {
        pages = await this.whileReading(this.reader.listElementPages(set, onInterrupted), ownSocket, between);
      } catch (e) {
        // Deleted since it was listed (by a change applied in between, or by someone else):
        // the sync makes it again if it is still wanted.
        if (!isNotFound(e)) throw e;
        sets.delete(set);
        continue;
      }
      // Decoded a page at a time, so changes need not wait for the decoding of a
      // 100,000-element map either, which takes seconds under load.
      for (const page of pages) {
        const list = page();
        for (let i = 0; i < list.length; i++) {
          const e = list[i]!;
          elements.set(elementId(e), { element: e, value: elementValue(e) });
        }
        if (this.now() - sliceFrom < SLICE_MS) continue;
        await new Promise<void>((resolve) => setImmediate(resolve)); // lets the watch streams in
        await between();
        sliceFrom = this.now();
      }
      await between();
    }
    return { chains, sets, elements, interrupted };
  }

  /** A read in flight on the reader's own socket: changes that arrive meanwhile are applied every SLICE_MS. */
  private async whileReading<T>(read: Promise<T>, ownSocket: boolean, between: () => Promise<void>): Promise<T> {
    if (!ownSocket) return read;
    let settled = false;
    const done = read.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, SLICE_MS)))]);
      clearTimeout(timer);
      if (settled) return read;
      await between();
    }
  }

  /** The table, its sets and maps, the fixed chains and rules, and the node-dependent elements. */
  private skeletonGroup(
    desired: DesiredState,
    fixed: readonly NftElement[],
    existingChains: ReadonlySet<string>,
    existingSets: ReadonlySet<string>,
  ): OpGroup {
    const g = new OpGroup();
    g.add({ kind: 'table' });
    const localhost = this.ctx?.localhostNodePorts ?? false;
    const sets = skeletonSets(this.traits, this.serviceTraffic, localhost);
    for (const s of sets) g.add(s);
    for (const s of sets) if (FIXED_SETS.has(s.name)) g.flush(s);
    const chains = skeletonChains(this.serviceTraffic);
    for (const c of chains) g.add(c);
    for (const c of chains) g.flush(c);
    for (const r of skeletonRules({
      traits: this.traits,
      masqueradeMark: this.mark,
      nodePortsOnAllAddresses: desired.nodePortAddresses.matchAll,
      serviceTraffic: this.serviceTraffic,
      localhostNodePorts: localhost,
    }))
      g.add(r);
    if (!this.serviceTraffic) {
      // Counted before (the flag was on): the counting chains go before the maps they read,
      // and the maps before the traffic chains their elements name (the clean-up's).
      for (const c of [CHAIN.countConnections, CHAIN.countTraffic]) if (existingChains.has(c)) g.removeChain(c);
      for (const s of trafficSets(this.traits)) if (existingSets.has(s.name)) g.delete(s);
    }
    // Made before (the gate was on): its reject rules went with the flush of their chain.
    if (!localhost && existingSets.has(SET.localhostNodePorts)) g.delete(localhostNodePortsSet);
    for (const e of fixed) g.add(e);
    return g;
  }

  /** Writes groups into one transaction and runs it; returns how long the run took (undefined: nothing to send). */
  private async sendGroups(groups: readonly OpGroup[], signal: AbortSignal): Promise<number | undefined> {
    const tx = this.nft.newTransaction();
    applyGroups(groups, tx);
    if (tx.size === 0) return undefined;
    const t = this.now();
    await this.run(tx, signal);
    return this.now() - t;
  }

  /** Elements of the fixed sets that follow the node and the configuration, not Services. */
  private async fixedElements(desired: DesiredState): Promise<NftElement[]> {
    const out: NftElement[] = [];
    const el = (set: string, key: string): NftElement => ({ kind: 'element', set, key: [key] });
    for (const c of desired.serviceCIDRs) out.push(el(SET.serviceCIDRs, c));
    if (this.ctx?.detectLocal && this.ctx.localInterface === undefined)
      for (const c of desired.masquerade.detectLocal.cidrs) out.push(el(SET.podCIDRs, c));
    this.warnLocalhostNodePorts(desired.nodePortAddresses);
    const ips = await this.nodePortIPs(desired);
    this.nodePortKey = ips.join(',');
    for (const a of ips) out.push(el(SET.nodePortIPs, a));
    return out;
  }

  /** The node-port-ips elements: the node's addresses in nodePortAddresses' CIDRs (or its primary IP). */
  private async nodePortIPs(desired: DesiredState): Promise<string[]> {
    const npa = desired.nodePortAddresses;
    if (npa.matchAll) return [];
    const local = [...new Set((await this.localAddresses?.()) ?? [])];
    // Loopback never goes in the set: the kernel would not route it (upstream's neither).
    return nodePortIPsOf(npa, desired.node.primaryIP, local)
      .filter((a) => !isLoopbackAddress(a))
      .sort();
  }

  /**
   * Whether the node's addresses moved in or out of nodePortAddresses' CIDRs since the last
   * full sync wrote them. Asked by partial syncs (the periodic one included), now that full
   * syncs come hourly: one address dump, and only with CIDRs (the primary IP is the Node's,
   * and a Node change makes the sync full anyway).
   */
  private async nodePortIPsMoved(desired: DesiredState): Promise<boolean> {
    const npa = desired.nodePortAddresses;
    if (npa.matchAll || (npa.primary && npa.cidrs.length <= 1) || this.localAddresses === undefined) return false;
    return (await this.nodePortIPs(desired)).join(',') !== this.nodePortKey;
  }

  /**
   * Loopback addresses never take node ports in this mode's ruleset (upstream's neither): without
   * the KubeProxyNFTablesLocalhostNodePorts gate (whose userspace proxy serves them) an explicit
   * CIDR covering them is said once, as upstream logs it, not silently ignored.
   */
  private warnLocalhostNodePorts(npa: DesiredState['nodePortAddresses']): void {
    const lo = this.traits.ipFamily === 'IPv4' ? '127.0.0.1' : '::1';
    const covering = npa.matchAll || this.localhostNodePorts ? [] : npa.cidrs.filter((c) => cidrContainsText(c, lo));
    const key = covering.join(',');
    if (key === this.localhostWarned) return;
    this.localhostWarned = key;
    if (covering.length > 0) {
      this.log.warn(
        '--nodeport-addresses includes localhost but localhost NodePorts are not supported in nftables mode; loopback addresses are left out',
        { cidrs: covering },
      );
    }
  }

  private async partialSync(
    desired: DesiredState,
    change: ChangeSet,
    signal: AbortSignal,
    arriving?: ArrivingChanges,
  ): Promise<SyncReport> {
    if (await this.nodePortIPsMoved(desired)) {
      this.log.info("the node's node-port addresses changed; doing a full sync");
      return this.fullSync(desired, signal, arriving);
    }
    const t0 = this.now();
    const { groups, changed, delta } = this.partialGroups(desired, change);
    const planMs = this.now() - t0;
    let sent: { batches: number; kernelMs: number; longestMs: number };
    try {
      sent = await this.sendPartial(groups, signal);
    } catch (e) {
      if (!isRefusal(e) || signal.aborted) throw e;
      // Refused for its content: a full sync finds the service port it was refused for and
      // programs everything else (the mirror above is rebuilt by it).
      this.log.info('partial sync refused by the kernel; doing a full sync to isolate the cause', { err: e });
      return this.fullSync(desired, signal, arriving);
    }
    return {
      full: false,
      servicesChanged: changed,
      kernelMs: sent.kernelMs,
      planMs,
      errors: delta.conflicts,
      batches: sent.batches,
      longestBatchMs: sent.longestMs,
    };
  }

  /**
   * A partial sync's groups, in order: in one batch when they fit, else in several (a mass
   * change), each atomic on its own. The order keeps every state in between valid: pickers
   * (and their maps) come first, before the ports that use them; each port's objects and
   * elements travel together; what nobody uses any more goes last. Refusals are thrown.
   */
  private async sendPartial(
    groups: readonly OpGroup[],
    signal: AbortSignal,
  ): Promise<{ batches: number; kernelMs: number; longestMs: number }> {
    let bytes = 0;
    for (const g of groups) bytes += g.bytes;
    if (bytes <= this.batchBudget) {
      const ms = await this.sendGroups(groups, signal);
      return { batches: ms === undefined ? 0 : 1, kernelMs: ms ?? 0, longestMs: ms ?? 0 };
    }
    const batches = new BatchSender(this.batchBudget, (gs) => this.sendGroups(gs, signal), signal);
    for (const g of groups) if (g.size > 0) await batches.push(g);
    await batches.flush();
    this.log.debug('partial sync sent in several batches', { groups: groups.length, bytes, batches: batches.count });
    return { batches: batches.count, kernelMs: batches.kernelMs, longestMs: batches.longestMs };
  }

  /**
   * A partial sync's plan: the changed ports moved in the mirror, and what the kernel must
   * see change, as groups to send in order (see sendPartial): new pickers, one group per
   * changed port (its chains, sets and elements), then the pickers and maps no longer used.
   */
  private partialGroups(
    desired: DesiredState,
    change: ChangeSet,
  ): { groups: OpGroup[]; changed: number; delta: ElementDelta } {
    const conflicts: SyncProblem[] = [];
    const first = new OpGroup();
    const groups = [first];
    const pickersBefore = new Map(this.pickers.entries());
    let changed = 0;
    for (const id of change.services) {
      if (this.refused.size > 0) this.refused.delete(id); // changed: tried again
      groups.push(this.changedPortGroup(desired, id, conflicts));
      changed++;
    }
    // Pickers are few (one per kind and endpoint count): comparing them whole is cheap.
    const last = new OpGroup();
    const maps = new Set<string>();
    for (const [name, spec] of this.pickers.entries()) {
      if (!pickersBefore.has(name)) this.createPicker(first, spec, (m) => this.maps.has(m) || maps.has(m), new Set());
      for (const m of pickerMaps(spec)) maps.add(m);
    }
    for (const name of pickersBefore.keys()) if (!this.pickers.has(name)) last.removeChain(name);
    for (const m of this.maps) if (!maps.has(m)) last.delete({ kind: 'set', name: m, key: [this.traits.addrType] });
    this.maps = maps;
    groups.push(last);
    return { groups, changed, delta: { ...emptyDelta(), conflicts } };
  }

  /** One changed port moved in the mirror; its group holds what the kernel must see change. */
  private changedPortGroup(desired: DesiredState, id: ServicePortId, conflicts: SyncProblem[]): OpGroup {
    const g = new OpGroup();
    const delta: ElementDelta = emptyDelta();
    const inputs = this.inputsOf(desired, id);
    const before = this.plan(this.ports.get(id));
    const after = this.plan(inputs);
    const oldChains = new Map((before?.chains ?? []).map((c) => [c.name, c]));
    for (const c of after?.chains ?? []) {
      const old = oldChains.get(c.name);
      oldChains.delete(c.name);
      if (old?.signature === c.signature) continue;
      if (old) g.flush({ kind: 'chain', name: c.name });
      else g.add({ kind: 'chain', name: c.name });
      for (const r of c.rules) g.add(r);
    }
    for (const name of oldChains.keys()) g.removeChain(name);
    const oldSets = new Map((before?.sets ?? []).map((x) => [x.name, x]));
    for (const x of after?.sets ?? []) if (!oldSets.delete(x.name)) g.add(x);
    for (const x of oldSets.values()) g.delete(x);
    // Acquire before releasing, so a picker the port keeps never drops to no users.
    for (const p of after?.pickers ?? []) this.pickers.acquire(pickerName(p), p);
    for (const p of before?.pickers ?? []) this.pickers.release(pickerName(p));
    this.index.update(id, before ?? NO_ELEMENTS, after ?? NO_ELEMENTS, delta);
    if (inputs) this.ports.set(id, inputs);
    else this.ports.delete(id);
    for (const e of [...delta.remove, ...delta.replace]) g.delete(deletable(e));
    for (const e of [...delta.replace, ...delta.add]) g.add(e);
    for (const c of delta.conflicts) conflicts.push(c);
    return g;
  }

  private async run(tx: NftTransaction, signal: AbortSignal): Promise<void> {
    try {
      await this.nft.run(tx, signal);
    } catch (e) {
      // Its first lines only: a full sync's batch is megabytes of text at 50,000 Services, and
      // a refused one is retried (the log must stay readable, and bounded).
      this.log.debug('failed transaction', { transaction: headLines(tx.toString(), FAILED_TX_LINES) });
      throw e;
    }
  }

  /**
   * Packets rejected on loopback node ports since their rules were made, per protocol, read from
   * the rules' counters now (none without the KubeProxyNFTablesLocalhostNodePorts rules).
   */
  async localhostRejectedPackets(): Promise<{ protocol: 'UDP' | 'SCTP'; packets: number }[]> {
    if (!this.localhostNodePorts) return [];
    const out: { protocol: 'UDP' | 'SCTP'; packets: number }[] = [];
    const rules = await this.nft.listRules(CHAIN.filterOutput).catch((err: unknown) => {
      if (isNotFound(err)) return [];
      throw err;
    });
    for (const protocol of ['UDP', 'SCTP'] as const) {
      const r = rules.find((x) => x.comment === localhostRejectComment(protocol));
      const c = r?.exprs.find((e) => e.type === 'counter');
      if (c?.type === 'counter') out.push({ protocol, packets: Number(c.packets ?? 0n) });
    }
    return out;
  }

  async cleanup(): Promise<void> {
    const tx = this.nft.newTransaction();
    tx.delete({ kind: 'table' });
    try {
      await this.nft.run(tx, new AbortController().signal);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    this.ports = new Map();
    this.index = new ElementIndex();
    this.pickers = new RefCounts();
    this.maps = new Set();
    this.refused = new Map();
    this.needFull = true;
  }
}

/** What a full sync accumulates over the service ports, and what it read from the kernel. */
interface FullSyncState {
  /** Also the chains and sets changes applied in between leave to the clean-up (arrived.ts). */
  readonly existingChains: Set<string>;
  readonly existingSets: Set<string>;
  /** Kept true by the changes applied in between: what they delete leaves it. */
  readonly inKernel: Map<string, { element: NftElement; value: string }>;
  readonly ports: Map<ServicePortId, PortInputs>;
  readonly index: ElementIndex;
  readonly pickers: RefCounts<PickerSpec>;
  /** The endpoints maps the pickers read. */
  readonly maps: Set<string>;
  readonly delta: ElementDelta;
  readonly wantedChains: Set<string>;
  readonly wantedSets: Set<string>;
}

interface PortInputs {
  readonly info: ServicePortInfo;
  readonly sel: EndpointSelection | undefined;
}

/** Sets whose elements a full sync reads and diffs (the others are rewritten whole). */
function tracked(set: string, serviceTraffic: boolean): boolean {
  if (!SHARED_SETS.has(set) && !isEndpointsMap(set) && !isBalancingMap(set)) return false;
  // Without the flag the traffic maps are deleted whole (skeletonGroup), not element by element.
  return serviceTraffic || !TRAFFIC_SETS.has(set);
}

/** Plans made in one context hold in the other (the mirror's plans are valid for this sync). */
function sameContext(a: PlanContext, b: PlanContext): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Lines of a refused transaction's text in its debug log line. */
const FAILED_TX_LINES = 200;

/** The first `n` lines of `text`, and how many more there were. */
function headLines(text: string, n: number): string {
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = text.indexOf('\n', at + 1);
    if (at < 0) return text;
  }
  let more = 0;
  for (let i = at; i >= 0; i = text.indexOf('\n', i + 1)) more++;
  return `${text.slice(0, at)}\n… ${more} more lines`;
}

/** How long a full sync plans before it lets I/O in and applies changes that arrived (writePorts). */
const SLICE_MS = 50;

/** Service ports one full sync may set aside before it gives up (and fails, to be retried). */
const MAX_REFUSED_PER_SYNC = 16;

/** A delete needs only the key. */
const deletable = (e: NftElement): NftElement => ({ kind: 'element', set: e.set, key: e.key });

/** An element a full sync wants: written unless the kernel holds it already (another value is replaced). */
function writeElement(st: FullSyncState, g: OpGroup, e: NftElement): void {
  const k = st.inKernel.size > 0 ? st.inKernel.get(elementId(e)) : undefined;
  if (k && k.value === elementValue(e)) return;
  if (k) g.delete(deletable(k.element));
  g.add(e);
}

/**
 * Fixed sets whose elements come from service ports (diffed, as the endpoints maps are); the others follow the node
 * (rewritten).
 */
const SHARED_SETS: ReadonlySet<string> = new Set([...PORT_SETS, SET.hairpin, SET.localhostNodePorts]);
const FIXED_SETS = new Set<string>([SET.nodePortIPs, SET.podCIDRs, SET.serviceCIDRs]);

/** The text port-plan.ts gives its contributions, of any element (ours, or one read back). */
const elementId = (e: NftElement): string => `${e.set}|${keyText(e.key as readonly (string | number)[])}`;
function elementValue(e: NftElement): string {
  const v = e.value;
  if (v === undefined) return '';
  if (Array.isArray(v)) return keyText(v as readonly (string | number)[]);
  const verdict = v as { verdict: string; chain?: string };
  return verdict.chain !== undefined ? `${verdict.verdict} ${verdict.chain}` : verdict.verdict;
}

export { CHAIN, SET };

function isLoopbackAddress(text: string): boolean {
  const ip = parseIP(text);
  return ip !== undefined && isLoopback(ip);
}
