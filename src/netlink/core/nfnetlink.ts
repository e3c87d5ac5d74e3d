// nfnetlink: the netfilter netlink bus. Every message starts with struct nfgenmsg
// (family u8, version u8, res_id be16) and its type is (subsystem << 8) | command.

import { AttrWriter } from './attrs.ts';
import { ByteWriter } from './bytes.ts';
import { NFNETLINK_V0 } from './constants.ts';
import type { OutMessage } from './message.ts';

export const nfnlType = (subsys: number, cmd: number): number => (subsys << 8) | cmd;
export const nfnlSubsys = (type: number): number => type >> 8;
export const nfnlCmd = (type: number): number => type & 0xff;

/**
 * Builds an nfnetlink message: the nfgenmsg header, then whatever `fill` writes as
 * attributes (in network byte order where the subsystem says so). `sizeHint`: the expected
 * payload size, so that a large message is not copied again and again as it grows.
 */
export function nfMessage(
  subsys: number,
  cmd: number,
  family: number,
  flags: number,
  label: string,
  fill: (w: AttrWriter) => void = () => {},
  resId = 0,
  sizeHint = 128,
): OutMessage {
  // Small messages are written in one reused writer and copied out into a slab (bytes.ts):
  // no buffer of its own per message while it is written. A large one (a set's elements)
  // gets its own writer, which is not kept afterwards.
  const own = scratchBusy || sizeHint > SCRATCH_MAX;
  const out = own ? new ByteWriter(sizeHint) : scratch;
  out.truncate(0);
  if (!own) scratchBusy = true;
  try {
    out.u8(family).u8(NFNETLINK_V0).u16be(resId);
    fill(new AttrWriter(out));
    return { type: nfnlType(subsys, cmd), flags, payload: own ? out.toBytes() : out.toSlabBytes(), label };
  } finally {
    if (!own) {
      scratchBusy = false;
      // Grown past its size by one large message: dropped rather than kept at that size.
      if (scratch.buffer.length > SCRATCH_MAX) scratch = new ByteWriter(SCRATCH_SIZE);
    }
  }
}

const SCRATCH_SIZE = 1024;
const SCRATCH_MAX = 16 * 1024;
let scratch = new ByteWriter(SCRATCH_SIZE);
/** A fill that builds another message meanwhile gets a writer of its own. */
let scratchBusy = false;

/** The nfgenmsg of a received message and the attributes after it. */
export function splitNfPayload(
  payload: Uint8Array,
): { family: number; version: number; resId: number; attrs: Uint8Array } | undefined {
  if (payload.length < 4) return undefined;
  return {
    family: payload[0]!,
    version: payload[1]!,
    resId: (payload[2]! << 8) | payload[3]!,
    attrs: payload.subarray(4),
  };
}
