// A RawSocket whose "kernel" is a function from request messages to reply messages, in the
// spirit of mdlayher/netlink's nltest.Dial: everything above the socket (framing, seq
// matching, ACKs, dumps, batches) runs for real. Used by unit tests of protocol clients.

import { ByteWriter } from '../bytes.ts';
import { AttrWriter } from '../attrs.ts';
import {
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_MULTI,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSG_HDRLEN,
  NLMSGERR_ATTR_MSG,
} from '../constants.ts';
import { errnoNumber } from '../errors.ts';
import type { InMessage } from '../message.ts';
import { parseMessages } from '../message.ts';
import type { RawSocket, SocketFailure } from '../raw-socket.ts';

/** A reply to queue: a type, flags and payload; seq and pid are filled from the request. */
export interface FakeReply {
  type: number;
  flags?: number;
  payload: Uint8Array;
  /** Overrides the seq copied from the request (to simulate stray replies). */
  seq?: number;
}

/** Handles one datagram's worth of requests and returns the datagrams to deliver. */
export type FakeHandler = (requests: InMessage[], raw: Uint8Array) => FakeReply[][] | FakeReply[];

const PORT = 4242;

export class FakeKernel implements RawSocket {
  readonly localPort = PORT;
  /** Every datagram sent, in order, for assertions. */
  readonly sent: Uint8Array[] = [];
  private handler: FakeHandler;
  private onDatagram: (buf: Uint8Array) => void = () => {};
  private onError: (err: SocketFailure) => void = () => {};
  maxSend = 1 << 20;
  closed = false;

  constructor(handler: FakeHandler) {
    this.handler = handler;
  }

  setHandler(handler: FakeHandler): void {
    this.handler = handler;
  }

  listen(onDatagram: (buf: Uint8Array) => void, onError: (err: SocketFailure) => void): void {
    this.onDatagram = onDatagram;
    this.onError = onError;
  }

  maxSendBytes(): number {
    return this.maxSend;
  }

  async send(chunks: readonly Uint8Array[]): Promise<void> {
    const raw = Buffer.concat(chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength)));
    this.sent.push(raw);
    const requests = parseMessages(raw);
    const out = this.handler(requests, raw);
    const datagrams: FakeReply[][] =
      out.length > 0 && Array.isArray(out[0]) ? (out as FakeReply[][]) : [out as FakeReply[]];
    const seq = requests.at(-1)?.seq ?? 0;
    // Deliver asynchronously, as a socket would.
    setImmediate(() => {
      for (const d of datagrams) {
        if (d.length === 0) continue;
        const w = new ByteWriter();
        for (const r of d) {
          w.u32le(NLMSG_HDRLEN + r.payload.length)
            .u16le(r.type)
            .u16le(r.flags ?? 0)
            .u32le(r.seq ?? seq)
            .u32le(this.localPort)
            .bytes(r.payload)
            .align4();
        }
        this.onDatagram(w.toBytes());
      }
    });
  }

  /** Simulates an asynchronous socket error such as ENOBUFS. */
  fail(code: string): void {
    this.onError({ errno: errnoNumber(code), code });
  }

  close(): void {
    this.closed = true;
  }
}

/** An NLMSG_ERROR reply: errno 0 is an ACK. Echoes the request header as the kernel does. */
export function errorReply(req: InMessage, errno: number, tlvs?: Uint8Array, flags = 0): FakeReply {
  const w = new ByteWriter();
  w.u32le(-errno >>> 0);
  w.u32le(NLMSG_HDRLEN + req.payload.length)
    .u16le(req.type)
    .u16le(req.flags)
    .u32le(req.seq)
    .u32le(req.pid);
  if (tlvs) w.bytes(tlvs);
  return { type: NLMSG_ERROR, flags, payload: w.toBytes(), seq: req.seq };
}

export const ackReply = (req: InMessage): FakeReply => errorReply(req, 0);

/** An NLMSG_ERROR reply carrying the kernel's extended-ACK text (NLMSGERR_ATTR_MSG), request capped. */
export function extAckErrorReply(req: InMessage, errno: number, message: string): FakeReply {
  const tlvs = new AttrWriter().str(NLMSGERR_ATTR_MSG, message).out.toBytes();
  return errorReply(req, errno, tlvs, NLM_F_CAPPED | NLM_F_ACK_TLVS);
}

export function doneReply(req: InMessage, status = 0, flags = NLM_F_MULTI): FakeReply {
  const w = new ByteWriter();
  w.u32le(status >>> 0);
  return { type: NLMSG_DONE, flags, payload: w.toBytes(), seq: req.seq };
}
