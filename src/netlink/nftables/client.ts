// NftClient: runs transactions against the kernel as one nfnetlink batch each, and reads
// back what one table holds (chains, sets and maps, elements, rules, generation id).
//
// The client remembers the definitions of the sets it created or listed, so that element
// operations on them in later transactions can be encoded (an element's bytes depend on
// its set's key types). Reading them back costs one GETSET dump (listSets()).

import type { BatchOptions, NetlinkTransport, OutMessage, RequestOptions } from '../core/index.ts';
import {
  errnoNumber,
  isNotFound,
  NetlinkError,
  NfnlSubsys,
  NLM_F_ECHO,
  nfMessage,
  nfnlBatchBytes,
  splitNfPayload,
} from '../core/index.ts';
import { AF_UNSPEC, AttrSet } from '../core/index.ts';
import type { Family } from './constants.ts';
import {
  NFTA_CHAIN_NAME,
  NFTA_CHAIN_TABLE,
  NFTA_GEN_ID,
  NFTA_RULE_CHAIN,
  NFTA_RULE_TABLE,
  NFTA_SET_ELEM_LIST_SET,
  NFTA_SET_ELEM_LIST_TABLE,
  NFTA_SET_TABLE,
  NftMsg,
} from './constants.ts';
import { decodeChain } from './chain.ts';
import type { RawElement } from './element.ts';
import { decodeRawElements, toElements } from './element.ts';
import { nftMessage } from './message.ts';
import { decodeRule } from './rule.ts';
import type { ListedSet } from './set.ts';
import { decodeSet } from './set.ts';
import type { ListedTable } from './table.ts';
import { decodeTable } from './table.ts';
import { NftTransaction, NftValidationError } from './transaction.ts';
import type { NftChain, NftElement, NftRule, NftSetLike, Scope } from './types.ts';

/** What the proxier depends on; NftClient (kernel) and FakeNft (memory) both implement it. */
export interface NftInterface {
  readonly scope: Scope;
  newTransaction(): NftTransaction;
  run(tx: NftTransaction, signal?: AbortSignal): Promise<RunStats>;
  /** Names of the chains, sets or maps in the table (sets and maps: ENOENT when the table is missing; chains: []). */
  list(kind: 'chain' | 'set' | 'map'): Promise<string[]>;
  listChains(): Promise<NftChain[]>;
  listSets(): Promise<NftSetLike[]>;
  listElements(set: string): Promise<NftElement[]>;
  /**
   * A set's elements read in one dump (the dump has ended when this resolves), as pages
   * decoded on demand, so that a caller can decode a large set a slice at a time and let
   * other work in between. A snapshot, unless `onInterrupted` is given: a dump the kernel
   * marks interrupted (the set changed while it was read, from this socket or another) is
   * then returned as read, where elements changed meanwhile may be missing or repeated, and
   * `onInterrupted` is called; without it the dump is restarted.
   */
  listElementPages(set: string, opts?: ElementPagesOptions): Promise<(() => NftElement[])[]>;
  /** Rules of one chain (or of the whole table), expressions decoded, with handles. */
  listRules(chain?: string): Promise<NftRule[]>;
}

export interface ElementPagesOptions {
  onInterrupted?: () => void;
}

export interface NftClientOptions {
  family: Family;
  table: string;
  /** A connection on Protocol.NETFILTER (or a FakeKernel-backed one in tests). */
  transport: NetlinkTransport;
  /** Per-exchange time-out in ms (the transport's default otherwise). */
  timeoutMs?: number;
  /**
   * 'native' (default): destroy uses NFT_MSG_DESTROY* (kernel 6.3+). 'emulate': add + delete,
   * for older kernels such as Debian 12's 6.1 (destroy of rules is then refused).
   */
  destroy?: 'native' | 'emulate';
}

/** What one run() sent: nf_tables messages (batch begin/end excluded) and batch bytes. */
export interface RunStats {
  messages: number;
  bytes: number;
}

export class NftClient implements NftInterface {
  readonly scope: Scope;
  private readonly transport: NetlinkTransport;
  private readonly timeoutMs: number | undefined;
  private readonly emulateDestroy: boolean;
  private readonly known = new Map<string, NftSetLike>();

  constructor(opts: NftClientOptions) {
    this.scope = { family: opts.family, table: opts.table };
    this.transport = opts.transport;
    this.timeoutMs = opts.timeoutMs;
    this.emulateDestroy = opts.destroy === 'emulate';
  }

  newTransaction(): NftTransaction {
    return new NftTransaction(this.scope);
  }

  /** The definition run() uses for elements of `name` (from earlier transactions or listSets()). */
  knownSet(name: string): NftSetLike | undefined {
    return this.known.get(name);
  }

  /** Teaches the client a set's definition without listing (e.g. after a restart, from config). */
  rememberSet(def: NftSetLike): void {
    this.known.set(def.name, def);
  }

  /**
   * Encodes without sending: how many messages and bytes the batch would be, against the
   * socket's limit. Lets a caller split very large work before run() refuses it.
   */
  measure(tx: NftTransaction): RunStats & { maxBatchBytes: number } {
    const msgs = tx.messages((n) => this.known.get(n), { emulateDestroy: this.emulateDestroy });
    return {
      messages: msgs.length,
      bytes: msgs.length === 0 ? 0 : nfnlBatchBytes(msgs),
      maxBatchBytes: this.transport.maxBatchBytes,
    };
  }

  async run(tx: NftTransaction, signal?: AbortSignal): Promise<RunStats> {
    if (tx.scope.family !== this.scope.family || tx.scope.table !== this.scope.table) {
      throw new NftValidationError(
        `transaction for ${tx.scope.family} ${tx.scope.table} run on a client for ${this.scope.family} ${this.scope.table}`,
      );
    }
    const msgs = tx.messages((n) => this.known.get(n), { emulateDestroy: this.emulateDestroy });
    if (msgs.length === 0) return { messages: 0, bytes: 0 };
    const bytes = nfnlBatchBytes(msgs);
    const max = this.transport.maxBatchBytes;
    if (bytes > max) {
      const detail = `transaction of ${tx.size} operations (${msgs.length} messages, ${bytes} bytes) exceeds the socket's ${max}-byte batch limit; split it`;
      throw new NetlinkError(
        `run transaction ${this.scope.family} ${this.scope.table}`,
        errnoNumber('EMSGSIZE'),
        undefined,
        { detail },
      );
    }
    const opts: BatchOptions = {};
    if (signal) opts.signal = signal;
    if (this.timeoutMs !== undefined) opts.timeoutMs = this.timeoutMs;
    await this.transport.batch(NfnlSubsys.NFTABLES, msgs, opts);
    const ops = tx.operations;
    for (let i = 0; i < ops.length; i++) {
      const { verb, obj } = ops[i]!;
      if (obj.kind !== 'set' && obj.kind !== 'map' && obj.kind !== 'table') continue;
      if (obj.kind === 'table') {
        if (verb === 'delete' || verb === 'destroy') this.known.clear();
      } else if (verb === 'add' || verb === 'create') this.known.set(obj.name, obj);
      else if (verb === 'delete' || verb === 'destroy') this.known.delete(obj.name);
    }
    return { messages: msgs.length, bytes };
  }

  /**
   * Encodes a transaction without sending it, for callers that pack the messages of many
   * transactions (of any table of this family) into batches of their own (runMessages).
   */
  encode(tx: NftTransaction): OutMessage[] {
    if (tx.scope.family !== this.scope.family) {
      throw new NftValidationError(
        `transaction for ${tx.scope.family} ${tx.scope.table} encoded by a client for ${this.scope.family}`,
      );
    }
    return tx.messages((n) => this.known.get(n), { emulateDestroy: this.emulateDestroy });
  }

  /**
   * Sends encoded messages as one batch. With `echo`, every new rule is echoed back by the
   * kernel (NLM_F_ECHO) and the result maps the index of each NEWRULE message to the handle
   * the kernel gave it. The echoes arrive in the receive buffer at commit: keep such batches
   * well under maxBatchBytes.
   */
  async runMessages(
    msgs: readonly OutMessage[],
    signal?: AbortSignal,
    opts: { echo?: boolean } = {},
  ): Promise<Map<number, bigint>> {
    const handles = new Map<number, bigint>();
    if (msgs.length === 0) return handles;
    const send = opts.echo
      ? msgs.map((m) => ((m.type & 0xff) === NftMsg.NEWRULE ? { ...m, flags: m.flags | NLM_F_ECHO } : m))
      : msgs;
    const bytes = nfnlBatchBytes(send);
    if (bytes > this.transport.maxBatchBytes) {
      const detail = `batch of ${msgs.length} messages (${bytes} bytes) exceeds the socket's ${this.transport.maxBatchBytes}-byte batch limit; split it`;
      throw new NetlinkError(`run batch ${this.scope.family} ${this.scope.table}`, errnoNumber('EMSGSIZE'), undefined, {
        detail,
      });
    }
    const bo: BatchOptions = {};
    if (signal) bo.signal = signal;
    if (this.timeoutMs !== undefined) bo.timeoutMs = this.timeoutMs;
    if (opts.echo) {
      bo.onReply = (m, i) => {
        if ((m.type & 0xff) !== NftMsg.NEWRULE) return;
        const h = decodeRule(m).rule.handle;
        if (h !== undefined) handles.set(i, h);
      };
    }
    await this.transport.batch(NfnlSubsys.NFTABLES, send, bo);
    return handles;
  }

  private dump(
    cmd: number,
    label: string,
    fill: Parameters<typeof nftMessage>[4],
    family: Family | 'unspec' = this.scope.family,
    onInterrupted?: () => void,
  ) {
    const msg =
      family === 'unspec'
        ? nfMessage(NfnlSubsys.NFTABLES, cmd, AF_UNSPEC, 0, label, fill)
        : nftMessage(cmd, family, 0, label, fill);
    const opts: RequestOptions & { dump: true } = { dump: true };
    if (this.timeoutMs !== undefined) opts.timeoutMs = this.timeoutMs;
    if (onInterrupted) opts.onInterrupted = onInterrupted;
    return this.transport.request(msg, opts);
  }

  /** Every table of every family in this network namespace. */
  async listTables(): Promise<ListedTable[]> {
    const replies = await this.dump(NftMsg.GETTABLE, 'list tables', () => {}, 'unspec');
    return replies.map((m) => decodeTable(m));
  }

  async listChains(): Promise<NftChain[]> {
    const replies = await this.dump(NftMsg.GETCHAIN, `list chains ${this.scope.family} ${this.scope.table}`, (w) =>
      w.str(NFTA_CHAIN_TABLE, this.scope.table),
    );
    return replies
      .map((m) => decodeChain(m))
      .filter((c) => c.table === this.scope.table && c.family === this.scope.family)
      .map((c) => c.chain);
  }

  /** One chain by name (a GETCHAIN, not a dump: cheap on a table of many chains); undefined when absent. */
  async getChain(name: string): Promise<NftChain | undefined> {
    const opts: { timeoutMs?: number } = {};
    if (this.timeoutMs !== undefined) opts.timeoutMs = this.timeoutMs;
    const label = `get chain ${this.scope.family} ${this.scope.table} ${name}`;
    try {
      const replies = await this.transport.request(
        nftMessage(NftMsg.GETCHAIN, this.scope.family, 0, label, (w) =>
          w.str(NFTA_CHAIN_TABLE, this.scope.table).str(NFTA_CHAIN_NAME, name),
        ),
        opts,
      );
      return replies.map((m) => decodeChain(m).chain).find((c) => c.name === name);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Sets and maps with their metadata; also teaches the client their definitions. */
  async listSetsDetailed(): Promise<ListedSet[]> {
    const replies = await this.dump(NftMsg.GETSET, `list sets ${this.scope.family} ${this.scope.table}`, (w) =>
      w.str(NFTA_SET_TABLE, this.scope.table),
    );
    const sets = replies
      .map((m) => decodeSet(m))
      .filter((s) => s.table === this.scope.table && s.family === this.scope.family);
    for (const s of sets) if (s.typed && !s.set.name.startsWith('__')) this.known.set(s.set.name, s.set);
    return sets;
  }

  async listSets(): Promise<NftSetLike[]> {
    return (await this.listSetsDetailed()).filter((s) => !s.set.name.startsWith('__')).map((s) => s.set);
  }

  async list(kind: 'chain' | 'set' | 'map'): Promise<string[]> {
    if (kind === 'chain') return (await this.listChains()).map((c) => c.name);
    return (await this.listSets()).filter((s) => s.kind === kind).map((s) => s.name);
  }

  /** The raw elements of a set, as the kernel holds them (interval ends included). */
  async listRawElements(set: string): Promise<RawElement[]> {
    const replies = await this.dump(
      NftMsg.GETSETELEM,
      `list elements ${this.scope.family} ${this.scope.table} ${set}`,
      (w) => w.str(NFTA_SET_ELEM_LIST_TABLE, this.scope.table).str(NFTA_SET_ELEM_LIST_SET, set),
    );
    return replies.flatMap((m) => decodeRawElements(m).elements);
  }

  async listElements(set: string): Promise<NftElement[]> {
    const def = await this.setDef(set);
    return toElements(def, await this.listRawElements(set));
  }

  async listElementPages(set: string, opts: ElementPagesOptions = {}): Promise<(() => NftElement[])[]> {
    const def = await this.setDef(set);
    const replies = await this.dump(
      NftMsg.GETSETELEM,
      `list elements ${this.scope.family} ${this.scope.table} ${set}`,
      (w) => w.str(NFTA_SET_ELEM_LIST_TABLE, this.scope.table).str(NFTA_SET_ELEM_LIST_SET, set),
      this.scope.family,
      opts.onInterrupted,
    );
    // One page per reply datagram: a 100,000-element map is some hundred of them.
    return replies.map((m) => () => toElements(def, decodeRawElements(m).elements));
  }

  /** The definition of a set (its key and data types), for decoding its elements. */
  private async setDef(set: string): Promise<NftSetLike> {
    let def = this.known.get(set);
    if (!def) {
      await this.listSetsDetailed();
      def = this.known.get(set);
    }
    const op = `list elements ${this.scope.family} ${this.scope.table} ${set}`;
    if (!def) throw new NetlinkError(op, errnoNumber('ENOENT'), undefined, { detail: 'set of unknown type' });
    return def;
  }

  async listRules(chain?: string): Promise<NftRule[]> {
    const replies = await this.dump(
      NftMsg.GETRULE,
      `list rules ${this.scope.family} ${this.scope.table}${chain ? ` ${chain}` : ''}`,
      (w) => {
        w.str(NFTA_RULE_TABLE, this.scope.table);
        if (chain !== undefined) w.str(NFTA_RULE_CHAIN, chain);
      },
    );
    return replies
      .map((m) => decodeRule(m))
      .filter((r) => r.table === this.scope.table && (chain === undefined || r.rule.chain === chain))
      .map((r) => r.rule);
  }

  /** The ruleset generation id (changes with every committed transaction). */
  async generation(): Promise<number> {
    const opts: { timeoutMs?: number } = {};
    if (this.timeoutMs !== undefined) opts.timeoutMs = this.timeoutMs;
    const replies = await this.transport.request(
      nfMessage(NfnlSubsys.NFTABLES, NftMsg.GETGEN, AF_UNSPEC, 0, 'get generation', () => {}),
      opts,
    );
    for (const m of replies) {
      const nf = splitNfPayload(m.payload);
      if (!nf) continue;
      const id = new AttrSet(nf.attrs, 'gen').u32(NFTA_GEN_ID, 'net');
      if (id !== undefined) return id;
    }
    throw new NetlinkError('get generation', errnoNumber('EPROTO'), undefined, {
      detail: 'no NFTA_GEN_ID in the reply',
    });
  }
}
