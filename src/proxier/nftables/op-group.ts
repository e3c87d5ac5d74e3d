// Operations that must land in the same batch (one service port's frontends and endpoints),
// with an estimate of their encoded size so a full sync can be cut into batches that fit the
// socket without encoding everything twice. The estimate errs high: names dominate the size
// of nf_tables messages.
//
// A batch is emitted in phases, whatever order the groups were built in: the kernel applies
// a batch's messages in order, so objects are created before anything refers to them and
// removed after nothing does; and element operations are sorted by set, so that runs of
// elements of one set travel in one message (NftTransaction merges consecutive ones).

import type { NftChain, NftObject, NftSetLike, NftTable, NftTransaction } from '../../netlink/nftables/index.ts';

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

interface Op {
  phase: Phase;
  verb: Verb;
  obj: NftObject;
}

const HEADER = 64; // nlmsghdr + nfgenmsg + table name attribute, rounded up

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
      // One element's share of a message: its key and data (at most 16 bytes a field, as
      // attributes), not a message header of its own.
      return 24 + o.set.length + (o.key.length + (Array.isArray(o.value) ? o.value.length : o.value ? 2 : 0)) * 24;
    case 'rule':
      return HEADER + o.chain.length + o.exprs.length * 64 + (o.comment?.length ?? 0);
  }
}

export class OpGroup {
  readonly ops: Op[] = [];
  bytes = 0;

  private push(phase: Phase, verb: Verb, o: NftObject): void {
    this.ops.push({ phase, verb, obj: o });
    this.bytes += estimate(o);
  }

  get size(): number {
    return this.ops.length;
  }

  add(o: NftObject): void {
    this.push(o.kind === 'element' ? PHASE.elementAdds : o.kind === 'rule' ? PHASE.rules : PHASE.create, 'add', o);
  }

  /** Empties a set or chain that this batch refills or rewrites. */
  flush(o: NftTable | NftChain | NftSetLike): void {
    this.push(PHASE.flush, 'flush', o);
  }

  delete(o: NftObject): void {
    if (o.kind === 'chain') throw new TypeError('remove chains with removeChain()');
    this.push(o.kind === 'element' ? PHASE.elementDeletes : PHASE.setRemovals, 'delete', o);
  }

  /** Flushes and deletes a chain, once nothing points at it. */
  removeChain(name: string): void {
    this.push(PHASE.chainRemovals, 'flush', { kind: 'chain', name });
    this.push(PHASE.chainRemovals, 'delete', { kind: 'chain', name });
  }
}

/** Writes groups into one transaction, phase by phase, elements grouped by set. */
export function applyGroups(groups: readonly OpGroup[], tx: NftTransaction): void {
  // Buckets rather than a sort: a full sync writes hundreds of thousands of operations.
  // Within a bucket the groups' order is kept.
  const buckets: Map<string, Op[]>[] = Object.values(PHASE).map(() => new Map());
  for (const g of groups) {
    for (const op of g.ops) {
      const bucket = buckets[op.phase]!;
      const key = op.obj.kind === 'element' ? op.obj.set : '';
      let list = bucket.get(key);
      if (!list) bucket.set(key, (list = []));
      list.push(op);
    }
  }
  for (const bucket of buckets) {
    for (const list of bucket.values()) {
      for (const { verb, obj } of list) {
        if (verb === 'add') tx.add(obj);
        else if (verb === 'delete') tx.delete(obj);
        else tx.flush(obj as NftTable | NftChain | NftSetLike);
      }
    }
  }
}

export function estimateTransaction(tx: NftTransaction): number {
  return tx.operations.reduce((n, op) => n + estimate(op.obj), 0);
}
