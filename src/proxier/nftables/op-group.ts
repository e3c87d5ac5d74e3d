// Operations that must land in the same batch (one service port's frontends and endpoints),
// with an estimate of their encoded size so a full sync can be cut into batches that fit the
// socket without encoding everything twice. The estimate errs high: names dominate the size
// of nf_tables messages.
//
// A batch is emitted in phases, whatever order the groups were built in: the kernel applies
// a batch's messages in order, so objects are created before anything refers to them and
// removed after nothing does; and element operations are sorted by set, so that runs of
// elements of one set travel in one message (NftTransaction merges consecutive ones).

import type {
  NftChain,
  NftElement,
  NftObject,
  NftSetLike,
  NftTable,
  NftTransaction,
} from '../../netlink/nftables/index.ts';

const PHASE = {
  create: 0, // table, sets, maps, chains
  flush: 1, // sets and chains about to be refilled or rewritten
  rules: 2,
  elementDeletes: 3,
  elementAdds: 4,
  chainRemovals: 5, // flush + delete, after the elements that pointed at them are gone
  setRemovals: 6,
} as const;
type Phase = (typeof PHASE)[keyof typeof PHASE];

type Verb = 'add' | 'flush' | 'delete';

/** An operation on a table, set, chain or rule (elements are kept apart, see OpGroup). */
interface Op {
  phase: Phase;
  verb: Verb;
  obj: NftObject;
}

const HEADER = 64; // nlmsghdr + nfgenmsg + table name attribute, rounded up

/**
 * One element's share of a message: its key and data (at most 16 bytes a field, as
 * attributes), not a message header of its own.
 */
const estimateElement = (o: NftElement): number =>
  24 + o.set.length + (o.key.length + (Array.isArray(o.value) ? o.value.length : o.value ? 2 : 0)) * 24;

function estimate(o: NftObject): number {
  switch (o.kind) {
    case 'table':
      return HEADER;
    case 'chain':
      return HEADER + o.name.length + (o.base ? 48 : 8);
    case 'set':
    case 'map':
      return HEADER + o.name.length + 160;
    case 'element':
      return estimateElement(o);
    case 'rule':
      return HEADER + o.chain.length + o.exprs.length * 64 + (o.comment?.length ?? 0);
  }
}

/** OpGroup.effects(). */
export interface OpEffects {
  readonly chainsAdded: readonly string[];
  readonly setsAdded: readonly string[];
  readonly elementDeletes: readonly NftElement[];
  readonly elementAdds: readonly NftElement[];
  readonly chainsRemoved: readonly string[];
  readonly setsRemoved: readonly string[];
}

export class OpGroup {
  private readonly ops: Op[] = [];
  /** Element deletes and adds, the bulk of a sync: plain lists, no wrapper per element. */
  private readonly elementDeletes: NftElement[] = [];
  private readonly elementAdds: NftElement[] = [];
  bytes = 0;

  private push(phase: Phase, verb: Verb, o: NftObject): void {
    this.ops.push({ phase, verb, obj: o });
    this.bytes += estimate(o);
  }

  get size(): number {
    return this.ops.length + this.elementDeletes.length + this.elementAdds.length;
  }

  add(o: NftObject): void {
    if (o.kind === 'element') {
      this.elementAdds.push(o);
      this.bytes += estimateElement(o);
    } else this.push(o.kind === 'rule' ? PHASE.rules : PHASE.create, 'add', o);
  }

  /** Empties a set or chain that this batch refills or rewrites. */
  flush(o: NftTable | NftChain | NftSetLike): void {
    this.push(PHASE.flush, 'flush', o);
  }

  delete(o: NftObject): void {
    if (o.kind === 'chain') throw new TypeError('remove chains with removeChain()');
    if (o.kind === 'element') {
      this.elementDeletes.push(o);
      this.bytes += estimateElement(o);
    } else this.push(PHASE.setRemovals, 'delete', o);
  }

  /** Flushes and deletes a chain, once nothing points at it. */
  removeChain(name: string): void {
    this.push(PHASE.chainRemovals, 'flush', { kind: 'chain', name });
    this.push(PHASE.chainRemovals, 'delete', { kind: 'chain', name });
  }

  /**
   * What this group does to the names a full sync reads before writing (chains, sets) and to
   * elements, in the order the kernel applies it: a full sync that let a partial one run
   * while it read the kernel corrects what it read with these.
   */
  effects(): OpEffects {
    const named = (phase: Phase, verb: Verb, kind: 'chain' | 'set'): string[] =>
      this.ops
        .filter(
          (o) =>
            o.phase === phase && o.verb === verb && (o.obj.kind === kind || (kind === 'set' && o.obj.kind === 'map')),
        )
        .map((o) => (o.obj as { name: string }).name);
    return {
      chainsAdded: named(PHASE.create, 'add', 'chain'),
      setsAdded: named(PHASE.create, 'add', 'set'),
      elementDeletes: [...this.elementDeletes],
      elementAdds: [...this.elementAdds],
      chainsRemoved: named(PHASE.chainRemovals, 'delete', 'chain'),
      setsRemoved: named(PHASE.setRemovals, 'delete', 'set'),
    };
  }

  /** Writes this group's operations of one phase (not elements) into `tx`. */
  applyPhase(phase: Phase, tx: NftTransaction): void {
    for (let i = 0; i < this.ops.length; i++) {
      const { phase: p, verb, obj } = this.ops[i]!;
      if (p !== phase) continue;
      if (verb === 'add') tx.add(obj);
      else if (verb === 'delete') tx.delete(obj);
      else tx.flush(obj as NftTable | NftChain | NftSetLike);
    }
  }

  /** Adds this group's element deletes (or adds) to per-set lists, keeping their order. */
  collectElements(which: 'deletes' | 'adds', bySet: Map<string, NftElement[]>): void {
    let lastSet: string | undefined;
    let list: NftElement[] | undefined;
    const elements = which === 'deletes' ? this.elementDeletes : this.elementAdds;
    // Indexed loops here and in applyGroups: they run once per element of a sync.
    for (let i = 0; i < elements.length; i++) {
      const e = elements[i]!;
      if (e.set !== lastSet) {
        lastSet = e.set;
        list = bySet.get(e.set);
        if (!list) bySet.set(e.set, (list = []));
      }
      list!.push(e);
    }
  }
}

/** Writes groups into one transaction, phase by phase, elements grouped by set. */
export function applyGroups(groups: readonly OpGroup[], tx: NftTransaction): void {
  const each = (f: (g: OpGroup) => void): void => {
    for (let i = 0; i < groups.length; i++) f(groups[i]!);
  };
  each((g) => g.applyPhase(PHASE.create, tx));
  each((g) => g.applyPhase(PHASE.flush, tx));
  each((g) => g.applyPhase(PHASE.rules, tx));
  // Lists per set rather than a sort: a full sync writes hundreds of thousands of elements.
  // Within a set the groups' order is kept.
  const deletes = new Map<string, NftElement[]>();
  each((g) => g.collectElements('deletes', deletes));
  deletes.forEach((list) => {
    for (let i = 0; i < list.length; i++) tx.delete(list[i]!);
  });
  const adds = new Map<string, NftElement[]>();
  each((g) => g.collectElements('adds', adds));
  adds.forEach((list) => {
    for (let i = 0; i < list.length; i++) tx.add(list[i]!);
  });
  each((g) => g.applyPhase(PHASE.chainRemovals, tx));
  each((g) => g.applyPhase(PHASE.setRemovals, tx));
}

export function estimateTransaction(tx: NftTransaction): number {
  return tx.operations.reduce((n, op) => n + estimate(op.obj), 0);
}
