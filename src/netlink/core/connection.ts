// Request/response over one netlink socket: sequence numbers, ACKs and errors, multipart
// dumps (with NLM_F_DUMP_INTR retries), nfnetlink batches, time-outs and cancellation.
//
// One exchange is in flight per socket at a time (a FIFO queue), so concurrent callers
// never see each other's replies. A reply whose seq belongs to no live exchange (for
// instance the late answer to a request that timed out) is dropped.

import { SerialQueue } from '../../base/serial.ts';
import { align4, ByteWriter } from './bytes.ts';
import {
  NFNETLINK_V0,
  NFNL_MSG_BATCH_BEGIN,
  NFNL_MSG_BATCH_END,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_DUMP_INTR,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_NOOP,
  NLMSG_OVERRUN,
  AF_UNSPEC,
} from './constants.ts';
import { errnoNumber, NetlinkError } from './errors.ts';
import type { InMessage, OutMessage } from './message.ts';
import { nfnlBatchBytes, parseErrorPayload, parseMessages, writeMessage } from './message.ts';
import type { RawSocket, SocketFailure } from './raw-socket.ts';

export interface RequestOptions {
  /** Send as a dump (NLM_F_DUMP) and collect every part until NLMSG_DONE. */
  dump?: boolean;
  signal?: AbortSignal;
  /** Overrides the connection's time-out for this exchange. */
  timeoutMs?: number;
  /**
   * A dump the kernel marks interrupted (NLM_F_DUMP_INTR: what it lists changed while it was
   * read, so the replies may miss or repeat what changed) is returned as read instead of
   * restarted, and this is called. For a reader that knows what changed meanwhile and under
   * steady change, where every restart would be interrupted again.
   */
  onInterrupted?: () => void;
}

export interface BatchOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  /**
   * Receives every reply of the batch that is not an ACK or error (the kernel's echo of a
   * message sent with NLM_F_ECHO, e.g. a new rule with its handle), with the index of the
   * message it answers.
   */
  onReply?: (msg: InMessage, index: number) => void;
}

/** What every protocol client talks to; the real socket and the fake kernel both sit below it. */
export interface NetlinkTransport {
  /** Sends one request; resolves with the reply messages (ACK and DONE excluded). */
  request(msg: OutMessage, opts?: RequestOptions): Promise<InMessage[]>;
  /**
   * Sends the messages as one nfnetlink batch for subsystem `subsys`: the kernel applies
   * all or none. Rejects with the NetlinkError of the first message the kernel refused.
   */
  batch(subsys: number, msgs: readonly OutMessage[], opts?: BatchOptions): Promise<void>;
  /** The largest batch, in bytes, that fits in one datagram on this socket. */
  readonly maxBatchBytes: number;
  close(): void;
}

export interface ConnectionOptions {
  /** Time allowed for one exchange before it fails with ETIMEDOUT. */
  timeoutMs?: number;
  /** How often a dump interrupted by a concurrent change (NLM_F_DUMP_INTR) is restarted. */
  dumpRetries?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_DUMP_RETRIES = 8;

/** Outcome a reply handler returns: keep reading, or finish with a value or an error. */
type Step = { done: false } | { done: true; error?: Error };

interface Exchange {
  accepts(seq: number): boolean;
  onMessage(m: InMessage): Step;
}

class DumpInterrupted extends Error {}

/** What one send carried, for the errors of the send as a whole (a time-out, a closed socket). */
interface SendSubject {
  /** The label of its first message. */
  op: string;
  /** How many messages it carried. */
  messages: number;
}

function subjectError(sent: SendSubject, errno: number, detail?: string): NetlinkError {
  return new NetlinkError(sent.op, errno, undefined, {
    ...(detail !== undefined ? { detail } : {}),
    ...(sent.messages > 1 ? { messages: sent.messages } : {}),
  });
}

/** The element count a message carries, for its error. */
const elementsOf = (m: OutMessage): { elements?: number } => (m.elements !== undefined ? { elements: m.elements } : {});

export class NetlinkConnection implements NetlinkTransport {
  private readonly sock: RawSocket;
  private readonly timeoutMs: number;
  private readonly dumpRetries: number;
  private seq: number;
  private readonly serial = new SerialQueue();
  private current: { ex: Exchange; finish: (err?: Error) => void; sent: SendSubject } | undefined;
  private closed = false;

  constructor(sock: RawSocket, opts: ConnectionOptions = {}) {
    this.sock = sock;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.dumpRetries = opts.dumpRetries ?? DEFAULT_DUMP_RETRIES;
    // Start away from 0 so that our replies are never confused with unsolicited ones.
    this.seq = 1 + Math.floor(Math.random() * 0x3fffffff);
    sock.listen(
      (buf) => this.onDatagram(buf),
      (err) => this.onSocketError(err),
    );
  }

  get maxBatchBytes(): number {
    return this.sock.maxSendBytes();
  }

  private nextSeq(count = 1): number {
    const first = this.seq;
    this.seq = (this.seq + count) >>> 0;
    if (this.seq < first) this.seq = 1 + count; // wrapped
    return this.seq - count;
  }

  private enqueue<T>(op: () => Promise<T>): Promise<T> {
    return this.serial.run(op);
  }

  request(msg: OutMessage, opts: RequestOptions = {}): Promise<InMessage[]> {
    return this.enqueue(async () => {
      if (!opts.dump) return this.requestOnce(msg, opts);
      for (let attempt = 0; ; attempt++) {
        try {
          return await this.requestOnce(msg, opts);
        } catch (err) {
          if (!(err instanceof DumpInterrupted) || attempt >= this.dumpRetries) {
            if (err instanceof DumpInterrupted) {
              const attempts = attempt + 1;
              throw new NetlinkError(msg.label, errnoNumber('EINTR'), undefined, {
                detail: `dump interrupted ${attempts} times`,
                attempts,
              });
            }
            throw err;
          }
        }
      }
    });
  }

  private async requestOnce(msg: OutMessage, opts: RequestOptions): Promise<InMessage[]> {
    const seq = this.nextSeq();
    const flags = msg.flags | NLM_F_REQUEST | (opts.dump ? NLM_F_DUMP : NLM_F_ACK);
    const out = new ByteWriter(msg.payload.length + 32);
    writeMessage(out, { ...msg, flags }, seq, this.sock.localPort);
    const replies: InMessage[] = [];
    let interrupted = false;
    const ex: Exchange = {
      accepts: (s) => s === seq,
      onMessage: (m) => {
        if (m.flags & NLM_F_DUMP_INTR) interrupted = true;
        if (m.type === NLMSG_ERROR) {
          const e = parseErrorPayload(m);
          if (e.errno === 0) return { done: true };
          return {
            done: true,
            error: new NetlinkError(msg.label, e.errno, e.extack, {
              seq: m.seq,
              ...(e.echo ? { echo: e.echo.slice() } : {}),
            }),
          };
        }
        if (m.type === NLMSG_DONE) {
          // NLMSG_DONE carries an int: a negative errno when the dump itself failed.
          if (m.payload.length >= 4) {
            const status = new DataView(m.payload.buffer, m.payload.byteOffset, 4).getInt32(0, true);
            if (status < 0)
              return { done: true, error: new NetlinkError(msg.label, -status, undefined, { seq: m.seq }) };
          }
          if (interrupted) {
            if (!opts.onInterrupted) return { done: true, error: new DumpInterrupted() };
            opts.onInterrupted();
          }
          return { done: true };
        }
        if (m.type === NLMSG_NOOP || m.type === NLMSG_OVERRUN) return { done: false };
        replies.push(m);
        return { done: false };
      },
    };
    await this.exchange({ op: msg.label, messages: 1 }, [out.toBytes()], ex, opts.timeoutMs, opts.signal);
    return replies;
  }

  batch(subsys: number, msgs: readonly OutMessage[], opts: BatchOptions = {}): Promise<void> {
    if (msgs.length === 0) return Promise.resolve();
    return this.enqueue(async () => {
      // seq layout: begin, then one per message, then end.
      const first = this.nextSeq(msgs.length + 2);
      const beginSeq = first;
      const lastSeq = first + msgs.length;
      const pid = this.sock.localPort;
      // Sized up front: a large batch (megabytes) is then written once, not copied as it grows.
      const out = new ByteWriter(nfnlBatchBytes(msgs));
      writeMessage(out, batchControl(NFNL_MSG_BATCH_BEGIN, subsys), beginSeq, pid);
      msgs.forEach((m, i) => {
        // Only the last message asks for an ACK: its answer is the last one the kernel sends
        // for a batch that was processed, and errors are reported whether asked for or not.
        const ack = i === msgs.length - 1 ? NLM_F_ACK : 0;
        writeMessage(out, { ...m, flags: m.flags | NLM_F_REQUEST | ack }, first + 1 + i, pid);
      });
      writeMessage(out, batchControl(NFNL_MSG_BATCH_END, subsys), lastSeq + 1, pid);
      // The writer is this batch's alone: its bytes are sent as they are, not copied again.
      const bytes = out.view();
      const sent: SendSubject = { op: msgs[0]!.label, messages: msgs.length };
      if (bytes.length > this.sock.maxSendBytes()) {
        const detail = `${bytes.length} bytes exceed the socket's ${this.sock.maxSendBytes()}`;
        throw subjectError(sent, errnoNumber('EMSGSIZE'), detail);
      }
      let firstError: NetlinkError | undefined;
      const ex: Exchange = {
        accepts: (s) => s >= beginSeq && s <= lastSeq + 1,
        onMessage: (m) => {
          if (m.type !== NLMSG_ERROR) {
            const which = m.seq - first - 1;
            if (opts.onReply && which >= 0 && which < msgs.length) opts.onReply(m, which);
            return { done: false };
          }
          const e = parseErrorPayload(m);
          if (e.errno !== 0 && !firstError) {
            const which = m.seq - first - 1;
            const culprit = msgs[which];
            firstError = culprit
              ? new NetlinkError(culprit.label, e.errno, e.extack, { seq: m.seq, ...elementsOf(culprit) })
              : new NetlinkError(which < 0 ? 'batch begin' : 'batch end', e.errno, e.extack, {
                  seq: m.seq,
                  detail: `the batch's control message (its first message: ${sent.op})`,
                  messages: msgs.length,
                });
          }
          // The kernel answers the ACK-flagged last message unless the whole batch was
          // refused, in which case a single error names the batch's begin message.
          if (m.seq === lastSeq || (m.seq === beginSeq && e.errno !== 0))
            return { done: true, ...(firstError ? { error: firstError } : {}) };
          return { done: false };
        },
      };
      await this.exchange(sent, [bytes], ex, opts.timeoutMs ?? Math.max(this.timeoutMs, 0), opts.signal);
    });
  }

  /**
   * Sends independent requests back to back, many per datagram, for subsystems without
   * nfnetlink batches (ctnetlink): the kernel handles each message on its own, in order.
   * Only the last message of each datagram asks for an ACK; errors come whether asked for
   * or not, so the ACK (or error) of the last one ends the datagram's exchange. Resolves
   * with one entry per message: undefined for success, else its NetlinkError. At most
   * `perDatagram` messages go in one datagram, so that the replies the kernel queues before
   * we read any (one per failed message) fit in the receive buffer.
   */
  pipeline(
    msgs: readonly OutMessage[],
    opts: BatchOptions & { perDatagram?: number } = {},
  ): Promise<(NetlinkError | undefined)[]> {
    const results = new Array<NetlinkError | undefined>(msgs.length).fill(undefined);
    if (msgs.length === 0) return Promise.resolve(results);
    const perDatagram = Math.max(1, opts.perDatagram ?? 256);
    return this.enqueue(async () => {
      const pid = this.sock.localPort;
      const maxBytes = this.sock.maxSendBytes();
      for (let start = 0; start < msgs.length;) {
        const first = this.nextSeq(Math.min(perDatagram, msgs.length - start));
        const out = new ByteWriter(4096);
        let end = start;
        while (end < msgs.length && end - start < perDatagram) {
          const m = msgs[end]!;
          const before = out.length;
          writeMessage(out, { ...m, flags: m.flags | NLM_F_REQUEST }, first + (end - start), pid);
          if (out.length > maxBytes && end > start) {
            out.truncate(before);
            break;
          }
          end++;
        }
        const count = end - start;
        // Set NLM_F_ACK on the last message in place: its flags are at offset 6 of its header.
        const bytes = out.toBytes();
        let lastOff = 0;
        for (let off = 0, i = 0; i < count; i++) {
          lastOff = off;
          off += align4(new DataView(bytes.buffer, bytes.byteOffset + off, 4).getUint32(0, true));
        }
        const dv = new DataView(bytes.buffer, bytes.byteOffset + lastOff + 6, 2);
        dv.setUint16(0, dv.getUint16(0, true) | NLM_F_ACK, true);
        const lastSeq = first + count - 1;
        const base = start;
        const sent: SendSubject = { op: msgs[start]!.label, messages: count };
        const ex: Exchange = {
          accepts: (s) => s >= first && s <= lastSeq,
          onMessage: (m) => {
            if (m.type !== NLMSG_ERROR) return { done: false };
            const e = parseErrorPayload(m);
            const i = base + (m.seq - first);
            if (e.errno !== 0)
              results[i] = new NetlinkError(msgs[i]!.label, e.errno, e.extack, { seq: m.seq, ...elementsOf(msgs[i]!) });
            return { done: m.seq === lastSeq };
          },
        };
        await this.exchange(sent, [bytes], ex, opts.timeoutMs, opts.signal);
        start = end;
      }
      return results;
    });
  }

  private exchange(
    sent: SendSubject,
    chunks: Uint8Array[],
    ex: Exchange,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (this.closed) return Promise.reject(subjectError(sent, errnoNumber('EBADF'), 'connection closed'));
    if (signal?.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
    return new Promise<void>((resolve, reject) => {
      const ms = timeoutMs ?? this.timeoutMs;
      const timedOut = (): NetlinkError => subjectError(sent, errnoNumber('ETIMEDOUT'), `no reply within ${ms} ms`);
      const timer = setTimeout(() => finish(timedOut()), ms);
      const onAbort = (): void =>
        finish(signal?.reason instanceof Error ? signal.reason : new Error(`${sent.op}: aborted`));
      signal?.addEventListener('abort', onAbort, { once: true });
      const finish = (err?: Error): void => {
        if (this.current?.ex !== ex) return;
        this.current = undefined;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      this.current = { ex, finish, sent };
      this.sock.send(chunks).catch((e: SocketFailure) => finish(subjectError(sent, e.errno)));
    });
  }

  private onDatagram(buf: Uint8Array): void {
    const cur = this.current;
    if (!cur) return;
    let msgs: InMessage[];
    try {
      msgs = parseMessages(buf);
    } catch (err) {
      cur.finish(err as Error);
      return;
    }
    for (const m of msgs) {
      if (!cur.ex.accepts(m.seq)) continue;
      let step: Step;
      try {
        step = cur.ex.onMessage(m);
      } catch (err) {
        cur.finish(err as Error);
        return;
      }
      if (step.done) {
        cur.finish(step.error);
        return;
      }
    }
  }

  private onSocketError(err: SocketFailure): void {
    // ENOBUFS means the kernel dropped messages for us: the exchange in flight cannot be
    // trusted any more. Its caller decides whether to retry (a full resync, a new dump).
    this.current?.finish(new NetlinkError('receive', err.errno));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const cur = this.current;
    cur?.finish(subjectError(cur.sent, errnoNumber('ECANCELED'), 'connection closed'));
    this.sock.close();
  }
}

/** BATCH_BEGIN/END: an nfgenmsg whose res_id names the subsystem, in network byte order. */
function batchControl(type: number, subsys: number): OutMessage {
  const p = new Uint8Array(4);
  p[0] = AF_UNSPEC;
  p[1] = NFNETLINK_V0;
  p[2] = (subsys >> 8) & 0xff;
  p[3] = subsys & 0xff;
  return { type, flags: NLM_F_REQUEST, payload: p, label: type === NFNL_MSG_BATCH_BEGIN ? 'batch begin' : 'batch end' };
}
