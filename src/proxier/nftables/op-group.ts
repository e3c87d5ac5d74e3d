// Operations that must land in the same batch (one service port's chains, slots and
// frontends), with an estimate of their encoded size so a full sync can be cut into
// batches that fit the socket without encoding everything twice. The estimate errs high:
// names dominate the size of nf_tables messages.

import type { NftChain, NftObject, NftSetLike, NftTable, NftTransaction } from '../../netlink/nftables/index.ts';

type Verb = 'add' | 'flush' | 'delete';

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
      return HEADER + o.set.length + 24 + JSON.stringify([o.key, o.value ?? null]).length * 2;
    case 'rule':
      return HEADER + o.chain.length + o.exprs.length * 64 + (o.comment?.length ?? 0);
  }
}

export class OpGroup {
  private readonly ops: [Verb, NftObject][] = [];
  bytes = 0;

  private push(verb: Verb, o: NftObject): void {
    this.ops.push([verb, o]);
    this.bytes += estimate(o);
  }

  add(o: NftObject): void {
    this.push('add', o);
  }

  flush(o: NftTable | NftChain | NftSetLike): void {
    this.push('flush', o);
  }

  delete(o: NftObject): void {
    this.push('delete', o);
  }

  applyTo(tx: NftTransaction): void {
    for (const [verb, o] of this.ops) {
      if (verb === 'add') tx.add(o);
      else if (verb === 'delete') tx.delete(o);
      else tx.flush(o as NftTable | NftChain | NftSetLike);
    }
  }
}

export function estimateTransaction(tx: NftTransaction): number {
  return tx.operations.reduce((n, op) => n + estimate(op.obj), 0);
}

