// The nftables proxier: one table per IP family, one nfnetlink batch per sync.
//
// A full sync (the first, periodic ones, and any after a failure) rewrites the table in
// one atomic transaction: the fixed skeleton, every service port's chains, and the
// contents of every set and map (flushed and refilled in the same batch), and deletes
// port chains no Service wants any more. A partial sync touches only the service ports the
// model says changed, from the mirror of what the last sync committed: never a re-listing
// of the table (upstream's per-sync listing costs a minute at 44k Services).

import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, ServicePortId } from '../../model/index.ts';
import type { NftChain, NftElement, NftInterface, NftSetLike, NftTransaction } from '../../netlink/nftables/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { Proxier, SyncReport } from '../types.ts';
import { ElementIndex, emptyDelta } from './elements.ts';
import type { Contribution, ElementDelta } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import { traitsOf } from './family.ts';
import { cidrContainsText } from './cidr-match.ts';
import { CHAIN, isAffinitySet, isPortChain, SET } from './names.ts';
import { blockNeeds, planPort } from './port-plan.ts';
import type { Blocks, PlanContext, PortPlan } from './port-plan.ts';
import { skeletonChains, skeletonRules, skeletonSets } from './skeleton.ts';
import { estimateTransaction, OpGroup } from './op-group.ts';
import { blockSize, SlotAllocator } from './slots.ts';
import type { SlotBlock } from './slots.ts';

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

interface PortState {
  plan: PortPlan;
  blocks: Blocks;
}

export class NftablesProxier implements Proxier {
  readonly mode = 'nftables' as const;
  private readonly nft: NftInterface;
  private readonly log: Logger;
  private readonly traits: FamilyTraits;
  private readonly mark: number;
  private readonly localAddresses: (() => Promise<readonly string[]>) | undefined;
  private readonly now: () => number;
  private ports = new Map<ServicePortId, PortState>();
  private index = new ElementIndex();
  private slots = new SlotAllocator();
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

  private allocate(need: number, previous: SlotBlockOrNone): SlotBlockOrNone {
    if (need === 0) return undefined;
    if (previous && blockSize(previous.order) >= need) return previous;
    return this.slots.allocate(need);
  }

  private planOne(desired: DesiredState, id: ServicePortId, previous: PortState | undefined): PortState | undefined {
    const info = desired.services.get(id);
    if (!info) return undefined;
    const sel = desired.selections.get(id);
    const needs = blockNeeds(info, sel);
    const blocks: Blocks = {};
    const cluster = this.allocate(needs.cluster, previous?.blocks.cluster);
    const local = this.allocate(needs.local, previous?.blocks.local);
    if (cluster) blocks.cluster = cluster;
    if (local) blocks.local = local;
    return { plan: planPort(this.ctx!, info, sel, blocks), blocks };
  }

  private releaseUnused(before: Blocks | undefined, after: Blocks | undefined): void {
    for (const b of [before?.cluster, before?.local]) {
      if (b && b !== after?.cluster && b !== after?.local) this.slots.release(b);
    }
  }

  /**
   * Rewrites the table to match `desired`, repairing drift. The kernel is read first (port
   * chain names, the elements of the shared maps), so unchanged elements are left alone.
   * Work is cut into batches that fit the socket (and keep each commit short), in an order
   * that never shows a half-wired Service: the skeleton first; then, per service port, its
   * chains, endpoint slots and frontends in one batch; deletions last. New endpoint slots are
   * taken outside the ones the kernel holds, so a rule not yet rewritten never points at a
   * slot another Service has taken.
   */
  private async fullSync(desired: DesiredState, signal: AbortSignal): Promise<SyncReport> {
    const t0 = this.now();
    const errors: string[] = [];
    this.ctx = this.planContext(desired);

    const tk = this.now();
    const { chains: existing, sets: existingSets, elements: inKernel } = await this.readKernel();
    let kernelMs = this.now() - tk;

    this.slots = new SlotAllocator();
    const heldByKernel: SlotBlock[] = [];
    for (const k of inKernel.values()) {
      if (k.element.set !== SET.endpoints && k.element.set !== SET.affinitySlots) continue;
      const b = { offset: Number(k.element.key[0]), order: 0 };
      if (this.slots.reserve(b)) heldByKernel.push(b);
    }

    const ports = new Map<ServicePortId, PortState>();
    const index = new ElementIndex();
    const delta = emptyDelta();
    for (const id of desired.services.keys()) {
      const st = this.planOne(desired, id, undefined);
      if (!st) continue;
      ports.set(id, st);
      index.update(id, [], st.plan.contributions, delta);
    }
    errors.push(...delta.conflicts);
    const chosen = new Map<string, string>();
    for (const [id, , value] of index.all()) chosen.set(id, value);

    const groups: OpGroup[] = [this.skeletonGroup(desired, await this.fixedElements(desired))];
    const done = new Set<string>();
    for (const st of ports.values()) {
      const g = new OpGroup();
      for (const set of st.plan.sets) if (!existingSets.has(set.name)) g.add(set);
      // Declare every chain first: a service chain's rules may goto an endpoint chain.
      for (const c of st.plan.chains) if (!existing.has(c.name)) g.add({ kind: 'chain', name: c.name });
      for (const c of st.plan.chains) {
        g.flush({ kind: 'chain', name: c.name });
        for (const r of c.rules) g.add(r);
      }
      for (const c of st.plan.contributions) {
        // A shared element is written once; a conflicting one only as its first owner wants it.
        if (done.has(c.id) || chosen.get(c.id) !== c.value) continue;
        done.add(c.id);
        const k = inKernel.get(c.id);
        if (k && k.value === c.value) continue;
        if (k) g.delete(deletable(k.element));
        g.add(c.element);
      }
      groups.push(g);
    }
    const last = new OpGroup();
    for (const [id, k] of inKernel) if (!chosen.has(id)) last.delete(deletable(k.element));
    const wanted = new Set([...ports.values()].flatMap((st) => st.plan.chains.map((c) => c.name)));
    for (const name of existing) {
      if (!isPortChain(name) || wanted.has(name)) continue;
      last.flush({ kind: 'chain', name });
      last.delete({ kind: 'chain', name });
    }
    const wantedSets = new Set([...ports.values()].flatMap((st) => st.plan.sets.map((x) => x.name)));
    for (const name of existingSets) if (isAffinitySet(name) && !wantedSets.has(name)) last.delete({ kind: 'set', name, key: [this.traits.addrType] });
    groups.push(last);

    const planMs = this.now() - t0 - kernelMs;
    const sent = await this.runGroups(groups, signal);
    kernelMs += sent.kernelMs;
    for (const b of heldByKernel) this.slots.release(b);
    this.ports = ports;
    this.index = index;
    this.log.debug('full sync', { servicePorts: ports.size, batches: sent.batches, planMs, kernelMs });
    return { full: true, servicesChanged: ports.size, kernelMs, planMs, errors, batches: sent.batches, longestBatchMs: sent.longestMs };
  }

  /** Port chain names and the elements of the shared maps, as the kernel holds them. */
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
    for (const set of SHARED_SETS) {
      if (!sets.has(set)) continue;
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
    let tx = this.nft.newTransaction();
    let bytes = 0;
    const send = async (): Promise<void> => {
      if (tx.size === 0) return;
      const t = this.now();
      await this.run(tx, signal);
      const ms = this.now() - t;
      batches++;
      kernelMs += ms;
      longestMs = Math.max(longestMs, ms);
      tx = this.nft.newTransaction();
      bytes = 0;
    };
    for (const g of groups) {
      if (bytes > 0 && bytes + g.bytes > this.batchBudget) await send();
      g.applyTo(tx);
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
    const newChains: string[] = [];
    const rewrite: { name: string; rules: PortPlan['chains'][number]['rules'] }[] = [];
    const deleteChains: string[] = [];
    const newSets: NftSetLike[] = [];
    const deleteSets: NftSetLike[] = [];
    let changed = 0;
    for (const id of change.services) {
      const before = this.ports.get(id);
      const after = this.planOne(desired, id, before);
      const oldChains = new Map((before?.plan.chains ?? []).map((c) => [c.name, c]));
      for (const c of after?.plan.chains ?? []) {
        const old = oldChains.get(c.name);
        oldChains.delete(c.name);
        if (!old) newChains.push(c.name);
        if (!old || old.signature !== c.signature) rewrite.push({ name: c.name, rules: c.rules });
      }
      deleteChains.push(...oldChains.keys());
      const oldSets = new Map((before?.plan.sets ?? []).map((x) => [x.name, x]));
      for (const x of after?.plan.sets ?? []) if (!oldSets.delete(x.name)) newSets.push(x);
      deleteSets.push(...oldSets.values());
      this.index.update(id, before?.plan.contributions ?? ([] as Contribution[]), after?.plan.contributions ?? [], delta);
      this.releaseUnused(before?.blocks, after?.blocks);
      if (after) this.ports.set(id, after);
      else this.ports.delete(id);
      changed++;
    }
    const tx = this.nft.newTransaction();
    // Order inside the batch: chains first (elements may goto them), element deletes before
    // adds (a replaced element is deleted and re-added), rule rewrites, then chains no
    // element points at any more.
    for (const x of newSets) tx.add(x);
    for (const name of newChains) tx.add({ kind: 'chain', name });
    for (const e of [...delta.remove, ...delta.replace]) tx.delete(deletable(e));
    for (const e of [...delta.replace, ...delta.add]) tx.add(e);
    for (const c of rewrite) {
      const chain: NftChain = { kind: 'chain', name: c.name };
      tx.flush(chain);
      for (const r of c.rules) tx.add(r);
    }
    for (const name of deleteChains) {
      tx.flush({ kind: 'chain', name });
      tx.delete({ kind: 'chain', name });
    }
    for (const x of deleteSets) tx.delete(x);
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
    this.slots = new SlotAllocator();
    this.needFull = true;
  }
}

type SlotBlockOrNone = Blocks['cluster'];

/** A delete needs only the key. */
const deletable = (e: NftElement): NftElement => ({ kind: 'element', set: e.set, key: e.key });

/** Maps whose elements come from service ports (diffed); the others follow the node (rewritten). */
const SHARED_SETS = [SET.clusterIPs, SET.serviceIPs, SET.serviceNodePorts, SET.noEndpointServices, SET.noEndpointNodePorts, SET.firewallProtected, SET.firewallAllow, SET.hairpin, SET.endpoints, SET.affinitySlots];
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
