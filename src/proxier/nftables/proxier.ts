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
import type { NftChain, NftElement, NftInterface, NftTransaction } from '../../netlink/nftables/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { Proxier, SyncReport } from '../types.ts';
import { ElementIndex, emptyDelta } from './elements.ts';
import type { Contribution, ElementDelta } from './elements.ts';
import type { FamilyTraits } from './family.ts';
import { traitsOf } from './family.ts';
import { cidrContainsText } from './cidr-match.ts';
import { CHAIN, isPortChain, SET } from './names.ts';
import { blockNeeds, planPort } from './port-plan.ts';
import type { Blocks, PlanContext, PortPlan } from './port-plan.ts';
import { skeletonChains, skeletonRules, skeletonSets } from './skeleton.ts';
import { blockSize, SlotAllocator } from './slots.ts';

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
    return { traits: this.traits, masqueradeAll: desired.masquerade.all, detectLocal: cidrBased };
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

  private async fullSync(desired: DesiredState, signal: AbortSignal): Promise<SyncReport> {
    const t0 = this.now();
    const errors: string[] = [];
    this.ctx = this.planContext(desired);
    // Fresh bookkeeping: the kernel is rewritten to match it in one transaction.
    const ports = new Map<ServicePortId, PortState>();
    const index = new ElementIndex();
    this.slots = new SlotAllocator();
    const delta = emptyDelta();
    for (const id of desired.services.keys()) {
      const st = this.planOne(desired, id, undefined);
      if (!st) continue;
      ports.set(id, st);
      index.update(id, [], st.plan.contributions, delta);
    }
    errors.push(...delta.conflicts);

    let existing: string[] = [];
    const tk = this.now();
    try {
      existing = (await this.nft.listChains()).map((c) => c.name);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    let kernelMs = this.now() - tk;

    const tx = this.nft.newTransaction();
    tx.add({ kind: 'table' });
    const sets = skeletonSets(this.traits);
    for (const s of sets) tx.add(s);
    for (const s of sets) tx.flush(s);
    const chains = skeletonChains();
    for (const c of chains) tx.add(c);
    for (const st of ports.values()) for (const c of st.plan.chains) tx.add({ kind: 'chain', name: c.name });
    for (const c of chains) tx.flush(c);
    for (const r of skeletonRules({ traits: this.traits, masqueradeMark: this.mark, nodePortsOnAllAddresses: desired.nodePortAddresses.matchAll })) tx.add(r);
    for (const st of ports.values()) {
      for (const c of st.plan.chains) {
        tx.flush({ kind: 'chain', name: c.name });
        for (const r of c.rules) tx.add(r);
      }
    }
    for (const [, el] of index.all()) tx.add(el);
    for (const el of await this.fixedElements(desired)) tx.add(el);
    // Port chains nobody wants: their map elements were flushed above, so they are free.
    const wanted = new Set([...ports.values()].flatMap((st) => st.plan.chains.map((c) => c.name)));
    for (const name of existing) if (isPortChain(name) && !wanted.has(name)) tx.delete({ kind: 'chain', name });

    const planMs = this.now() - t0 - kernelMs;
    const tr = this.now();
    await this.run(tx, signal);
    kernelMs += this.now() - tr;
    this.ports = ports;
    this.index = index;
    this.log.debug('full sync', { servicePorts: ports.size, operations: tx.size, planMs, kernelMs });
    return { full: true, servicesChanged: ports.size, kernelMs, planMs, errors };
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
    const planMs = this.now() - t0;
    const tk = this.now();
    if (tx.size > 0) await this.run(tx, signal);
    const kernelMs = this.now() - tk;
    return { full: false, servicesChanged: changed, kernelMs, planMs, errors: delta.conflicts };
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

export { CHAIN, SET };
