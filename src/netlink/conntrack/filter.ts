// Which entries a dump returns, and which a kernel-side flush deletes. Every dump filter is
// applied on our side too, so the answer is the same whether the kernel filtered or not: the
// kernel's part only saves copying entries. A flush has no such second look, so it is only
// used for the filters the kernel matches exactly (exactInKernel).
//
// Kernel-side filtering in a dump request (net/netfilter/nf_conntrack_netlink.c,
// ctnetlink_alloc_filter), as verified by experiment on 6.18 (test/kernel/conntrack-*) and
// on Debian 12's 6.1 under QEMU (test/vm/conntrack-netlink.test.ts):
//
//   what                                          6.1        6.18
//   nfgenmsg family (L3 protocol)                 yes        yes
//   CTA_MARK + CTA_MARK_MASK  (conntrack -L -m)   yes        yes
//   CTA_STATUS + CTA_STATUS_MASK (--status)       yes        yes
//   CTA_ZONE                                      ignored    yes
//   CTA_FILTER: protocol, ports, IPv4 addresses   yes        yes
//   CTA_FILTER: IPv6 addresses                    inverted   inverted
//   CTA_FILTER in a DELETE (filtered flush)       refused    yes (since 6.12)
//
// CTA_FILTER { ORIG_FLAGS, REPLY_FLAGS } comes with a CTA_TUPLE_ORIG / CTA_TUPLE_REPLY holding
// the values to match, field by field (CTA_FILTER_F_*). conntrack-tools 1.4.7 never sends it
// (it filters -L/-D output itself). A kernel that predates an attribute ignores it (the
// request is not parsed strictly), which is why the client-side filter always runs as well.
// A kernel that refuses the filter (EINVAL, EOPNOTSUPP) gets a plain dump from then on.
//
// Quirks:
//   - the flags are host-order u32 (nla_get_u32), all the rest is network order;
//   - ports are parsed only with CTA_FILTER_F_PROTO_NUM and CTA_PROTO_NUM (else EINVAL);
//   - ports are compared for TCP and UDP only (ctnetlink_filter_match_tuple): for SCTP,
//     DCCP, UDP-Lite the kernel accepts the ports and ignores them;
//   - any CTA_FILTER needs an IPv4/IPv6 family in nfgenmsg (AF_UNSPEC: EOPNOTSUPP), so a
//     filter without a family is sent as two dumps, one per family;
//   - the IPv6 address match is inverted (entries whose address *differs* pass), so IPv6
//     addresses are always matched here, never by the kernel.
//
// Filtered flush. "netfilter: ctnetlink: support CTA_FILTER for flush" (net-next pull of
// September 2024, so Linux 6.12; in 6.12.y and 6.18.y, not in 6.1.y) made
// IPCTNL_MSG_CT_DELETE with CTA_FILTER a flush of exactly the matching entries: one
// request, one walk of the table inside the kernel, no entry copied out (10,000 entries in
// about 10 ms here, against 60-100 ms for a dump and pipelined deletes). The kernel reports
// no count. Before 6.12 (6.1 among them) ctnetlink_del_conntrack reads a DELETE carrying
// CTA_TUPLE_ORIG or CTA_TUPLE_REPLY as a delete of that one tuple, parsed with every field
// required, and a DELETE without a tuple as a flush that refuses CTA_FILTER (EOPNOTSUPP).
// So a filter whose tuples are partial (exactInKernel insists on it) is refused with EINVAL
// or EOPNOTSUPP before anything is deleted, and the caller falls back to dump and delete.

import type { IPFamily } from '../../base/ip.ts';
import { parseIP } from '../../base/ip.ts';
import type { AttrWriter } from '../core/index.ts';
import { CTA, CTA_FILTER, CTA_FILTER_F, CTA_IP, CTA_PROTO, CTA_TUPLE, IPPROTO } from './constants.ts';
import type { Flow, Tuple } from './flow.ts';
import { protoName } from './flow.ts';

/** Fields of one direction's tuple to match; absent fields match anything. */
export interface TupleMatch {
  src?: string;
  dst?: string;
  srcPort?: number;
  dstPort?: number;
}

export interface FlowFilter {
  /** Only this address family (IPv4 or IPv6); undefined dumps both. */
  family?: IPFamily;
  /** IP protocol number (IPPROTO.UDP ...). */
  proto?: number;
  /** The original direction: the client's view (src = client, dst = the Service IP:port). */
  orig?: TupleMatch;
  /** The reply direction: src is who answered (after DNAT, the endpoint). */
  reply?: TupleMatch;
  /** (flow.mark & mask) === value; mask defaults to 0xffffffff. */
  mark?: { value: number; mask?: number };
  /** (flow.status & mask) === value, IPS_* bits. */
  status?: { value: number; mask: number };
  /** CTA_ZONE of the entry. */
  zone?: number;
}

const canonical = (a: string | undefined): string | undefined => {
  if (a === undefined) return undefined;
  const ip = parseIP(a);
  if (!ip) throw new TypeError(`conntrack filter: ${JSON.stringify(a)} is not an IP address`);
  return ip.text;
};

function tupleMatcher(m: TupleMatch | undefined): (t: Tuple) => boolean {
  if (!m) return () => true;
  const src = canonical(m.src);
  const dst = canonical(m.dst);
  const { srcPort, dstPort } = m;
  return (t) =>
    (src === undefined || src === t.src) &&
    (dst === undefined || dst === t.dst) &&
    (srcPort === undefined || srcPort === t.srcPort) &&
    (dstPort === undefined || dstPort === t.dstPort);
}

/**
 * The client-side filter as a predicate, addresses canonicalized once (decoded flows carry
 * canonical text). Throws a TypeError for an address that is not one.
 */
export function compileFilter(f: FlowFilter): (flow: Flow) => boolean {
  const orig = tupleMatcher(f.orig);
  const reply = tupleMatcher(f.reply);
  const markMask = (f.mark?.mask ?? 0xffffffff) >>> 0;
  const markValue = f.mark ? (f.mark.value & markMask) >>> 0 : 0;
  const statusValue = f.status ? (f.status.value & f.status.mask) >>> 0 : 0;
  return (flow) => {
    if (f.family !== undefined && f.family !== flow.family) return false;
    if (f.proto !== undefined && f.proto !== flow.orig.proto) return false;
    if (!orig(flow.orig) || !reply(flow.reply)) return false;
    if (f.mark && ((flow.mark ?? 0) & markMask) >>> 0 !== markValue) return false;
    if (f.status && (flow.status & f.status.mask) >>> 0 !== statusValue) return false;
    if (f.zone !== undefined && (flow.zone ?? 0) !== f.zone) return false;
    return true;
  };
}

/** The client-side filter: true when the flow satisfies every field of the filter. */
export const flowMatches = (f: FlowFilter, flow: Flow): boolean => compileFilter(f)(flow);

/** The family a filter needs: given, or implied by its addresses. Throws on a contradiction. */
export function filterFamily(f: FlowFilter): IPFamily | undefined {
  let fam = f.family;
  for (const a of [f.orig?.src, f.orig?.dst, f.reply?.src, f.reply?.dst]) {
    if (a === undefined) continue;
    const ip = parseIP(a);
    if (!ip) throw new TypeError(`conntrack filter: ${JSON.stringify(a)} is not an IP address`);
    if (fam !== undefined && fam !== ip.family) throw new TypeError(`conntrack filter: ${a} is not an ${fam} address`);
    fam = ip.family;
  }
  return fam;
}

const hasFields = (m: TupleMatch | undefined): boolean =>
  m !== undefined && (m.src !== undefined || m.dst !== undefined || m.srcPort !== undefined || m.dstPort !== undefined);

/** The part of a filter the kernel can match in CTA_FILTER (the rest stays client-side). */
interface KernelTupleFilter {
  family: IPFamily | undefined;
  origFlags: number;
  replyFlags: number;
  orig: TupleMatch;
  reply: TupleMatch;
}

function kernelPart(f: FlowFilter): KernelTupleFilter {
  const family = filterFamily(f);
  const strip = (m: TupleMatch | undefined): TupleMatch => {
    const out: TupleMatch = {};
    if (!m) return out;
    // IPv6 addresses stay client-side: the kernel's IPv6 address match is inverted (it keeps
    // entries whose address differs; seen on 6.18, the code is the same since 5.8).
    if (family === 'IPv4' && m.src !== undefined) out.src = m.src;
    if (family === 'IPv4' && m.dst !== undefined) out.dst = m.dst;
    // Ports are parsed only after the protocol: without one they stay client-side.
    if (f.proto !== undefined && m.srcPort !== undefined) out.srcPort = m.srcPort;
    if (f.proto !== undefined && m.dstPort !== undefined) out.dstPort = m.dstPort;
    return out;
  };
  const orig = strip(f.orig);
  const reply = strip(f.reply);
  // Each direction with fields carries the protocol: the kernel parses ports only after it.
  const origFlags = hasFields(orig) || f.proto !== undefined ? tupleFlags(f, orig) : 0;
  const replyFlags = hasFields(reply) ? tupleFlags(f, reply) : 0;
  return { family, origFlags, replyFlags, orig, reply };
}

/** True when part of the filter can be matched by the kernel's CTA_FILTER. */
export function hasKernelTupleFilter(f: FlowFilter): boolean {
  const k = kernelPart(f);
  return (k.origFlags | k.replyFlags) !== 0;
}

const isU = (v: number | undefined, max: number): boolean =>
  v === undefined || (Number.isInteger(v) && v >= 0 && v <= max);
const validMatch = (m: TupleMatch | undefined): boolean =>
  m === undefined || (isU(m.srcPort, 0xffff) && isU(m.dstPort, 0xffff));
const hasAddr = (m: TupleMatch | undefined): boolean => m !== undefined && (m.src !== undefined || m.dst !== undefined);
const hasPort = (m: TupleMatch | undefined): boolean =>
  m !== undefined && (m.srcPort !== undefined || m.dstPort !== undefined);
/** A tuple with every field given: a kernel before 6.12 would delete that one entry by it. */
const complete = (m: TupleMatch | undefined): boolean =>
  m !== undefined && m.src !== undefined && m.dst !== undefined && m.srcPort !== undefined && m.dstPort !== undefined;

/**
 * True when one kernel-side flush with this filter (flushRequest, Linux 6.12+) deletes exactly
 * the entries flowMatches() accepts, on every kernel that carries it out, and is refused
 * without deleting anything by every kernel that does not. That takes:
 *   - a protocol, and at least one address or port (never "every UDP entry");
 *   - ports only for TCP and UDP (the only protocols whose ports the kernel compares);
 *   - an IPv4 family for addresses (the kernel's IPv6 address match is inverted);
 *   - no mark, status or zone (the flusher needs none; their kernel semantics differ at the edges);
 *   - no direction with all four of src, dst, srcPort, dstPort: a kernel before 6.12 reads
 *     such a tuple as "delete this one entry" and ignores the rest of the filter.
 */
export function exactInKernel(f: FlowFilter): boolean {
  if (f.mark !== undefined || f.status !== undefined || f.zone !== undefined) return false;
  if (f.proto === undefined || !isU(f.proto, 255)) return false;
  if (!hasFields(f.orig) && !hasFields(f.reply)) return false;
  if (!validMatch(f.orig) || !validMatch(f.reply)) return false;
  if ((hasPort(f.orig) || hasPort(f.reply)) && f.proto !== IPPROTO.UDP && f.proto !== IPPROTO.TCP) return false;
  if (complete(f.orig) || complete(f.reply)) return false;
  let family: IPFamily | undefined;
  try {
    family = filterFamily(f);
  } catch {
    return false;
  }
  if (family === undefined) return false;
  if (family === 'IPv6' && (hasAddr(f.orig) || hasAddr(f.reply))) return false;
  return true;
}

function tupleFlags(f: FlowFilter, m: TupleMatch): number {
  let flags = 0;
  if (f.proto !== undefined) flags |= CTA_FILTER_F.PROTO_NUM;
  if (m.src !== undefined) flags |= CTA_FILTER_F.IP_SRC;
  if (m.dst !== undefined) flags |= CTA_FILTER_F.IP_DST;
  if (m.srcPort !== undefined) flags |= CTA_FILTER_F.PROTO_SRC_PORT;
  if (m.dstPort !== undefined) flags |= CTA_FILTER_F.PROTO_DST_PORT;
  return flags;
}

/** Writes a tuple holding just the fields to match. */
function writeMatchTuple(w: AttrWriter, family: IPFamily | undefined, proto: number | undefined, m: TupleMatch): void {
  const v4 = family !== 'IPv6';
  if (m.src !== undefined || m.dst !== undefined) {
    w.nested(CTA_TUPLE.IP, (ip) => {
      if (m.src !== undefined) ip.bytes(v4 ? CTA_IP.V4_SRC : CTA_IP.V6_SRC, parseIP(m.src)!.bytes);
      if (m.dst !== undefined) ip.bytes(v4 ? CTA_IP.V4_DST : CTA_IP.V6_DST, parseIP(m.dst)!.bytes);
    });
  }
  if (proto !== undefined) {
    w.nested(CTA_TUPLE.PROTO, (p) => {
      p.u8(CTA_PROTO.NUM, proto);
      if (m.srcPort !== undefined) p.u16(CTA_PROTO.SRC_PORT, m.srcPort, 'net');
      if (m.dstPort !== undefined) p.u16(CTA_PROTO.DST_PORT, m.dstPort, 'net');
    });
  }
}

/**
 * Writes the kernel-side filter attributes of a dump request. With `tuple` false, only the
 * older ones (mark, status, zone) are written.
 */
export function writeDumpFilter(w: AttrWriter, f: FlowFilter, tuple: boolean): void {
  if (f.mark) w.u32(CTA.MARK, f.mark.value, 'net').u32(CTA.MARK_MASK, f.mark.mask ?? 0xffffffff, 'net');
  if (f.status) w.u32(CTA.STATUS, f.status.value, 'net').u32(CTA.STATUS_MASK, f.status.mask, 'net');
  if (f.zone !== undefined) w.u16(CTA.ZONE, f.zone, 'net');
  if (!tuple) return;
  const k = kernelPart(f);
  if ((k.origFlags | k.replyFlags) === 0) return;
  w.nested(CTA.FILTER, (fl) => {
    // Host byte order: the kernel reads these with nla_get_u32.
    fl.u32(CTA_FILTER.ORIG_FLAGS, k.origFlags);
    fl.u32(CTA_FILTER.REPLY_FLAGS, k.replyFlags);
  });
  if (k.origFlags) w.nested(CTA.TUPLE_ORIG, (t) => writeMatchTuple(t, k.family, f.proto, k.orig));
  if (k.replyFlags) w.nested(CTA.TUPLE_REPLY, (t) => writeMatchTuple(t, k.family, f.proto, k.reply));
}

/** "udp orig dst 10.96.0.10:53", for labels and logs. */
export function filterText(f: FlowFilter): string {
  const parts: string[] = [];
  if (f.family) parts.push(f.family);
  if (f.proto !== undefined) parts.push(protoName(f.proto));
  const dir = (name: string, m: TupleMatch | undefined): void => {
    if (!m) return;
    if (m.src !== undefined || m.srcPort !== undefined)
      parts.push(`${name} src ${m.src ?? '*'}${m.srcPort !== undefined ? `:${m.srcPort}` : ''}`);
    if (m.dst !== undefined || m.dstPort !== undefined)
      parts.push(`${name} dst ${m.dst ?? '*'}${m.dstPort !== undefined ? `:${m.dstPort}` : ''}`);
  };
  dir('orig', f.orig);
  dir('reply', f.reply);
  if (f.mark) parts.push(`mark ${f.mark.value}/${(f.mark.mask ?? 0xffffffff) >>> 0}`);
  if (f.status) parts.push(`status ${f.status.value}/${f.status.mask}`);
  if (f.zone !== undefined) parts.push(`zone ${f.zone}`);
  return parts.length ? parts.join(' ') : 'all';
}
