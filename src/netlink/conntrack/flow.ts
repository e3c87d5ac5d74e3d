// Conntrack entries as values, and their attribute codec.
//
//   CTA_TUPLE_ORIG / CTA_TUPLE_REPLY (nested)
//   ├─ CTA_TUPLE_IP (nested)     CTA_IP_V4_SRC, CTA_IP_V4_DST (4 bytes) | CTA_IP_V6_SRC, CTA_IP_V6_DST (16 bytes)
//   ├─ CTA_TUPLE_PROTO (nested)  CTA_PROTO_NUM (u8), then SRC_PORT, DST_PORT (be16)
//   │                            or ICMP_ID (be16), ICMP_TYPE (u8), ICMP_CODE (u8) (ICMPV6_* for IPv6)
//   └─ CTA_TUPLE_ZONE (be16, optional: a zone for one direction only)
//   CTA_STATUS be32 · CTA_TIMEOUT be32 (seconds left) · CTA_MARK be32 · CTA_ID be32 · CTA_USE be32
//   CTA_ZONE be16 · CTA_PROTOINFO (nested, TCP/SCTP state) · CTA_COUNTERS_ORIG/REPLY (nested, be64)
//
// Integers are in network byte order although the kernel does not set NLA_F_NET_BYTEORDER,
// and neither does the conntrack CLI: we match it. Addresses travel as strings in canonical
// form (base/ip), so flows compare with === and cross process boundaries as plain data.

import { ipFromBytes, parseIP } from '../../base/ip.ts';
import type { IPFamily } from '../../base/ip.ts';
import { AF_INET, AF_INET6, AttrCursor, NetlinkDecodeError } from '../core/index.ts';
import type { AttrWriter } from '../core/index.ts';
import {
  CTA,
  CTA_COUNTERS,
  CTA_IP,
  CTA_PROTO,
  CTA_PROTOINFO,
  CTA_PROTOINFO_SCTP,
  CTA_PROTOINFO_TCP,
  CTA_TIMESTAMP,
  CTA_TUPLE,
  IPPROTO,
  PORT_PROTOS,
} from './constants.ts';

/** One direction of a connection: addresses, L4 protocol and its identifying fields. */
export interface Tuple {
  src: string;
  dst: string;
  /** IP protocol number (IPPROTO.UDP ...). */
  proto: number;
  /** TCP, UDP, SCTP, DCCP, UDP-Lite. */
  srcPort?: number;
  dstPort?: number;
  /** ICMP and ICMPv6. */
  icmpId?: number;
  icmpType?: number;
  icmpCode?: number;
  /** CTA_TUPLE_ZONE: a zone that applies to this direction only. */
  zone?: number;
}

/** An attribute this layer does not interpret, kept as received. */
export interface RawAttr {
  type: number;
  nested: boolean;
  data: Uint8Array;
}

export interface Counters {
  packets: bigint;
  bytes: bigint;
}

/** A conntrack entry as the kernel reports it. */
export interface Flow {
  family: IPFamily;
  orig: Tuple;
  reply: Tuple;
  /** IPS_* bits. */
  status: number;
  /** Seconds until the entry expires. */
  timeout?: number;
  mark?: number;
  /** CTA_ZONE (both directions). */
  zone?: number;
  /** The kernel's id of the entry; a delete that carries it removes only this very entry. */
  id?: number;
  use?: number;
  /** CTA_PROTOINFO_TCP_STATE (enum tcp_conntrack) or CTA_PROTOINFO_SCTP_STATE. */
  tcpState?: number;
  sctpState?: number;
  countersOrig?: Counters;
  countersReply?: Counters;
  /** CTA_TIMESTAMP_START / STOP in nanoseconds, when net.netfilter.nf_conntrack_timestamp is on. */
  startNs?: bigint;
  stopNs?: bigint;
  /**
   * Top-level attributes not interpreted above (helper, NAT, labels, secctx, synproxy ...),
   * as views into the received datagram.
   */
  unknown: RawAttr[];
}

export const familyNumber = (f: IPFamily): number => (f === 'IPv4' ? AF_INET : AF_INET6);

export function familyOf(n: number, where: string): IPFamily {
  if (n === AF_INET) return 'IPv4';
  if (n === AF_INET6) return 'IPv6';
  throw new NetlinkDecodeError(where, 0, `address family ${n} is neither AF_INET nor AF_INET6`);
}

const PROTO_NAMES = new Map<number, string>(Object.entries(IPPROTO).map(([k, v]) => [v, k.toLowerCase()]));
export const protoName = (p: number): string => PROTO_NAMES.get(p) ?? `proto ${p}`;

const hostPort = (addr: string, port: number | undefined): string =>
  port === undefined ? addr : addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;

/** "udp 10.0.0.1:40000 -> 10.96.0.10:53", for labels and logs. */
export function tupleText(t: Tuple): string {
  let s = `${protoName(t.proto)} ${hostPort(t.src, t.srcPort)} -> ${hostPort(t.dst, t.dstPort)}`;
  if (t.icmpType !== undefined) s += ` type ${t.icmpType} code ${t.icmpCode ?? 0} id ${t.icmpId ?? 0}`;
  if (t.zone !== undefined) s += ` zone ${t.zone}`;
  return s;
}

/**
 * Dotted-quad IPv4 into `out` without allocating strings (deleting 10,000 flows parses 20,000
 * addresses; base/ip's general parser costs about a microsecond each). Strict: four decimal
 * parts 0-255 without leading zeros; anything else is left to parseIP.
 */
function v4Into(s: string, out: Uint8Array): Uint8Array | undefined {
  if (typeof s !== 'string') return undefined;
  let part = 0;
  let val = 0;
  let digits = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 46; // a final '.'
    if (c === 46) {
      if (digits === 0 || part > 3) return undefined;
      out[part++] = val;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && val === 0) return undefined; // leading zero
      val = val * 10 + (c - 48);
      if (++digits > 3 || val > 255) return undefined;
    } else return undefined;
  }
  return part === 4 ? out : undefined;
}

/** Two 4-byte buffers tupleAddrs may fill instead of allocating (for bulk encoders). */
export interface AddrScratch {
  src: Uint8Array;
  dst: Uint8Array;
}

/**
 * The address bytes of a tuple and their family; throws a TypeError for invalid or mixed ones.
 * With `scratch`, IPv4 addresses are written into it (valid until the next call).
 */
export function tupleAddrs(t: Tuple, scratch?: AddrScratch): { family: IPFamily; src: Uint8Array; dst: Uint8Array } {
  const src = v4Into(t.src, scratch?.src ?? new Uint8Array(4)) ?? parseIP(t.src)?.bytes;
  const dst = v4Into(t.dst, scratch?.dst ?? new Uint8Array(4)) ?? parseIP(t.dst)?.bytes;
  if (!src || !dst) throw new TypeError(`conntrack tuple ${tupleText(t)}: invalid address`);
  if (src.length !== dst.length) throw new TypeError(`conntrack tuple ${tupleText(t)}: mixed address families`);
  return { family: src.length === 4 ? 'IPv4' : 'IPv6', src, dst };
}

/** The address family a tuple's addresses belong to; throws on mixed or invalid ones. */
export const tupleFamily = (t: Tuple): IPFamily => tupleAddrs(t).family;

const isIcmp = (proto: number): boolean => proto === IPPROTO.ICMP || proto === IPPROTO.ICMPV6;

/** Writes the children of a CTA_TUPLE_* attribute (the caller opens the nest). */
export function writeTuple(w: AttrWriter, t: Tuple, addrs = tupleAddrs(t)): void {
  const v4 = addrs.family === 'IPv4';
  w.nested(CTA_TUPLE.IP, (ip) => {
    ip.bytes(v4 ? CTA_IP.V4_SRC : CTA_IP.V6_SRC, addrs.src);
    ip.bytes(v4 ? CTA_IP.V4_DST : CTA_IP.V6_DST, addrs.dst);
  });
  w.nested(CTA_TUPLE.PROTO, (p) => {
    p.u8(CTA_PROTO.NUM, t.proto);
    if (PORT_PROTOS.has(t.proto)) {
      p.u16(CTA_PROTO.SRC_PORT, t.srcPort ?? 0, 'net');
      p.u16(CTA_PROTO.DST_PORT, t.dstPort ?? 0, 'net');
    } else if (isIcmp(t.proto)) {
      const six = t.proto === IPPROTO.ICMPV6;
      // conntrack -G/-D order (code, type, id); the kernel's own replies use id, type, code.
      p.u8(six ? CTA_PROTO.ICMPV6_CODE : CTA_PROTO.ICMP_CODE, t.icmpCode ?? 0);
      p.u8(six ? CTA_PROTO.ICMPV6_TYPE : CTA_PROTO.ICMP_TYPE, t.icmpType ?? 0);
      p.u16(six ? CTA_PROTO.ICMPV6_ID : CTA_PROTO.ICMP_ID, t.icmpId ?? 0, 'net');
    }
  });
  if (t.zone !== undefined) w.u16(CTA_TUPLE.ZONE, t.zone, 'net');
}

// The decoder walks the bytes with one reused AttrCursor instead of building an AttrSet per
// level, and without a closure per level or per entry: a dump of 10,000 entries decodes in a
// few milliseconds, and the garbage it leaves (which the collector's time follows) is the
// Flow objects and their address strings. The cursor checks every length before it is used;
// hostile input ends in a NetlinkDecodeError naming the offset.

const cursor = new AttrCursor(Buffer.alloc(0), '', 0, 'net');

/** The current attribute's address as text; latches an error when its size is not `size`. */
function addrText(c: AttrCursor, size: number): string | undefined {
  if (c.len !== size) {
    c.fail(`address attribute ${c.type()} has ${c.len} bytes, expected ${size}`);
    return undefined;
  }
  const b = c.buf;
  const o = c.at;
  return size === 4 ? `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}` : ipFromBytes(c.bytes()).text;
}

/** Reads the tuple nest the cursor is on; undefined when the cursor latched an error. */
function tupleAt(c: AttrCursor): Tuple | undefined {
  const start = c.at;
  const outer = c.enter();
  const t = tupleLevel(c, start);
  c.exit(outer);
  return t;
}

/** Reads the children of a tuple (the level the cursor walks, from buffer offset `start`). */
function tupleLevel(c: AttrCursor, start: number): Tuple | undefined {
  let src: string | undefined;
  let dst: string | undefined;
  let v6src: string | undefined;
  let v6dst: string | undefined;
  let proto: number | undefined;
  let srcPort: number | undefined;
  let dstPort: number | undefined;
  let icmpId: number | undefined;
  let icmpType: number | undefined;
  let icmpCode: number | undefined;
  let zone: number | undefined;
  let hasIp = false;
  let hasProto = false;
  while (c.next()) {
    const type = c.type();
    if (type === CTA_TUPLE.IP) {
      hasIp = true;
      const outer = c.enter();
      while (c.next()) {
        const ty = c.type();
        if (ty === CTA_IP.V4_SRC) src ??= addrText(c, 4);
        else if (ty === CTA_IP.V4_DST) dst ??= addrText(c, 4);
        else if (ty === CTA_IP.V6_SRC) v6src ??= addrText(c, 16);
        else if (ty === CTA_IP.V6_DST) v6dst ??= addrText(c, 16);
      }
      c.exit(outer);
    } else if (type === CTA_TUPLE.PROTO) {
      hasProto = true;
      const outer = c.enter();
      while (c.next()) {
        switch (c.type()) {
          case CTA_PROTO.NUM:
            proto ??= c.u8();
            break;
          case CTA_PROTO.SRC_PORT:
            srcPort ??= c.u16();
            break;
          case CTA_PROTO.DST_PORT:
            dstPort ??= c.u16();
            break;
          case CTA_PROTO.ICMP_ID:
          case CTA_PROTO.ICMPV6_ID:
            icmpId ??= c.u16();
            break;
          case CTA_PROTO.ICMP_TYPE:
          case CTA_PROTO.ICMPV6_TYPE:
            icmpType ??= c.u8();
            break;
          case CTA_PROTO.ICMP_CODE:
          case CTA_PROTO.ICMPV6_CODE:
            icmpCode ??= c.u8();
            break;
        }
      }
      c.exit(outer);
    } else if (type === CTA_TUPLE.ZONE) zone ??= c.u16();
  }
  if (c.err()) return undefined;
  const at = c.base + start;
  if (!hasIp) throw new NetlinkDecodeError(c.where, at, 'tuple without CTA_TUPLE_IP');
  if (src === undefined && dst === undefined) {
    src = v6src;
    dst = v6dst;
  }
  if (src === undefined || dst === undefined) {
    throw new NetlinkDecodeError(c.where, at, 'tuple without both source and destination address');
  }
  if (!hasProto) throw new NetlinkDecodeError(c.where, at, 'tuple without CTA_TUPLE_PROTO');
  if (proto === undefined) {
    throw new NetlinkDecodeError(c.where, at, `required attribute ${CTA_PROTO.NUM} (CTA_PROTO_NUM) is missing`);
  }
  // Fixed key order, so that decoded tuples compare equal to hand-written ones.
  const out: Tuple = { src, dst, proto };
  if (srcPort !== undefined) out.srcPort = srcPort;
  if (dstPort !== undefined) out.dstPort = dstPort;
  if (icmpId !== undefined) out.icmpId = icmpId;
  if (icmpType !== undefined) out.icmpType = icmpType;
  if (icmpCode !== undefined) out.icmpCode = icmpCode;
  if (zone !== undefined) out.zone = zone;
  return out;
}

/** Decodes the children of a CTA_TUPLE_* attribute (its payload). */
export function readTuple(data: Uint8Array, where = 'conntrack tuple', base = 0): Tuple {
  const c = cursor.reset(data, where, base);
  const t = tupleLevel(c, 0);
  c.check();
  return t!;
}

/** The counters nest the cursor is on. */
function countersAt(c: AttrCursor): Counters {
  let packets = 0n;
  let bytes = 0n;
  const outer = c.enter();
  while (c.next()) {
    const type = c.type();
    if (type === CTA_COUNTERS.PACKETS) packets = c.u64();
    else if (type === CTA_COUNTERS.BYTES) bytes = c.u64();
    else if (type === CTA_COUNTERS.PACKETS32) packets = BigInt(c.u32());
    else if (type === CTA_COUNTERS.BYTES32) bytes = BigInt(c.u32());
  }
  c.exit(outer);
  return { packets, bytes };
}

/**
 * The CTA_PROTOINFO nest the cursor is on: the TCP state (enum tcp_conntrack) in bits 0-7 and
 * the SCTP state (enum sctp_conntrack) in bits 8-15, each plus one (0: absent). A number, not
 * an object: one fewer allocation per entry of a dump.
 */
function protoStatesAt(c: AttrCursor): number {
  let states = 0;
  const outer = c.enter();
  while (c.next()) {
    const info = c.type();
    if (info !== CTA_PROTOINFO.TCP && info !== CTA_PROTOINFO.SCTP) continue;
    const tcp = info === CTA_PROTOINFO.TCP;
    const want = tcp ? CTA_PROTOINFO_TCP.STATE : CTA_PROTOINFO_SCTP.STATE;
    const protoOuter = c.enter();
    while (c.next()) {
      if (c.type() !== want) continue;
      const v = c.u8() + 1;
      states = tcp ? (states & 0xff00) | v : (states & 0xff) | (v << 8);
    }
    c.exit(protoOuter);
  }
  c.exit(outer);
  return states;
}

/**
 * Decodes the attributes of one IPCTNL_MSG_CT_NEW message (what dumps and GETs return).
 * `family` is the nfgenmsg family. Hostile input ends in a NetlinkDecodeError.
 */
export function decodeFlow(family: number, attrs: Uint8Array, where = 'conntrack entry', base = 0): Flow {
  return decodeFlowAt(family, attrs, 0, attrs.length, where, base);
}

/**
 * decodeFlow over b[start, end) without a view of its own (decodeReply hands the message
 * payload and skips the nfgenmsg). Error offsets are `base` plus the offset within `b`.
 */
export function decodeFlowAt(
  family: number,
  b: Uint8Array,
  start: number,
  end: number,
  where: string,
  base: number,
): Flow {
  const fam = familyOf(family, where);
  let orig: Tuple | undefined;
  let reply: Tuple | undefined;
  let status = 0;
  // Optional fields as locals (-1 or undefined = absent), set on the Flow in one fixed order
  // at the end: one object shape for every entry of a dump.
  let timeout = -1;
  let mark = -1;
  let zone = -1;
  let id = -1;
  let use = -1;
  let states = 0;
  let countersOrig: Counters | undefined;
  let countersReply: Counters | undefined;
  let startNs: bigint | undefined;
  let stopNs: bigint | undefined;
  const unknown: RawAttr[] = [];
  const c = cursor.reset(b, where, base, start, end);
  while (c.next()) {
    const type = c.type();
    switch (type) {
      case CTA.TUPLE_ORIG:
        orig ??= tupleAt(c);
        break;
      case CTA.TUPLE_REPLY:
        reply ??= tupleAt(c);
        break;
      case CTA.STATUS:
        status = c.u32();
        break;
      case CTA.TIMEOUT:
        timeout = c.u32();
        break;
      case CTA.MARK:
        mark = c.u32();
        break;
      case CTA.ID:
        id = c.u32();
        break;
      case CTA.USE:
        use = c.u32();
        break;
      case CTA.ZONE:
        zone = c.u16();
        break;
      case CTA.PROTOINFO:
        states = protoStatesAt(c);
        break;
      case CTA.COUNTERS_ORIG:
        countersOrig = countersAt(c);
        break;
      case CTA.COUNTERS_REPLY:
        countersReply = countersAt(c);
        break;
      case CTA.TIMESTAMP: {
        const outer = c.enter();
        while (c.next()) {
          if (c.type() === CTA_TIMESTAMP.START) startNs = c.u64();
          else if (c.type() === CTA_TIMESTAMP.STOP) stopNs = c.u64();
        }
        c.exit(outer);
        break;
      }
      default:
        // A view, not a copy: copying 10,000 small buffers per dump dominated its cost (GC).
        unknown.push({ type, nested: c.nested, data: c.bytes() });
    }
  }
  c.check();
  if (!orig || !reply)
    throw new NetlinkDecodeError(where, base + start, `entry without ${orig ? 'CTA_TUPLE_REPLY' : 'CTA_TUPLE_ORIG'}`);
  if ((fam === 'IPv6') !== orig.src.includes(':'))
    throw new NetlinkDecodeError(where, base + start, `tuple addresses do not match family ${fam}`);
  const f: Flow = { family: fam, orig, reply, status, unknown };
  if (timeout >= 0) f.timeout = timeout;
  if (mark >= 0) f.mark = mark;
  if (zone >= 0) f.zone = zone;
  if (id >= 0) f.id = id;
  if (use >= 0) f.use = use;
  if (states & 0xff) f.tcpState = (states & 0xff) - 1;
  if (states >> 8) f.sctpState = (states >> 8) - 1;
  if (countersOrig) f.countersOrig = countersOrig;
  if (countersReply) f.countersReply = countersReply;
  if (startNs !== undefined) f.startNs = startNs;
  if (stopNs !== undefined) f.stopNs = stopNs;
  return f;
}

/** What creating an entry needs (IPCTNL_MSG_CT_NEW): both tuples, a timeout, optional extras. */
export interface NewFlow {
  orig: Tuple;
  reply: Tuple;
  timeout: number;
  status?: number;
  mark?: number;
  zone?: number;
  tcpState?: number;
}

/** Writes the attributes of an IPCTNL_MSG_CT_NEW message, in the order conntrack -I uses. */
export function writeNewFlow(w: AttrWriter, f: NewFlow): void {
  w.nested(CTA.TUPLE_ORIG, (t) => writeTuple(t, f.orig));
  w.nested(CTA.TUPLE_REPLY, (t) => writeTuple(t, f.reply));
  if (f.status !== undefined) w.u32(CTA.STATUS, f.status, 'net');
  w.u32(CTA.TIMEOUT, f.timeout, 'net');
  if (f.mark !== undefined) w.u32(CTA.MARK, f.mark, 'net');
  if (f.zone !== undefined) w.u16(CTA.ZONE, f.zone, 'net');
  if (f.tcpState !== undefined) {
    const state = f.tcpState;
    w.nested(CTA.PROTOINFO, (p) => p.nested(CTA_PROTOINFO.TCP, (t) => t.u8(CTA_PROTOINFO_TCP.STATE, state)));
  }
}

/** The tuple seen from the other side: what the reply direction of an un-NATed flow is. */
export const invertTuple = (t: Tuple): Tuple => {
  const r: Tuple = { src: t.dst, dst: t.src, proto: t.proto };
  if (t.dstPort !== undefined) r.srcPort = t.dstPort;
  if (t.srcPort !== undefined) r.dstPort = t.srcPort;
  if (t.icmpId !== undefined) r.icmpId = t.icmpId;
  // An echo request (8 / 128) is answered by an echo reply (0 / 129).
  if (t.icmpType !== undefined) r.icmpType = t.icmpType === 8 ? 0 : t.icmpType === 128 ? 129 : t.icmpType;
  if (t.icmpCode !== undefined) r.icmpCode = t.icmpCode;
  if (t.zone !== undefined) r.zone = t.zone;
  return r;
};
