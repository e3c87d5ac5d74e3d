// ConntrackClient: dumps (kernel-filtered where the kernel can, always re-checked here),
// deletes one or many entries, deletes everything matching a filter in one kernel-side flush
// (flushMatching, Linux 6.12+) or by dump and delete (deleteMatching picks), inserts entries,
// reads counters.
//
// Deleting many entries: ctnetlink has no nfnetlink batches (the kernel refuses a batch for
// a subsystem without commit/abort with EOPNOTSUPP), but it handles every message of a
// datagram in turn. So deleteMany() packs many DELETE requests into each datagram with the
// transport's pipeline(): one ACK per datagram, an error message for each failure. ENOENT
// means the entry is already gone (expired, or deleted by someone else): counted, not an error.
// Each failure costs a reply datagram of its own (about 0.1 ms here), so deleting 10,000
// entries that are all gone takes 0.6-1.2 s against 30-80 ms for present ones: deleteMatching
// dumps first, so only entries that vanish in between pay that.
//
// Deleting by filter: where the kernel matches a filter exactly (filter.ts, exactInKernel)
// and carries out a filtered flush (6.12+), one IPCTNL_MSG_CT_DELETE with CTA_FILTER deletes
// every matching entry without copying any out: about 10 ms for 10,000 entries here, against
// 60-100 ms for dump and delete. The kernel reports no count: flushMatching reads the table's
// size (IPCTNL_MSG_CT_GET_STATS) before and after, so traffic in between skews the figure.
// An older kernel refuses the request before deleting anything; the client then remembers
// that and answers undefined, and callers dump and delete.

import { errorMessage } from '../../base/errors.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { InMessage, NetlinkError, OutMessage, RequestOptions } from '../core/index.ts';
import {
  AttrSet,
  errnoNumber,
  isNotFound,
  NetlinkDecodeError,
  NetlinkError as NetlinkErrorClass,
  NfnlSubsys,
  splitNfPayload,
} from '../core/index.ts';
import { CTA_STATS, CTA_STATS_GLOBAL, CtMsg } from './constants.ts';
import type { FlowFilter } from './filter.ts';
import { compileFilter, exactInKernel, filterFamily, filterText, hasKernelTupleFilter } from './filter.ts';
import type { Flow, NewFlow, Tuple } from './flow.ts';
import { decodeFlowAt, tupleText } from './flow.ts';
import type { FlowKey } from './messages.ts';
import {
  deleteRequests,
  dumpRequest,
  flushRequest,
  getRequest,
  keyText,
  newRequest,
  statsCpuRequest,
  statsRequest,
} from './messages.ts';

/** What the client needs from a connection; NetlinkConnection provides it. */
export interface ConntrackTransport {
  request(msg: OutMessage, opts?: RequestOptions): Promise<InMessage[]>;
  pipeline(
    msgs: readonly OutMessage[],
    opts?: { signal?: AbortSignal; timeoutMs?: number; perDatagram?: number },
  ): Promise<(NetlinkError | undefined)[]>;
}

export interface DumpResult {
  flows: Flow[];
  /** Entries the kernel sent, before the client-side filter. */
  received: number;
  /** Whether the kernel applied the tuple part of the filter (CTA_FILTER). */
  kernelTupleFilter: boolean;
}

export interface DeleteOptions {
  signal?: AbortSignal;
  /**
   * Send each Flow's CTA_ID, so that a different entry with the same tuple is left alone (see FlowKey.id). Default
   * true.
   */
  matchId?: boolean;
  /** DELETE requests per datagram (default 256; see DEFAULT_PER_DATAGRAM). */
  perDatagram?: number;
}

export interface DeleteReport {
  /** Entries the kernel removed. */
  deleted: number;
  /** Entries that were already gone (ENOENT), including an id that no longer matches. */
  notFound: number;
  /** Every other failure, each a NetlinkError naming the flow. */
  errors: NetlinkError[];
}

export interface DeleteMatchingReport extends DeleteReport {
  /** Entries found matching some filter (each deleted at most once); flushed ones as counted by flushMatching. */
  matched: number;
  /** Dumps it took. */
  dumps: number;
  /** Kernel-side flushes it took (filters deleted by flushMatching). */
  flushes: number;
}

export interface FlushResult {
  /**
   * How many entries the table lost while the flush ran: the kernel reports no count, so this
   * is its size (IPCTNL_MSG_CT_GET_STATS) before minus after, never below 0. Entries created
   * or expiring meanwhile skew it; in a quiet table it is exact.
   */
  deleted: number;
}

export interface CtGlobalStats {
  entries: number;
  maxEntries: number;
}

export interface CtCpuStats {
  cpu: number;
  found: number;
  invalid: number;
  insert: number;
  insertFailed: number;
  drop: number;
  earlyDrop: number;
  error: number;
  searchRestart: number;
  clashResolve: number;
  chainTooLong: number;
}

type DeleteTarget = Flow | FlowKey | Tuple;

const isTuple = (t: DeleteTarget): t is Tuple => 'src' in t && 'dst' in t && !('orig' in t);

/** The key that identifies a target for DELETE/GET. */
export function flowKey(t: DeleteTarget, matchId = true): FlowKey {
  if (isTuple(t)) return { orig: t };
  const k: FlowKey = { orig: t.orig };
  if (t.zone !== undefined) k.zone = t.zone;
  if (matchId && t.id !== undefined) k.id = t.id;
  return k;
}

/**
 * Requests per datagram. The kernel answers every failed request (ENOENT, EEXIST) with an
 * error message of its own, about 800 bytes of receive buffer each, all queued before we read
 * any. The socket asks for 8 MiB, but the kernel caps that at net.core.rmem_max, doubled:
 * 416 KiB with the stock 212992 (Debian 12), where about 520 errors fit. Past that the kernel
 * drops replies and flags the socket (ENOBUFS): the datagram's exchange then fails as a whole
 * and its per-request results are lost (it no longer takes the process down, as the `netlink`
 * package's poll callback did: test/kernel/netlink-socket.test.ts). 256 keeps every failure
 * in, at a small cost: deleting 10,000 present entries took a median 53 ms wall / 32 ms CPU at
 * 256 per datagram against 50 / 24 at 1024 (6.18, 14 runs each, load 5 on 2 CPUs); the
 * kernel's work per request dominates, not the round trips.
 */
export const DEFAULT_PER_DATAGRAM = 256;

const CT_NEW_TYPE = (NfnlSubsys.CTNETLINK << 8) | CtMsg.NEW;
const EINVAL = errnoNumber('EINVAL');
// EOPNOTSUPP is 95, which Node names ENOTSUP.
const FILTER_REFUSED: ReadonlySet<string> = new Set(['EINVAL', 'EOPNOTSUPP', 'ENOTSUP']);

const sig = (opts: { signal?: AbortSignal }): { signal?: AbortSignal } => (opts.signal ? { signal: opts.signal } : {});

/** An invalid request (bad address ...) reported like a kernel refusal, naming the operation. */
function invalid(op: string, cause: unknown): NetlinkError {
  return new NetlinkErrorClass(op, EINVAL, { msg: errorMessage(cause) }, { cause });
}

export interface ConntrackClientOptions {
  /** false: never send CTA_FILTER in dumps (filter here only). */
  kernelTupleFilter?: boolean;
  /** false: never flush by filter; flushMatching answers undefined (as on a kernel before 6.12). */
  kernelFlushFilter?: boolean;
}

export class ConntrackClient {
  private readonly transport: ConntrackTransport;
  /** Undefined until a kernel refuses CTA_FILTER; then false for the life of the client. */
  private tupleFilterWorks: boolean | undefined;
  /**
   * Undefined until a filtered flush was tried: true once the kernel did one, false once it refused before doing any.
   */
  private flushFilterWorks: boolean | undefined;

  constructor(transport: ConntrackTransport, opts: ConntrackClientOptions = {}) {
    this.transport = transport;
    if (opts.kernelTupleFilter === false) this.tupleFilterWorks = false;
    if (opts.kernelFlushFilter === false) this.flushFilterWorks = false;
  }

  /** Whether this kernel flushes by filter: undefined until tried (or disabled). */
  get kernelFlushFilter(): boolean | undefined {
    return this.flushFilterWorks;
  }

  /** Whether flushMatching(filter) may delete (true) or will answer undefined at once (false). */
  canFlush(filter: FlowFilter): boolean {
    return this.flushFilterWorks !== false && exactInKernel(filter);
  }

  /**
   * Deletes every entry matching `filter` with one kernel-side flush (Linux 6.12+), exactly
   * the entries flowMatches() accepts. Answers undefined, having deleted nothing, when that
   * cannot be done: a filter the kernel would not match exactly (exactInKernel), a kernel that
   * refused (EINVAL, EOPNOTSUPP: before 6.12; remembered, so later calls answer at once), or
   * the option turned off. Other failures reject.
   */
  async flushMatching(filter: FlowFilter, opts: { signal?: AbortSignal } = {}): Promise<FlushResult | undefined> {
    if (!this.canFlush(filter)) return undefined;
    const msg = flushRequest(filter);
    const before = await this.stats(opts);
    // The second count is queued behind the flush at once (the connection runs one exchange
    // at a time, in order), so that as little traffic as possible slips in between.
    const flushed = this.transport.request(msg, sig(opts));
    const after = this.stats(opts);
    after.catch(() => {});
    try {
      await flushed;
    } catch (e) {
      if (e instanceof NetlinkErrorClass && FILTER_REFUSED.has(e.code)) {
        // Refused before the walk: nothing was deleted. A kernel that never flushed by filter
        // does not know how (before 6.12); one that did refused this filter only.
        if (this.flushFilterWorks === undefined) this.flushFilterWorks = false;
        return undefined;
      }
      throw e;
    }
    this.flushFilterWorks = true;
    return { deleted: Math.max(0, before.entries - (await after).entries) };
  }

  /** Entries matching the filter (all of them without one). */
  async dump(filter: FlowFilter = {}, opts: { signal?: AbortSignal } = {}): Promise<Flow[]> {
    return (await this.dumpDetailed(filter, opts)).flows;
  }

  async dumpDetailed(filter: FlowFilter = {}, opts: { signal?: AbortSignal } = {}): Promise<DumpResult> {
    let family: IPFamily | undefined;
    try {
      family = filterFamily(filter);
    } catch (e) {
      throw invalid(`dump conntrack ${filterText(filter)}`, e);
    }
    const reqOpts: RequestOptions = { dump: true, ...(opts.signal ? { signal: opts.signal } : {}) };
    const label = `dump conntrack ${filterText(filter)}`;
    let useTuple = hasKernelTupleFilter(filter) && this.tupleFilterWorks !== false;
    // CTA_FILTER needs a concrete L3 family (else EOPNOTSUPP): without one, dump each.
    const families: (IPFamily | undefined)[] = family ? [family] : useTuple ? ['IPv4', 'IPv6'] : [undefined];
    const matches = compileFilter(filter);
    const flows: Flow[] = [];
    let received = 0;
    for (let i = 0; i < families.length; i++) {
      let replies: InMessage[];
      try {
        replies = await this.transport.request(dumpRequest(families[i], filter, useTuple), reqOpts);
      } catch (e) {
        // A kernel without (this part of) CTA_FILTER: filter here from now on, dump again.
        if (useTuple && e instanceof NetlinkErrorClass && FILTER_REFUSED.has(e.code)) {
          this.tupleFilterWorks = false;
          useTuple = false;
          flows.length = 0;
          received = 0;
          families.splice(0, families.length, family);
          i = -1;
          continue;
        }
        throw e;
      }
      for (const m of replies) {
        const f = decodeEntry(m, label, received);
        received++;
        if (matches(f)) flows.push(f);
      }
    }
    return { flows, received, kernelTupleFilter: useTuple };
  }

  /** The entry with this original tuple, or undefined when there is none. */
  async get(target: DeleteTarget, opts: { signal?: AbortSignal } = {}): Promise<Flow | undefined> {
    const key = flowKey(target, false);
    let msg: OutMessage;
    try {
      msg = getRequest(key);
    } catch (e) {
      throw invalid(`get conntrack ${keyText(key)}`, e);
    }
    try {
      const [m] = await this.transport.request(msg, sig(opts));
      return m ? decodeReply(m, msg.label) : undefined;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Deletes one entry: true when removed, false when it was already gone (ENOENT). */
  async delete(target: DeleteTarget, opts: DeleteOptions = {}): Promise<boolean> {
    const r = await this.deleteMany([target], opts);
    if (r.errors[0]) throw r.errors[0];
    return r.deleted === 1;
  }

  /**
   * Deletes many entries over one connection, packed into few datagrams. Failures other than
   * ENOENT are collected, not thrown, so one bad entry does not stop the rest; a transport
   * failure (time-out, abort, lost replies) rejects.
   */
  async deleteMany(targets: Iterable<DeleteTarget>, opts: DeleteOptions = {}): Promise<DeleteReport> {
    const report: DeleteReport = { deleted: 0, notFound: 0, errors: [] };
    const keys: FlowKey[] = [];
    for (const t of targets) keys.push(flowKey(t, opts.matchId ?? true));
    const msgs: OutMessage[] = [];
    deleteRequests(keys).forEach((m, i) => {
      if (m instanceof TypeError) report.errors.push(invalid(`delete conntrack ${keyText(keys[i]!)}`, m));
      else msgs.push(m);
    });
    const results = await this.transport.pipeline(msgs, {
      ...(opts.signal ? { signal: opts.signal } : {}),
      perDatagram: opts.perDatagram ?? DEFAULT_PER_DATAGRAM,
    });
    for (const r of results) {
      if (!r) report.deleted++;
      else if (isNotFound(r)) report.notFound++;
      else report.errors.push(r);
    }
    return report;
  }

  /**
   * Deletes every entry that matches any of the filters: what a flusher needs after a sync.
   * A filter the kernel matches exactly goes by flushMatching (one request each) while the
   * kernel does filtered flushes; the others are grouped by family and protocol, each group
   * costing one dump (kernel-filtered by the whole filter when the group has one, by family
   * and protocol otherwise), matched here through an index on the original destination port,
   * then one pipelined deleteMany of everything found (with ids, so entries re-created since
   * the dump are left alone). `kernelFlush: false` keeps to dump and delete.
   */
  async deleteMatching(
    filters: readonly FlowFilter[],
    opts: DeleteOptions & { kernelFlush?: boolean } = {},
  ): Promise<DeleteMatchingReport> {
    let flushes = 0;
    let flushed = 0;
    const rest: FlowFilter[] = [];
    for (const f of filters) {
      const r = opts.kernelFlush !== false && this.canFlush(f) ? await this.flushMatching(f, sig(opts)) : undefined;
      if (r) {
        flushes++;
        flushed += r.deleted;
      } else rest.push(f);
    }
    const groups = new Map<string, FlowFilter[]>();
    for (const f of rest) {
      const key = `${f.family ?? ''}/${f.proto ?? ''}`;
      const g = groups.get(key);
      if (g) g.push(f);
      else groups.set(key, [f]);
    }
    const found = new Map<string, Flow>();
    let dumps = 0;
    for (const group of groups.values()) {
      const first = group[0]!;
      const dumpFilter: FlowFilter =
        group.length === 1
          ? first
          : {
              ...(first.family ? { family: first.family } : {}),
              ...(first.proto !== undefined ? { proto: first.proto } : {}),
            };
      const byPort = new Map<number | undefined, ((f: Flow) => boolean)[]>();
      for (const f of group) {
        const port = f.orig?.dstPort;
        const list = byPort.get(port);
        let m: (flow: Flow) => boolean;
        try {
          m = compileFilter(f);
        } catch (e) {
          throw invalid(`delete conntrack matching ${filterText(f)}`, e);
        }
        if (list) list.push(m);
        else byPort.set(port, [m]);
      }
      const anyPort = byPort.get(undefined) ?? [];
      const flows = await this.dump(dumpFilter, sig(opts));
      dumps++;
      for (const flow of flows) {
        const candidates = byPort.get(flow.orig.dstPort);
        if (candidates?.some((m) => m(flow)) || anyPort.some((m) => m(flow)))
          found.set(`${flow.family} ${flow.id ?? ''} ${tupleText(flow.orig)}`, flow);
      }
    }
    const report = await this.deleteMany(found.values(), opts);
    return { ...report, deleted: report.deleted + flushed, matched: found.size + flushed, dumps, flushes };
  }

  /** Inserts one entry (as `conntrack -I`); EEXIST when its tuple is taken. */
  async create(f: NewFlow, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const [err] = await this.createMany([f], opts);
    if (err) throw err;
  }

  /** Inserts many entries, pipelined; one result per entry (undefined on success). */
  async createMany(
    flows: readonly NewFlow[],
    opts: { signal?: AbortSignal; perDatagram?: number } = {},
  ): Promise<(NetlinkError | undefined)[]> {
    const msgs: OutMessage[] = [];
    const pre: (NetlinkError | undefined)[] = [];
    const sentIdx: number[] = [];
    flows.forEach((f, i) => {
      try {
        msgs.push(newRequest(f));
        sentIdx.push(i);
        pre.push(undefined);
      } catch (e) {
        pre.push(invalid(`create conntrack ${tupleText(f.orig)}`, e));
      }
    });
    const results = await this.transport.pipeline(msgs, {
      ...(opts.signal ? { signal: opts.signal } : {}),
      perDatagram: opts.perDatagram ?? DEFAULT_PER_DATAGRAM,
    });
    results.forEach((r, j) => {
      pre[sentIdx[j]!] = r;
    });
    return pre;
  }

  /** The number of entries in this namespace's table and the table's limit. */
  async stats(opts: { signal?: AbortSignal } = {}): Promise<CtGlobalStats> {
    const msg = statsRequest();
    const [m] = await this.transport.request(msg, sig(opts));
    if (!m) throw new NetlinkDecodeError(msg.label, 0, 'no reply message');
    const nf = splitNfPayload(m.payload);
    if (!nf) throw new NetlinkDecodeError(msg.label, 0, 'reply shorter than nfgenmsg');
    const a = new AttrSet(nf.attrs, msg.label, 4);
    return {
      entries: a.require(CTA_STATS_GLOBAL.ENTRIES, a.u32(CTA_STATS_GLOBAL.ENTRIES, 'net')),
      maxEntries: a.u32(CTA_STATS_GLOBAL.MAX_ENTRIES, 'net') ?? 0,
    };
  }

  /** Per-CPU conntrack counters (what `conntrack -S` prints). */
  async statsPerCpu(opts: { signal?: AbortSignal } = {}): Promise<CtCpuStats[]> {
    const msg = statsCpuRequest();
    const replies = await this.transport.request(msg, { dump: true, ...sig(opts) });
    return replies.map((m, i) => {
      const nf = splitNfPayload(m.payload);
      if (!nf) throw new NetlinkDecodeError(`${msg.label}: reply ${i}`, 0, 'reply shorter than nfgenmsg');
      const a = new AttrSet(nf.attrs, `${msg.label}: cpu ${nf.resId}`, 4);
      const n = (t: number): number => a.u32(t, 'net') ?? 0;
      return {
        cpu: nf.resId,
        found: n(CTA_STATS.FOUND),
        invalid: n(CTA_STATS.INVALID),
        insert: n(CTA_STATS.INSERT),
        insertFailed: n(CTA_STATS.INSERT_FAILED),
        drop: n(CTA_STATS.DROP),
        earlyDrop: n(CTA_STATS.EARLY_DROP),
        error: n(CTA_STATS.ERROR),
        searchRestart: n(CTA_STATS.SEARCH_RESTART),
        clashResolve: n(CTA_STATS.CLASH_RESOLVE),
        chainTooLong: n(CTA_STATS.CHAIN_TOOLONG),
      };
    });
  }
}

/** Decodes one IPCTNL_MSG_CT_NEW reply (a dump part or a GET answer). */
export function decodeReply(m: InMessage, where: string): Flow {
  if (m.type !== CT_NEW_TYPE) {
    throw new NetlinkDecodeError(where, 0, `unexpected message type 0x${m.type.toString(16)}`);
  }
  const p = m.payload;
  if (p.length < 4) throw new NetlinkDecodeError(where, 0, `payload of ${p.length} bytes is shorter than nfgenmsg`);
  // The attributes follow the nfgenmsg (family u8, version u8, res_id be16); decoded in place.
  return decodeFlowAt(p[0]!, p, 4, p.length, where, 0);
}

/** decodeReply for the n-th entry of a dump: the label names the entry only when it fails. */
function decodeEntry(m: InMessage, label: string, n: number): Flow {
  try {
    return decodeReply(m, label);
  } catch (e) {
    if (!(e instanceof NetlinkDecodeError)) throw e;
    const prefix = `${e.where} at offset ${e.offset}: `;
    throw new NetlinkDecodeError(
      `${label}: entry ${n}`,
      e.offset,
      e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message,
    );
  }
}
