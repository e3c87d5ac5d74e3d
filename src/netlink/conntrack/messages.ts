// The ctnetlink requests this layer sends, as OutMessages with labels that name the operation
// and the flow ("delete conntrack udp 10.0.0.1:40000 -> 10.96.0.10:53"). The transport adds
// NLM_F_REQUEST and NLM_F_ACK or NLM_F_DUMP.
//
//   nlmsghdr type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_*
//   nfgenmsg  family = AF_INET | AF_INET6 | AF_UNSPEC (dumps: all), version 0, res_id 0
//   attributes (flow.ts, filter.ts)

import type { IPFamily } from '../../base/ip.ts';
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  NfnlSubsys,
  NLM_F_CREATE,
  NLM_F_EXCL,
  nfMessage,
  nfnlType,
} from '../core/index.ts';
import type { AttrWriter, OutMessage } from '../core/index.ts';
import { CTA, CTA_IP, CTA_PROTO, CTA_TUPLE, CtMsg, IPPROTO, PORT_PROTOS } from './constants.ts';
import type { FlowFilter } from './filter.ts';
import { exactInKernel, filterFamily, filterText, writeDumpFilter } from './filter.ts';
import type { AddrScratch, NewFlow, Tuple } from './flow.ts';
import { familyNumber, tupleAddrs, tupleFamily, tupleText, writeNewFlow, writeTuple } from './flow.ts';

const ct = (
  cmd: number,
  family: number,
  flags: number,
  label: string,
  fill?: Parameters<typeof nfMessage>[5],
): OutMessage => nfMessage(NfnlSubsys.CTNETLINK, cmd, family, flags, label, fill);

/** Identifies one entry for GET and DELETE: its original tuple, zone, and optionally its id. */
export interface FlowKey {
  orig: Tuple;
  zone?: number;
  /**
   * When given, the kernel acts only if the entry's id still matches (else ENOENT). The id
   * hashes the entry's address and original tuple (nf_ct_get_id), so it tells a different
   * entry apart, but not one re-created with the same tuple in a recycled slot.
   */
  id?: number;
}

export function keyText(k: FlowKey): string {
  let s = tupleText(k.orig);
  if (k.zone !== undefined) s += ` zone ${k.zone}`;
  if (k.id !== undefined) s += ` id ${k.id >>> 0}`;
  return s;
}

function writeKeyAttrs(w: AttrWriter, k: FlowKey, addrs: ReturnType<typeof tupleAddrs>): void {
  // CTA_TUPLE_ORIG is never omitted: a DELETE without a tuple flushes the whole table.
  w.nested(CTA.TUPLE_ORIG, (t) => writeTuple(t, k.orig, addrs));
  if (k.zone !== undefined) w.u16(CTA.ZONE, k.zone, 'net');
  if (k.id !== undefined) w.u32(CTA.ID, k.id, 'net');
}

function keyMessage(cmd: number, verb: string, k: FlowKey): OutMessage {
  const addrs = tupleAddrs(k.orig);
  return ct(cmd, familyNumber(addrs.family), 0, `${verb} conntrack ${keyText(k)}`, (w) => writeKeyAttrs(w, k, addrs));
}

/** IPCTNL_MSG_CT_DELETE for one entry. Throws a TypeError for an invalid tuple. */
export const deleteRequest = (k: FlowKey): OutMessage => keyMessage(CtMsg.DELETE, 'delete', k);

/** A DELETE whose label is only built when asked for (on error): 10,000 labels cost GC time. */
class BulkDelete implements OutMessage {
  readonly type = nfnlType(NfnlSubsys.CTNETLINK, CtMsg.DELETE);
  readonly flags = 0;
  readonly payload: Uint8Array;
  private readonly key: FlowKey;

  constructor(payload: Uint8Array, key: FlowKey) {
    this.payload = payload;
    this.key = key;
  }

  get label(): string {
    return `delete conntrack ${keyText(this.key)}`;
  }
}

// The bulk DELETE encoder writes bytes at computed offsets instead of going through
// AttrWriter: for 10,000 deletes the general writer's calls and closures cost more than the
// kernel's work. Its output is byte for byte that of deleteRequest (a unit test holds it to
// that, and deleteRequest to conntrack -D's capture):
//
//   nfgenmsg            family, 0, 0, 0
//   CTA_TUPLE_ORIG      (nested)
//     CTA_TUPLE_IP      (nested) V4_SRC, V4_DST (4 bytes) | V6_SRC, V6_DST (16 bytes)
//     CTA_TUPLE_PROTO   (nested) NUM (u8), then SRC_PORT, DST_PORT (be16) for port protocols,
//                       or ICMP(V6)_CODE, _TYPE (u8), _ID (be16); nothing more for the rest
//     CTA_TUPLE_ZONE    be16, when the tuple has a zone
//   CTA_ZONE            be16, when the key has one
//   CTA_ID              be32, when the key has one

/** The largest DELETE payload: nfgenmsg, an IPv6 tuple with ICMPv6 fields and a zone, CTA_ZONE and CTA_ID. */
const MAX_DELETE_BYTES = 4 + 4 + (4 + 20 + 20) + 36 + 8 + 8 + 8;

const NESTED = 0x8000;

function hdr(b: Uint8Array, at: number, len: number, type: number): void {
  b[at] = len & 0xff;
  b[at + 1] = len >> 8;
  b[at + 2] = type & 0xff;
  b[at + 3] = type >> 8;
}

/** An unsigned integer of `bits` bits, else a TypeError naming the field. */
function uint(v: number | undefined, bits: 8 | 16 | 32, what: string, k: FlowKey): number {
  const n = v ?? 0;
  if (!Number.isInteger(n) || n < 0 || n > 2 ** bits - 1)
    throw new TypeError(`conntrack key ${keyText(k)}: ${what} ${String(v)} is not a u${bits}`);
  return n;
}

/** An attribute holding one u8 (8 bytes with padding, which the zeroed buffer provides). */
function u8At(b: Uint8Array, at: number, type: number, v: number): number {
  hdr(b, at, 5, type);
  b[at + 4] = v;
  return at + 8;
}

/** An attribute holding one be16 (8 bytes with padding). */
function be16At(b: Uint8Array, at: number, type: number, v: number): number {
  hdr(b, at, 6, type);
  b[at + 4] = v >> 8;
  b[at + 5] = v & 0xff;
  return at + 8;
}

function copyAt(b: Uint8Array, at: number, src: Uint8Array): void {
  for (let i = 0; i < src.length; i++) b[at + i] = src[i]!;
}

/**
 * Writes the payload of a DELETE for `k` at b[at...] (zeroed memory) and returns its length.
 * Throws a TypeError for an invalid key before writing anything.
 */
function writeDeleteAt(b: Uint8Array, at: number, k: FlowKey, scratch: AddrScratch): number {
  const t = k.orig;
  const addrs = tupleAddrs(t, scratch);
  const proto = uint(t.proto, 8, 'protocol', k);
  const ports = PORT_PROTOS.has(proto);
  const icmp = proto === IPPROTO.ICMP || proto === IPPROTO.ICMPV6;
  const sport = ports ? uint(t.srcPort, 16, 'source port', k) : 0;
  const dport = ports ? uint(t.dstPort, 16, 'destination port', k) : 0;
  const icmpCode = icmp ? uint(t.icmpCode, 8, 'ICMP code', k) : 0;
  const icmpType = icmp ? uint(t.icmpType, 8, 'ICMP type', k) : 0;
  const icmpId = icmp ? uint(t.icmpId, 16, 'ICMP id', k) : 0;
  const tupleZone = t.zone === undefined ? -1 : uint(t.zone, 16, 'tuple zone', k);
  const zone = k.zone === undefined ? -1 : uint(k.zone, 16, 'zone', k);
  const id = k.id === undefined ? -1 : k.id >>> 0; // as u32be: any number, taken modulo 2^32
  const v4 = addrs.family === 'IPv4';
  const alen = v4 ? 4 : 16;
  const start = at;
  b[at] = v4 ? AF_INET : AF_INET6; // nfgenmsg: version 0, res_id 0 (zeroed)
  at += 4;
  const origAt = at;
  at += 4;
  hdr(b, at, 4 + 2 * (4 + alen), CTA_TUPLE.IP | NESTED);
  at += 4;
  hdr(b, at, 4 + alen, v4 ? CTA_IP.V4_SRC : CTA_IP.V6_SRC);
  copyAt(b, at + 4, addrs.src);
  at += 4 + alen;
  hdr(b, at, 4 + alen, v4 ? CTA_IP.V4_DST : CTA_IP.V6_DST);
  copyAt(b, at + 4, addrs.dst);
  at += 4 + alen;
  hdr(b, at, ports ? 28 : icmp ? 36 : 12, CTA_TUPLE.PROTO | NESTED);
  at = u8At(b, at + 4, CTA_PROTO.NUM, proto);
  if (ports) {
    at = be16At(b, at, CTA_PROTO.SRC_PORT, sport);
    at = be16At(b, at, CTA_PROTO.DST_PORT, dport);
  } else if (icmp) {
    // conntrack -G/-D order (code, type, id), as writeTuple.
    const six = proto === IPPROTO.ICMPV6;
    at = u8At(b, at, six ? CTA_PROTO.ICMPV6_CODE : CTA_PROTO.ICMP_CODE, icmpCode);
    at = u8At(b, at, six ? CTA_PROTO.ICMPV6_TYPE : CTA_PROTO.ICMP_TYPE, icmpType);
    at = be16At(b, at, six ? CTA_PROTO.ICMPV6_ID : CTA_PROTO.ICMP_ID, icmpId);
  }
  if (tupleZone >= 0) at = be16At(b, at, CTA_TUPLE.ZONE, tupleZone);
  hdr(b, origAt, at - origAt, CTA.TUPLE_ORIG | NESTED);
  if (zone >= 0) at = be16At(b, at, CTA.ZONE, zone);
  if (id >= 0) {
    hdr(b, at, 8, CTA.ID);
    b[at + 4] = id >>> 24;
    b[at + 5] = (id >>> 16) & 0xff;
    b[at + 6] = (id >>> 8) & 0xff;
    b[at + 7] = id & 0xff;
    at += 8;
  }
  return at - start;
}

/**
 * IPCTNL_MSG_CT_DELETE for many entries, their payloads views into one buffer (one allocation
 * instead of one per message: for 10,000 deletes the garbage collector was the main cost).
 * An invalid key yields a TypeError in its place.
 */
export function deleteRequests(keys: readonly FlowKey[]): (OutMessage | TypeError)[] {
  const buf = new Uint8Array(keys.length * MAX_DELETE_BYTES);
  const scratch: AddrScratch = { src: new Uint8Array(4), dst: new Uint8Array(4) };
  const msgs: (OutMessage | TypeError)[] = new Array<OutMessage | TypeError>(keys.length);
  let off = 0;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    try {
      const n = writeDeleteAt(buf, off, k, scratch);
      msgs[i] = new BulkDelete(new Uint8Array(buf.buffer, off, n), k);
      off += n;
    } catch (e) {
      msgs[i] = e instanceof TypeError ? e : new TypeError(String(e));
    }
  }
  return msgs;
}

/** IPCTNL_MSG_CT_GET for one entry (not a dump). */
export const getRequest = (k: FlowKey): OutMessage => keyMessage(CtMsg.GET, 'get', k);

/** IPCTNL_MSG_CT_NEW with NLM_F_CREATE | NLM_F_EXCL: inserts an entry, as `conntrack -I` does. */
export function newRequest(f: NewFlow): OutMessage {
  return ct(
    CtMsg.NEW,
    familyNumber(tupleFamily(f.orig)),
    NLM_F_CREATE | NLM_F_EXCL,
    `create conntrack ${tupleText(f.orig)}`,
    (w) => writeNewFlow(w, f),
  );
}

/**
 * IPCTNL_MSG_CT_GET as a dump. `family` undefined dumps every family (AF_UNSPEC). With
 * `tupleFilter` the CTA_FILTER attributes are included (see filter.ts).
 */
export function dumpRequest(family: IPFamily | undefined, filter: FlowFilter, tupleFilter: boolean): OutMessage {
  const fam = family === undefined ? AF_UNSPEC : familyNumber(family);
  const label = `dump conntrack ${filterText({ ...filter, ...(family ? { family } : {}) })}`;
  return ct(CtMsg.GET, fam, 0, label, (w) => writeDumpFilter(w, filter, tupleFilter));
}

/**
 * IPCTNL_MSG_CT_DELETE with CTA_FILTER and partial tuples: on Linux 6.12+ the kernel deletes
 * every entry of the nfgenmsg family that matches (a filtered flush, see filter.ts); earlier
 * kernels refuse it (EINVAL, EOPNOTSUPP) without deleting anything. The attributes are those
 * of a CTA_FILTER dump request. Throws a TypeError unless exactInKernel(filter).
 *
 *   nlmsghdr type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE
 *   nfgenmsg  family = AF_INET | AF_INET6, version 0, res_id 0
 *   CTA_FILTER       { CTA_FILTER_ORIG_FLAGS u32 host order, CTA_FILTER_REPLY_FLAGS u32 }
 *   CTA_TUPLE_ORIG   { CTA_TUPLE_IP { only the addresses to match }, CTA_TUPLE_PROTO { NUM, ports to match } }
 *   CTA_TUPLE_REPLY  (when the filter has reply fields) the same
 */
export function flushRequest(filter: FlowFilter): OutMessage {
  if (!exactInKernel(filter))
    throw new TypeError(
      `conntrack filter ${filterText(filter)}: not one the kernel matches exactly; dump and delete instead`,
    );
  const family = filterFamily(filter)!;
  return ct(CtMsg.DELETE, familyNumber(family), 0, `flush conntrack ${filterText({ ...filter, family })}`, (w) =>
    writeDumpFilter(w, filter, true),
  );
}

/** IPCTNL_MSG_CT_GET_STATS: the table's entry count and limit (one reply, not a dump). */
export const statsRequest = (): OutMessage => ct(CtMsg.GET_STATS, AF_UNSPEC, 0, 'get conntrack stats');

/** IPCTNL_MSG_CT_GET_STATS_CPU (a dump): one reply per possible CPU, res_id = the CPU. */
export const statsCpuRequest = (): OutMessage => ct(CtMsg.GET_STATS_CPU, AF_UNSPEC, 0, 'get conntrack per-cpu stats');
