// The nftables proxier: one table per IP family (docs/nftables-ruleset.md).
//
// A full sync (the first, periodic ones, and any after a failure) reads what the kernel
// holds, rewrites the fixed skeleton and the pickers, writes every element that differs and
// deletes what no Service wants any more, in as few batches as the socket allows. A partial
// sync touches only the service ports the model says changed, from the mirror of what the
// last sync committed, in one batch: never a re-listing of the table (upstream's per-sync
// listing costs a minute at 44k Services).

import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, EndpointSelection, ServicePortId, ServicePortInfo } from '../../model/index.ts';
import type { NftElement, NftInterface, NftTransaction } from '../../netlink/nftables/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { Proxier, SyncReport } from '../types.ts';
import { ElementIndex, emptyDelta } from './elements.ts';
import type { Contribution, ElementDelta } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import { traitsOf } from './family.ts';
import { cidrContainsText } from './cidr-match.ts';
import { CHAIN, isAffinitySet, isEndpointsMap, isPickChain, isPortChain, SET } from './names.ts';
import { planPort } from './port-plan.ts';
import type { PlanContext, PortPlan } from './port-plan.ts';
import { endpointsMap, pickerMaps, pickerName, pickerRules } from './pickers.ts';
import type { PickerSpec } from './pickers.ts';
import { skeletonChains, skeletonRules, skeletonSets } from './skeleton.ts';
import { applyGroups, estimateTransaction, OpGroup } from './op-group.ts';
import { RefCounts } from './ref-counts.ts';

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
}

export class NftablesProxier implements Proxier {
  readonly mode = 'nftables' as const;
  private readonly nft: NftInterface;
  private readonly log: Logger;
  private readonly traits: FamilyTraits;
  private readonly mark: number;
  private readonly localAddresses: (() => Promise<readonly string[]>) | undefined;
  private readonly now: () => number;
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

  constructor(opts: NftablesProxierOptions) {
    this.nft = opts.nft;
    this.log = opts.logger.child({ proxier: 'nftables', family: opts.nft.scope.family });
    const fam = opts.nft.scope.family;
    if (fam !== 'ip' && fam !== 'ip6') throw new Error(`the nftables proxier needs an ip or ip6 table, not ${fam}`);
    this.traits = traitsOf(fam === 'ip' ? 'IPv4' : 'IPv6');
    const bit = opts.masqueradeBit ?? 14;
    if (!Number.isInteger(bit) || bit < 0 || bit > 31) throw new RangeError(`masqueradeBit ${bit} is not in 0..31`);
    this.mark = (1 << bit) >>> 0;
    this.localAddresses = opts.localAddresses;
    this.now = opts.now ?? (() => performance.now());
    this.batchBudget = opts.maxBatchBytes === undefined ? Infinity : Math.max(4096, Math.floor(opts.maxBatchBytes / 2));
  }

  async sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    if (desired.family !== this.traits.ipFamily) throw new Error(`a ${this.traits.ipFamily} proxier was given ${desired.family} state`);
    const full = this.needFull || change.full;
    this.needFull = true; // until this sync succeeds
    const report = full ? await this.fullSync(desired, signal) : await this.partialSync(desired, change, signal);
    this.needFull = false;
    return report;
  }

  private planContext(desired: DesiredState): PlanContext {
    const d = desired.masquerade.detectLocal;
    const cidrBased = (d.mode === 'ClusterCIDR' || d.mode === 'NodeCIDR') && d.implemented && d.cidrs.length > 0;
    return { traits: this.traits, masqueradeAll: desired.masquerade.all, detectLocal: cidrBased, masqueradeMark: this.mark };
  }

  private inputsOf(desired: DesiredState, id: ServicePortId): PortInputs | undefined {
    const info = desired.services.get(id);
    return info && { info, sel: desired.selections.get(id) };
  }

  private plan(inputs: PortInputs | undefined): PortPlan | undefined {
    return inputs && planPort(this.ctx!, inputs.info, inputs.sel);
  }

  /** A picker's chain and the maps it reads, created when its first user appears. */
  private createPicker(g: OpGroup, spec: PickerSpec, existingSets: ReadonlySet<string>, existingChains: ReadonlySet<string>): void {
    for (const m of pickerMaps(spec)) if (!existingSets.has(m)) g.add(endpointsMap(this.traits, m));
    const chain = pickerName(spec);
    if (!existingChains.has(chain)) g.add({ kind: 'chain', name: chain });
    else g.flush({ kind: 'chain', name: chain });
    for (const r of pickerRules(this.ctx!, spec)) g.add(r);
  }

  /**
   * Rewrites the table to match `desired`, repairing drift. The kernel is read first (chain
   * and set names, the elements of the shared sets and maps), so unchanged elements are left
   * alone. Work is cut into batches that fit the socket (and keep each commit short), in an
   * order that never shows a half-wired Service: the skeleton and every picker first; then,
   * per service port, its frontends and endpoints in one batch; deletions last.
   */
  private async fullSync(desired: DesiredState, signal: AbortSignal): Promise<SyncReport> {
    const t0 = this.now();
    const errors: string[] = [];
    this.ctx = this.planContext(desired);

    const tk = this.now();
    const { chains: existing, sets: existingSets, elements: inKernel } = await this.readKernel();
    let kernelMs = this.now() - tk;

    const ports = new Map<ServicePortId, PortInputs>();
    const index = new ElementIndex();
    const pickers = new RefCounts<PickerSpec>();
    const delta = emptyDelta();
    const portGroups: OpGroup[] = [];
    const wantedChains = new Set<string>();
    const wantedSets = new Set<string>();
    for (const id of desired.services.keys()) {
      const inputs = this.inputsOf(desired, id)!;
      const plan = this.plan(inputs)!;
      ports.set(id, inputs);
      index.update(id, [], plan.contributions, delta);
      for (const p of plan.pickers) pickers.acquire(pickerName(p), p);
      const g = new OpGroup();
      for (const set of plan.sets) {
        wantedSets.add(set.name);
        if (!existingSets.has(set.name)) g.add(set);
      }
      for (const c of plan.chains) {
        wantedChains.add(c.name);
        if (existing.has(c.name)) g.flush({ kind: 'chain', name: c.name });
        else g.add({ kind: 'chain', name: c.name });
        for (const r of c.rules) g.add(r);
      }
      // Only the elements this port brought into the index: one that several ports share is
      // written once, a conflicting one (the first owner keeps the key) not at all.
      const added = new Set(delta.add);
      for (const c of plan.contributions) {
        if (!added.has(c.element)) continue;
        const k = inKernel.get(c.id);
        if (k && k.value === c.value) continue;
        if (k) g.delete(deletable(k.element));
        g.add(c.element);
      }
      delta.add.length = 0;
      if (g.size > 0) portGroups.push(g);
    }
    errors.push(...delta.conflicts);

    const first = this.skeletonGroup(desired, await this.fixedElements(desired));
    const maps = new Set<string>();
    for (const [, spec] of pickers.entries()) {
      this.createPicker(first, spec, new Set([...existingSets, ...maps]), existing);
      for (const m of pickerMaps(spec)) maps.add(m);
    }
    const last = new OpGroup();
    for (const [id, k] of inKernel) if (!index.has(id)) last.delete(deletable(k.element));
    for (const name of existing) {
      if ((isPortChain(name) && !wantedChains.has(name)) || (isPickChain(name) && !pickers.has(name))) last.removeChain(name);
    }
    for (const name of existingSets) {
      if ((isAffinitySet(name) && !wantedSets.has(name)) || (isEndpointsMap(name) && !maps.has(name))) last.delete({ kind: 'set', name, key: [this.traits.addrType] });
    }
    const groups = [first, ...portGroups, last];

    const planMs = this.now() - t0 - kernelMs;
    const sent = await this.runGroups(groups, signal);
    kernelMs += sent.kernelMs;
    this.ports = ports;
    this.index = index;
    this.pickers = pickers;
    this.maps = maps;
    this.log.debug('full sync', { servicePorts: ports.size, pickers: pickers.size, batches: sent.batches, planMs, kernelMs });
    return { full: true, servicesChanged: ports.size, kernelMs, planMs, errors, batches: sent.batches, longestBatchMs: sent.longestMs };
  }

  /** Chain and set names, and the elements of the sets and maps Services fill, as the kernel holds them. */
  private async readKernel(): Promise<{ chains: Set<string>; sets: Set<string>; elements: Map<string, { element: NftElement; value: string }> }> {
    const elements = new Map<string, { element: NftElement; value: string }>();
    let chains: Set<string>;
    try {
      chains = new Set((await this.nft.listChains()).map((c) => c.name));
    } catch (e) {
      if (isNotFound(e)) return { chains: new Set(), sets: new Set(), elements };
      throw e;
    }
    if (chains.size === 0) return { chains, sets: new Set(), elements };
    const sets = new Set((await this.nft.listSets()).map((s) => s.name));
    for (const set of sets) {
      if (!SHARED_SETS.has(set) && !isEndpointsMap(set)) continue;
      for (const e of await this.nft.listElements(set)) elements.set(elementId(e), { element: e, value: elementValue(e) });
    }
    return { chains, sets, elements };
  }

  /** The table, its sets and maps, the fixed chains and rules, and the node-dependent elements. */
  private skeletonGroup(desired: DesiredState, fixed: readonly NftElement[]): OpGroup {
    const g = new OpGroup();
    g.add({ kind: 'table' });
    const sets = skeletonSets(this.traits);
    for (const s of sets) g.add(s);
    for (const s of sets) if (FIXED_SETS.has(s.name)) g.flush(s);
    const chains = skeletonChains();
    for (const c of chains) g.add(c);
    for (const c of chains) g.flush(c);
    for (const r of skeletonRules({ traits: this.traits, masqueradeMark: this.mark, nodePortsOnAllAddresses: desired.nodePortAddresses.matchAll })) g.add(r);
    for (const e of fixed) g.add(e);
    return g;
  }

  /** Packs groups into transactions under the batch budget and runs them in order. */
  private async runGroups(groups: readonly OpGroup[], signal: AbortSignal): Promise<{ batches: number; kernelMs: number; longestMs: number }> {
    let batches = 0;
    let kernelMs = 0;
    let longestMs = 0;
    let pending: OpGroup[] = [];
    let bytes = 0;
    const send = async (): Promise<void> => {
      if (pending.length === 0) return;
      const tx = this.nft.newTransaction();
      applyGroups(pending, tx);
      pending = [];
      bytes = 0;
      if (tx.size === 0) return;
      const t = this.now();
      await this.run(tx, signal);
      const ms = this.now() - t;
      batches++;
      kernelMs += ms;
      longestMs = Math.max(longestMs, ms);
    };
    for (const g of groups) {
      if (bytes > 0 && bytes + g.bytes > this.batchBudget) await send();
      pending.push(g);
      bytes += g.bytes;
    }
    await send();
    return { batches, kernelMs, longestMs };
  }

  /** Elements of the fixed sets that follow the node and the configuration, not Services. */
  private async fixedElements(desired: DesiredState): Promise<NftElement[]> {
    const out: NftElement[] = [];
    const el = (set: string, key: string): NftElement => ({ kind: 'element', set, key: [key] });
    for (const c of desired.serviceCIDRs) out.push(el(SET.serviceCIDRs, c));
    if (this.ctx?.detectLocal) for (const c of desired.masquerade.detectLocal.cidrs) out.push(el(SET.podCIDRs, c));
    const npa = desired.nodePortAddresses;
    if (!npa.matchAll) {
      const addrs = npa.primary ? [desired.node.primaryIP].filter((a) => a !== '') : ((await this.localAddresses?.()) ?? []);
      for (const a of new Set(addrs)) if (npa.primary || npa.cidrs.some((c) => cidrContainsText(c, a))) out.push(el(SET.nodePortIPs, a));
    }
    return out;
  }

  private async partialSync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    const t0 = this.now();
    const delta: ElementDelta = emptyDelta();
    const g = new OpGroup();
    const pickersBefore = new Map(this.pickers.entries());
    let changed = 0;
    for (const id of change.services) {
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
      this.index.update(id, before?.contributions ?? ([] as Contribution[]), after?.contributions ?? [], delta);
      if (inputs) this.ports.set(id, inputs);
      else this.ports.delete(id);
      changed++;
    }
    // Pickers are few (one per kind and endpoint count): comparing them whole is cheap.
    const maps = new Set<string>();
    for (const [name, spec] of this.pickers.entries()) {
      if (!pickersBefore.has(name)) this.createPicker(g, spec, new Set([...this.maps, ...maps]), new Set());
      for (const m of pickerMaps(spec)) maps.add(m);
    }
    for (const name of pickersBefore.keys()) if (!this.pickers.has(name)) g.removeChain(name);
    for (const m of this.maps) if (!maps.has(m)) g.delete({ kind: 'set', name: m, key: [this.traits.addrType] });
    this.maps = maps;
    for (const e of [...delta.remove, ...delta.replace]) g.delete(deletable(e));
    for (const e of [...delta.replace, ...delta.add]) g.add(e);
    const tx = this.nft.newTransaction();
    applyGroups([g], tx);
    const planMs = this.now() - t0;
    if (estimateTransaction(tx) > this.batchBudget) {
      // Too much for one batch (a mass change): a full sync splits the work safely.
      this.log.info('partial sync too large for one batch; doing a full sync', { operations: tx.size });
      return this.fullSync(desired, signal);
    }
    const tk = this.now();
    if (tx.size > 0) await this.run(tx, signal);
    const kernelMs = this.now() - tk;
    return { full: false, servicesChanged: changed, kernelMs, planMs, errors: delta.conflicts, batches: tx.size > 0 ? 1 : 0, longestBatchMs: kernelMs };
  }

  private async run(tx: NftTransaction, signal: AbortSignal): Promise<void> {
    try {
      await this.nft.run(tx, signal);
    } catch (e) {
      this.log.debug('failed transaction', { transaction: tx.toString() });
      throw e;
    }
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
    this.needFull = true;
  }
}

interface PortInputs {
  readonly info: ServicePortInfo;
  readonly sel: EndpointSelection | undefined;
}

/** A delete needs only the key. */
const deletable = (e: NftElement): NftElement => ({ kind: 'element', set: e.set, key: e.key });

/** Fixed sets whose elements come from service ports (diffed, as the endpoints maps are); the others follow the node (rewritten). */
const SHARED_SETS = new Set<string>([SET.clusterIPs, SET.serviceIPs, SET.serviceNodePorts, SET.noEndpointServices, SET.noEndpointNodePorts, SET.firewallProtected, SET.firewallAllow, SET.hairpin]);
const FIXED_SETS = new Set<string>([SET.nodePortIPs, SET.podCIDRs, SET.serviceCIDRs]);

/** The same text port-plan.ts gives its contributions, from an element read back. */
const elementId = (e: NftElement): string => `${e.set}|${e.key.map(String).join(' . ')}`;
function elementValue(e: NftElement): string {
  const v = e.value;
  if (v === undefined) return '';
  if (Array.isArray(v)) return v.map(String).join(' . ');
  const verdict = v as { verdict: string; chain?: string };
  return verdict.chain !== undefined ? `${verdict.verdict} ${verdict.chain}` : verdict.verdict;
}

export { CHAIN, SET };
