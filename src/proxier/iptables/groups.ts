// Operations grouped into units that must commit together (a chain flushed and refilled, a
// run of rules added to a shared chain), in an order that is safe to cut between groups:
// chains filled before the rules that jump to them, jumps removed before their chains. The
// sender packs whole groups into batches of the socket's size, so a sync that fits goes in
// one nfnetlink transaction and a cold start is cut only between groups.

import { nfnlBatchBytes } from '../../netlink/core/index.ts';
import type { OutMessage } from '../../netlink/core/index.ts';
import type { NftChain, NftObject, NftRule, NftTable } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { BatchSender, TableClient } from './writer-types.ts';

type Verb = 'add' | 'insert' | 'flush' | 'delete';

export interface Op {
  readonly table: IptTable;
  readonly verb: Verb;
  readonly obj: NftObject;
  /** For new rules: receives the handle the kernel gave it. */
  readonly onHandle?: (handle: bigint) => void;
}

/** Groups in commit order; `late` ones (stale chains' removal) may fail without failing the sync. */
export class Plan {
  readonly groups: Op[][] = [];
  readonly late: Op[][] = [];
  private open: Op[] | undefined;

  /** Starts a new group (an atomic unit). */
  group(): this {
    this.open = [];
    this.groups.push(this.open);
    return this;
  }

  lateGroup(): this {
    this.open = [];
    this.late.push(this.open);
    return this;
  }

  push(op: Op): void {
    if (!this.open) this.group();
    this.open!.push(op);
  }

  table(table: IptTable): void {
    this.push({ table, verb: 'add', obj: { kind: 'table' } satisfies NftTable });
  }

  chain(table: IptTable, verb: 'add' | 'flush' | 'delete', chain: NftChain): void {
    this.push({ table, verb, obj: chain });
  }

  rule(table: IptTable, verb: 'add' | 'insert' | 'delete', rule: NftRule, onHandle?: (h: bigint) => void): void {
    this.push(onHandle ? { table, verb, obj: rule, onHandle } : { table, verb, obj: rule });
  }

  get size(): number {
    let n = 0;
    for (const g of this.groups) n += g.length;
    for (const g of this.late) n += g.length;
    return n;
  }
}

interface Encoded {
  readonly msgs: OutMessage[];
  readonly handlers: ((h: bigint) => void)[];
}

function encodeGroup(ops: readonly Op[], clients: ReadonlyMap<IptTable, TableClient>): Encoded {
  const msgs: OutMessage[] = [];
  const handlers: ((h: bigint) => void)[] = [];
  for (const op of ops) {
    const client = clients.get(op.table);
    if (!client) throw new Error(`no client for table ${op.table}`);
    const tx = client.newTransaction();
    tx[op.verb](op.obj as never);
    if (tx.error) throw tx.error;
    const m = client.encode(tx);
    // Each of these operations is one message.
    for (const one of m) {
      if (op.onHandle) handlers[msgs.length] = op.onHandle;
      msgs.push(one);
    }
  }
  return { msgs, handlers };
}

export interface SendResult {
  batches: number;
  messages: number;
  longestBatchMs: number;
}

/**
 * Sends the groups in order, as few batches as `budget` bytes allow (a group larger than
 * the budget goes alone). Echoed handles are handed to the operations that asked.
 */
export async function sendGroups(
  groups: readonly (readonly Op[])[],
  clients: ReadonlyMap<IptTable, TableClient>,
  sender: BatchSender,
  budget: number,
  signal: AbortSignal | undefined,
  now: () => number,
): Promise<SendResult> {
  const res: SendResult = { batches: 0, messages: 0, longestBatchMs: 0 };
  let msgs: OutMessage[] = [];
  let handlers: ((h: bigint) => void)[] = [];
  let bytes = 0;
  const flush = async (): Promise<void> => {
    if (msgs.length === 0) return;
    const t0 = now();
    const echo = handlers.length > 0;
    const handles = await sender.runMessages(msgs, signal, { echo });
    res.longestBatchMs = Math.max(res.longestBatchMs, now() - t0);
    res.batches++;
    res.messages += msgs.length;
    for (const [i, h] of handles) handlers[i]?.(h);
    msgs = [];
    handlers = [];
    bytes = 0;
  };
  for (const g of groups) {
    if (g.length === 0) continue;
    const enc = encodeGroup(g, clients);
    const size = nfnlBatchBytes(enc.msgs);
    if (bytes > 0 && bytes + size > budget) await flush();
    const base = msgs.length;
    enc.handlers.forEach((h, i) => {
      if (h) handlers[base + i] = h;
    });
    for (const m of enc.msgs) msgs.push(m);
    bytes += size;
  }
  await flush();
  return res;
}
