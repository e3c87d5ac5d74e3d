// Netlink message framing (struct nlmsghdr) and the NLMSG_ERROR payload.
//
//   0        4        6        8        12       16
//   +--------+--------+--------+--------+--------+------------------+
//   | len u32| type16 | flags16| seq u32| pid u32| payload, pad to 4|
//   +--------+--------+--------+--------+--------+------------------+
//   All header fields are in host byte order.

import { AttrSet } from './attrs.ts';
import { align4, ByteWriter } from './bytes.ts';
import {
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLMSG_HDRLEN,
  NLMSGERR_ATTR_MISS_TYPE,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
} from './constants.ts';
import type { ExtAck } from './errors.ts';
import { NetlinkDecodeError } from './errors.ts';

/** A request to send. The transport fills in seq and pid. */
export interface OutMessage {
  type: number;
  flags: number;
  /** Everything after nlmsghdr: the family header and the attributes. */
  payload: Uint8Array;
  /**
   * Names the operation and its object in errors and logs: "add chain ip kube-proxy services".
   * Bare: the verb, the kind of object, then the object; counts go in fields of their own.
   */
  label: string;
  /** How many set elements the message carries (nf_tables packs many per message). */
  elements?: number;
}

/** A message received from the kernel. `payload` is a view (no copy). */
export interface InMessage {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  payload: Uint8Array;
}

/** Appends one framed message to `out`. */
export function writeMessage(out: ByteWriter, msg: OutMessage, seq: number, pid: number): void {
  const len = NLMSG_HDRLEN + msg.payload.length;
  out.u32le(len).u16le(msg.type).u16le(msg.flags).u32le(seq).u32le(pid).bytes(msg.payload).align4();
}

/**
 * Bytes of these messages sent as one nfnetlink batch: each message padded to 4 bytes, plus
 * the batch begin and end messages (a header and a 4-byte nfgenmsg each).
 */
export function nfnlBatchBytes(msgs: readonly { payload: Uint8Array }[]): number {
  let n = 2 * (NLMSG_HDRLEN + 4);
  for (const m of msgs) n += NLMSG_HDRLEN + align4(m.payload.length);
  return n;
}

export function encodeMessage(msg: OutMessage, seq: number, pid = 0): Uint8Array {
  const out = new ByteWriter(NLMSG_HDRLEN + msg.payload.length + 4);
  writeMessage(out, msg, seq, pid);
  return out.toBytes();
}

/** Splits a datagram into its messages, checking every length. */
export function parseMessages(buf: Uint8Array): InMessage[] {
  const out: InMessage[] = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  while (off < buf.length) {
    if (buf.length - off < NLMSG_HDRLEN) {
      throw new NetlinkDecodeError(
        'nlmsghdr',
        off,
        `${buf.length - off} trailing bytes, too short for a message header`,
      );
    }
    const len = dv.getUint32(off, true);
    if (len < NLMSG_HDRLEN)
      throw new NetlinkDecodeError('nlmsghdr', off, `message length ${len} is below the header size`);
    if (len > buf.length - off) {
      throw new NetlinkDecodeError('nlmsghdr', off, `message claims ${len} bytes, only ${buf.length - off} left`);
    }
    out.push({
      type: dv.getUint16(off + 4, true),
      flags: dv.getUint16(off + 6, true),
      seq: dv.getUint32(off + 8, true),
      pid: dv.getUint32(off + 12, true),
      payload: buf.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += align4(len);
  }
  return out;
}

/** The decoded payload of an NLMSG_ERROR message (struct nlmsgerr + extended ACK). */
export interface ErrorPayload {
  /** 0 for an acknowledgement, else a positive errno. */
  errno: number;
  /** Header of the request this answers. */
  request: { len: number; type: number; flags: number; seq: number; pid: number };
  extack?: ExtAck;
  /** The request's payload (after its nlmsghdr) as echoed back, when the reply was not capped. */
  echo?: Uint8Array;
}

export function parseErrorPayload(msg: InMessage): ErrorPayload {
  const p = msg.payload;
  if (p.length < 4 + NLMSG_HDRLEN) {
    throw new NetlinkDecodeError('nlmsgerr', 0, `payload of ${p.length} bytes is shorter than struct nlmsgerr`);
  }
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const error = dv.getInt32(0, true);
  const request = {
    len: dv.getUint32(4, true),
    type: dv.getUint16(8, true),
    flags: dv.getUint16(10, true),
    seq: dv.getUint32(12, true),
    pid: dv.getUint32(16, true),
  };
  const result: ErrorPayload = { errno: -error, request };
  if (!(msg.flags & NLM_F_CAPPED) && request.len >= NLMSG_HDRLEN && 4 + request.len <= p.length) {
    result.echo = p.subarray(4 + NLMSG_HDRLEN, 4 + request.len);
  }
  if (msg.flags & NLM_F_ACK_TLVS) {
    // Without NLM_F_CAPPED the kernel echoes the whole request before the TLVs.
    let tlvStart = 4 + NLMSG_HDRLEN;
    if (!(msg.flags & NLM_F_CAPPED)) tlvStart = 4 + align4(request.len);
    if (tlvStart <= p.length) {
      const attrs = new AttrSet(p.subarray(tlvStart), 'nlmsgerr extended ack', tlvStart);
      const extack: ExtAck = {};
      const m = attrs.str(NLMSGERR_ATTR_MSG);
      if (m !== undefined) extack.msg = m;
      const o = attrs.u32(NLMSGERR_ATTR_OFFS);
      if (o !== undefined) extack.offset = o;
      const t = attrs.u32(NLMSGERR_ATTR_MISS_TYPE);
      if (t !== undefined) extack.missingType = t;
      result.extack = extack;
    }
  }
  return result;
}
