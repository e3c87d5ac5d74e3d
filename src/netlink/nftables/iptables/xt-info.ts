// The binary info structs of the xtables matches and targets iptables-nft 1.8.9 sends through
// nft_compat for kube-proxy's rules, built and read back. Layouts from the uapi headers
// (/usr/include/linux/netfilter*/xt_*.h, nf_nat.h); every one checked byte for byte against
// iptables-nft-restore's own messages (test/fixtures/netlink/iptables/). Host byte order (x86:
// little endian) unless a field is __be*; every struct is padded to XT_ALIGN (8 bytes).
// Readers return undefined for a struct that is not one our rule model can express.

import type { IPFamily } from '../../../base/ip.ts';
import type { XtMatchExpr } from '../expr/xt-match.ts';
import type { XtTargetExpr } from '../expr/xt-target.ts';

const XT_ALIGN = (n: number): number => (n + 7) & ~7;

// Info structs are carved from zeroed 64 KiB slabs: a full sync makes one or two per rule
// (a comment naming the endpoint is unique to its rule), and one ArrayBuffer each showed as
// allocation and GC time, and as malloc growth left in RSS (a struct over 64 bytes has its
// own malloc'd backing store). A slab lives while any struct carved from it does: the rules
// of a sync, dropped once it is sent, and the few kept by the comment cache.
const SLAB_SIZE = 64 * 1024;
let slab = new Uint8Array(0);
let slabUsed = 0;

function struct(size: number, fill: (v: DataView, b: Uint8Array) => void): Uint8Array {
  const len = XT_ALIGN(size);
  if (slabUsed + len > slab.length) {
    slab = new Uint8Array(Math.max(SLAB_SIZE, len));
    slabUsed = 0;
  }
  const b = slab.subarray(slabUsed, slabUsed + len);
  slabUsed += len;
  fill(view(b), b);
  return b;
}

const view = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);
const cString = (b: Uint8Array, at: number, max: number): string => {
  const end = b.subarray(at, at + max).indexOf(0);
  return new TextDecoder().decode(b.subarray(at, end < 0 ? at + max : at + end));
};
const match = (name: string, rev: number, info: Uint8Array): XtMatchExpr => ({ type: 'xtmatch', name, rev, info });
const target = (name: string, rev: number, info: Uint8Array): XtTargetExpr => ({ type: 'xttarget', name, rev, info });

// ---- matches ----

// Comment matches, cached by text: every rule of a service port's endpoint chains carries the
// same comment, and a 256-byte struct per rule showed in full-sync profiles. The expressions
// are only read (encoded, compared), never changed.
const COMMENT_CACHE_MAX = 4096;
const commentCache = new Map<string, XtMatchExpr>();

/** `-m comment --comment TEXT` (xt_comment_info: char comment[256], NUL-terminated). */
export function commentMatch(text: string): XtMatchExpr {
  const hit = commentCache.get(text);
  if (hit) return hit;
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > 255) throw new RangeError(`comment longer than 255 bytes: ${JSON.stringify(text)}`);
  if (bytes.includes(0)) throw new RangeError(`comment with a NUL byte: ${JSON.stringify(text)}`);
  const m = match(
    'comment',
    0,
    struct(256, (_v, b) => b.set(bytes, 0)),
  );
  if (commentCache.size >= COMMENT_CACHE_MAX) commentCache.clear();
  commentCache.set(text, m);
  return m;
}
export const readComment = (info: Uint8Array): string => cString(info, 0, 256);

/**
 * `-m set --match-set NAME dst,dst,src` (xt_set_info_match_v4: index u16, dim u8, flags u8, two
 * ip_set_counter_match, flags u32): `index` is the set's kernel index (IPSET_CMD_GET_BYNAME);
 * flags has bit n set when the n-th direction (1-based) is src.
 */
export function setMatch(index: number, dirs: readonly ('src' | 'dst')[]): XtMatchExpr {
  if (dirs.length < 1 || dirs.length > 6) throw new RangeError(`set match: 1 to 6 directions, not ${dirs.length}`);
  if (!Number.isInteger(index) || index < 0 || index > 0xfffe)
    throw new RangeError(`set match: bad set index ${index}`);
  const info = struct(48, (v) => {
    v.setUint16(0, index, true);
    v.setUint8(2, dirs.length);
    let flags = 0;
    dirs.forEach((d, i) => {
      if (d === 'src') flags |= 1 << (i + 1);
    });
    v.setUint8(3, flags);
  });
  return match('set', 4, info);
}
export function readSet(info: Uint8Array): { index: number; dirs: ('src' | 'dst')[] } | undefined {
  if (info.length < 48 || info.subarray(4).some((x) => x !== 0)) return undefined; // counters, inversion: not ours
  const v = view(info);
  const dim = v.getUint8(2),
    flags = v.getUint8(3);
  if (dim < 1 || dim > 6) return undefined;
  return {
    index: v.getUint16(0, true),
    dirs: Array.from({ length: dim }, (_, i) => (flags & (1 << (i + 1)) ? 'src' : 'dst')),
  };
}

/** RTN_* bits of xt_addrtype (1 << RTN_LOCAL). */
export const XT_ADDRTYPE_LOCAL = 1 << 2;

/** `-m addrtype [!] --src-type|--dst-type TYPE` (xt_addrtype_info_v1: u16 source, u16 dest, u32 flags). */
export function addrtypeMatch(dir: 'src' | 'dst', type: number, invert = false): XtMatchExpr {
  const info = struct(8, (v) => {
    v.setUint16(dir === 'src' ? 0 : 2, type, true);
    // XT_ADDRTYPE_INVERT_SOURCE 0x1, XT_ADDRTYPE_INVERT_DEST 0x2
    v.setUint32(4, invert ? (dir === 'src' ? 1 : 2) : 0, true);
  });
  return match('addrtype', 1, info);
}
export function readAddrtype(info: Uint8Array): { dir: 'src' | 'dst'; type: number; invert: boolean } | undefined {
  if (info.length < 8) return undefined;
  const v = view(info);
  const src = v.getUint16(0, true),
    dst = v.getUint16(2, true),
    flags = v.getUint32(4, true);
  if (src !== 0 && dst === 0 && (flags & ~1) === 0) return { dir: 'src', type: src, invert: flags === 1 };
  if (dst !== 0 && src === 0 && (flags & ~2) === 0) return { dir: 'dst', type: dst, invert: flags === 2 };
  return undefined;
}

/** `-m physdev ! --physdev-is-in` (xt_physdev_info: 4 x char[16], u8 invert, u8 bitmask; XT_PHYSDEV_OP_ISIN 0x08). */
export function physdevNotIsInMatch(): XtMatchExpr {
  return match(
    'physdev',
    0,
    struct(66, (v) => (v.setUint8(64, 0x08), v.setUint8(65, 0x08))),
  );
}
export const isPhysdevNotIsIn = (info: Uint8Array): boolean =>
  info.length >= 66 && info[64] === 0x08 && info[65] === 0x08 && info.subarray(0, 64).every((x) => x === 0);

/** Conntrack states as xt_conntrack bits (XT_CONNTRACK_STATE_BIT; SNAT/DNAT after IP_CT_NUMBER). */
export const CtStateBit = { INVALID: 1 << 0, ESTABLISHED: 1 << 1, RELATED: 1 << 2, NEW: 1 << 3, DNAT: 1 << 7 } as const;
export type CtStateName = keyof typeof CtStateBit;
/** The order iptables-save prints states in (libxt_conntrack's state_print). */
const CT_ORDER: readonly CtStateName[] = ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'DNAT'];

/**
 * `-m conntrack [!] --ctstate ...` (xt_conntrack_mtinfo3: 8 nf_inet_addr, expires, l4proto, ports,
 * then match_flags u16 @146, invert_flags u16 @148, state_mask u16 @150 ...; 162 -> 168 bytes).
 */
export function ctstateMatch(states: readonly CtStateName[], invert = false): XtMatchExpr {
  if (states.length === 0) throw new RangeError('conntrack match: no state');
  const info = struct(162, (v) => {
    v.setUint16(146, 0x0001 /* XT_CONNTRACK_STATE */, true);
    if (invert) v.setUint16(148, 0x0001, true);
    v.setUint16(
      150,
      states.reduce((m, s) => m | CtStateBit[s], 0),
      true,
    );
  });
  return match('conntrack', 3, info);
}
export function readCtstate(info: Uint8Array): { states: CtStateName[]; invert: boolean } | undefined {
  if (info.length < 162) return undefined;
  const v = view(info);
  const flags = v.getUint16(146, true),
    inv = v.getUint16(148, true),
    mask = v.getUint16(150, true);
  if (flags !== 1 || (inv & ~1) !== 0) return undefined;
  const states = CT_ORDER.filter((s) => mask & CtStateBit[s]);
  if (states.reduce((m, s) => m | CtStateBit[s], 0) !== mask || states.length === 0) return undefined;
  return { states, invert: inv === 1 };
}

/**
 * `-m ipvs --vaddr A --vproto P --vport N` (xt_ipvs_mtinfo: vaddr, vmask (nf_inet_addr), __be16
 * vport, u8 l4proto, u8 fwd_method, __be16 vportctl, u8 invert, u8 bitmask). The bitmask iptables
 * sends is 0x0f: XT_IPVS_IPVS_PROPERTY | PROTO | VADDR | VPORT; the mask is all ones (16 bytes).
 */
export function ipvsMatch(vaddr: Uint8Array, l4proto: number, vport: number): XtMatchExpr {
  const info = struct(40, (v, b) => {
    b.set(vaddr, 0);
    b.fill(0xff, 16, 32);
    v.setUint16(32, vport, false);
    v.setUint8(34, l4proto);
    v.setUint8(39, 0x0f);
  });
  return match('ipvs', 0, info);
}
export function readIpvs(info: Uint8Array): { vaddr: Uint8Array; l4proto: number; vport: number } | undefined {
  if (info.length < 40 || info[39] !== 0x0f || info[38] !== 0 || !info.subarray(16, 32).every((x) => x === 0xff))
    return undefined;
  const v = view(info);
  return { vaddr: info.slice(0, 16), l4proto: v.getUint8(34), vport: v.getUint16(32, false) };
}

/**
 * The u32 threshold of `--probability P`, as libxt_statistic computes it: lround(0x80000000 * P)
 * with P parsed as a double (the multiplication by a power of two is exact).
 */
export function probabilityThreshold(text: string): number {
  if (!/^(0|1)?(\.\d+)?$/.test(text) || text === '' || text === '.')
    throw new RangeError(`statistic probability ${JSON.stringify(text)} is not a number in [0, 1]`);
  const p = Number(text);
  if (!(p >= 0 && p <= 1)) throw new RangeError(`statistic probability ${text} is outside [0, 1]`);
  return Math.round(0x80000000 * p); // lround: half away from zero, the same for p >= 0
}

/**
 * `-m statistic --mode random --probability P` (xt_statistic_info: u16 mode, u16 flags, then
 * u32 probability/every, packet, count, and the kernel's master pointer: 24 bytes). iptables'
 * final check sets count = every - packet, so the threshold appears twice.
 */
export function statisticMatch(probability: string): XtMatchExpr {
  const threshold = probabilityThreshold(probability);
  return match(
    'statistic',
    0,
    struct(24, (v) => (v.setUint32(4, threshold, true), v.setUint32(12, threshold, true))),
  );
}
const XT_STATISTIC_MODE_NTH = 1;

/**
 * `-m statistic --mode nth --every N --packet P`: the same struct in nth mode. libxt_statistic
 * stores every - 1, the packet, and count = (every - 1) - packet, the kernel counter's start
 * (it matches when the counter wraps past every - 1 to 0, so the P-th packet matches first).
 */
export function statisticNthMatch(every: number, packet: number): XtMatchExpr {
  if (!Number.isInteger(every) || every < 1 || every > 0xffffffff)
    throw new RangeError(`statistic --every ${every} is not a count from 1`);
  if (!Number.isInteger(packet) || packet < 0 || packet >= every)
    throw new RangeError(`statistic --packet ${packet} is not in 0..${every - 1}`);
  return match(
    'statistic',
    0,
    struct(24, (v) => {
      v.setUint16(0, XT_STATISTIC_MODE_NTH, true);
      v.setUint32(4, every - 1, true);
      v.setUint32(8, packet, true);
      v.setUint32(12, every - 1 - packet, true);
    }),
  );
}
/** every and packet of an nth-mode statistic match (undefined for random mode or inversion). */
export function readStatisticNth(info: Uint8Array): { every: number; packet: number } | undefined {
  if (info.length < 16) return undefined;
  const v = view(info);
  if (v.getUint16(0, true) !== XT_STATISTIC_MODE_NTH || v.getUint16(2, true) !== 0) return undefined;
  const every = v.getUint32(4, true) + 1;
  const packet = v.getUint32(8, true);
  return packet < every ? { every, packet } : undefined;
}

/** The threshold of a random-mode statistic match (undefined for nth mode or inversion). */
export function readStatistic(info: Uint8Array): number | undefined {
  if (info.length < 16) return undefined;
  const v = view(info);
  if (v.getUint16(0, true) !== 0 || v.getUint16(2, true) !== 0) return undefined;
  return v.getUint32(4, true);
}

/**
 * The probability text upstream would have written (`%0.10f` of 1/m) for a threshold, when one
 * encodes to it; otherwise the threshold's own value to 10 places (which encodes back to it
 * whenever any 10-place text does).
 */
export function probabilityText(threshold: number): string {
  const m = Math.round(0x80000000 / Math.max(threshold, 1));
  for (const k of [m, m - 1, m + 1]) {
    if (k < 1) continue;
    const text = (1 / k).toFixed(10);
    if (probabilityThreshold(text) === threshold) return text;
  }
  return (threshold / 0x80000000).toFixed(10);
}

/**
 * `-m nfacct --nfacct-name NAME` (xt_nfacct_match_info_v1: char name[NFACCT_NAME_MAX = 32], then
 * the kernel's object pointer, 8-aligned, zero from user space: 40 bytes). iptables 1.8.9 sends
 * revision 1.
 */
export function nfacctMatch(name: string): XtMatchExpr {
  const bytes = new TextEncoder().encode(name);
  if (bytes.length < 1 || bytes.length > 31 || bytes.includes(0))
    throw new RangeError(`nfacct match: name must be 1 to 31 bytes: ${JSON.stringify(name)}`);
  return match(
    'nfacct',
    1,
    struct(40, (_v, b) => b.set(bytes, 0)),
  );
}
export function readNfacct(info: Uint8Array): string | undefined {
  if (info.length < 40 || info[0] === 0 || info.subarray(32, 40).some((x) => x !== 0)) return undefined;
  return cString(info, 0, 32);
}

/** xt_recent check_set bits. */
const RECENT_CHECK = 1,
  RECENT_SET = 2,
  RECENT_REAP = 32;

/**
 * `-m recent --name N (--set | --rcheck [--seconds S] [--reap]) --mask ALL-ONES --rsource`
 * (xt_recent_mtinfo_v1: u32 seconds, u32 hit_count, u8 check_set, u8 invert, char name[200],
 * u8 side, nf_inet_addr mask @212: 228 -> 232 bytes). The mask is all ones for the family.
 */
export function recentMatch(
  o: { name: string; mode: 'set' | 'rcheck'; seconds?: number; reap?: boolean },
  family: IPFamily,
): XtMatchExpr {
  const name = new TextEncoder().encode(o.name);
  if (name.length < 1 || name.length > 199)
    throw new RangeError(`recent match: name must be 1 to 199 bytes: ${JSON.stringify(o.name)}`);
  if (o.mode === 'set' && (o.seconds !== undefined || o.reap))
    throw new RangeError('recent match: --seconds/--reap need --rcheck');
  if (o.reap && o.seconds === undefined) throw new RangeError('recent match: --reap needs --seconds');
  const info = struct(228, (v, b) => {
    v.setUint32(0, o.seconds ?? 0, true);
    v.setUint8(8, (o.mode === 'set' ? RECENT_SET : RECENT_CHECK) | (o.reap ? RECENT_REAP : 0));
    b.set(name, 10);
    b.fill(0xff, 212, 212 + (family === 'IPv4' ? 4 : 16));
  });
  return match('recent', 1, info);
}
export function readRecent(
  info: Uint8Array,
  family: IPFamily,
): { name: string; mode: 'set' | 'rcheck'; seconds?: number; reap?: boolean } | undefined {
  if (info.length < 228) return undefined;
  const v = view(info);
  const seconds = v.getUint32(0, true),
    hits = v.getUint32(4, true),
    check = v.getUint8(8),
    invert = v.getUint8(9);
  const maskLen = family === 'IPv4' ? 4 : 16;
  const fullMask =
    info.subarray(212, 212 + maskLen).every((x) => x === 0xff) &&
    info.subarray(212 + maskLen, 228).every((x) => x === 0);
  if (hits !== 0 || invert !== 0 || info[210] !== 0 /* XT_RECENT_SOURCE */ || !fullMask) return undefined;
  const name = cString(info, 10, 200);
  if (check === RECENT_SET && seconds === 0) return { name, mode: 'set' };
  if ((check & ~RECENT_REAP) !== RECENT_CHECK) return undefined;
  const out: { name: string; mode: 'rcheck'; seconds?: number; reap?: boolean } = { name, mode: 'rcheck' };
  if (seconds !== 0) out.seconds = seconds;
  if (check & RECENT_REAP) out.reap = true;
  return out;
}

/**
 * `-m tcp|udp [--dport N]` as an xt match (xt_tcp: u16 spts[2], dpts[2], u8 option, flg_mask,
 * flg_cmp, invflags; xt_udp: spts, dpts, invflags). iptables-nft sends it only without a port
 * (a port becomes native payload/cmp); ranges are 0..65535 then.
 */
export function l4Match(proto: 'tcp' | 'udp'): XtMatchExpr {
  return match(
    proto,
    0,
    struct(proto === 'tcp' ? 12 : 9, (v) => (v.setUint16(2, 0xffff, true), v.setUint16(6, 0xffff, true))),
  );
}
export const isBareL4 = (info: Uint8Array): boolean =>
  info.length >= 9 &&
  view(info).getUint32(0, true) === 0xffff0000 &&
  view(info).getUint32(4, true) === 0xffff0000 &&
  info.subarray(8).every((x) => x === 0);

/**
 * `-m sctp [--dport N]` (xt_sctp_info: u16 dpts[2], spts[2], u32 chunkmap[64], chunk_match_type,
 * 3 flag_info of 3 bytes ... @268, flag_count, flags @284 (XT_SCTP_DEST_PORTS 0x02), invflags:
 * 292 -> 296 bytes). libxt_sctp's init marks the four flag_info chunk types 0xff.
 */
export function sctpMatch(dport?: number): XtMatchExpr {
  const info = struct(292, (v, b) => {
    for (const at of [268, 271, 274, 277]) b[at] = 0xff;
    if (dport === undefined) return;
    v.setUint16(0, dport, true);
    v.setUint16(2, dport, true);
    v.setUint32(284, 0x02, true);
  });
  return match('sctp', 0, info);
}
/** The destination port of an sctp match (null: no port option); undefined when it uses other options. */
export function readSctp(info: Uint8Array): number | null | undefined {
  if (info.length < 292) return undefined;
  const v = view(info);
  const d0 = v.getUint16(0, true),
    d1 = v.getUint16(2, true),
    flags = v.getUint32(284, true);
  if (v.getUint32(4, true) !== 0 || v.getUint32(288, true) !== 0 || v.getUint32(264, true) !== 0) return undefined;
  if (flags === 0 && d0 === 0 && d1 === 0) return null;
  if (flags === 0x02 && d0 === d1) return d0;
  return undefined;
}

// ---- targets ----

/** `-j MARK --set-xmark MARK/MASK` (xt_mark_tginfo2: u32 mark, u32 mask); --or-mark v is v/v, --xor-mark v is v/0. */
export function markTarget(mark: number, mask: number): XtTargetExpr {
  return target(
    'MARK',
    2,
    struct(8, (v) => (v.setUint32(0, mark >>> 0, true), v.setUint32(4, mask >>> 0, true))),
  );
}
export function readMark(info: Uint8Array): { op: 'or' | 'xor'; value: number } | undefined {
  if (info.length < 8) return undefined;
  const v = view(info);
  const mark = v.getUint32(0, true),
    mask = v.getUint32(4, true);
  if (mask === 0) return { op: 'xor', value: mark };
  if (mask === mark) return { op: 'or', value: mark };
  return undefined;
}

const NF_NAT_RANGE_MAP_IPS = 0x1,
  NF_NAT_RANGE_PROTO_SPECIFIED = 0x2,
  NF_NAT_RANGE_PROTO_RANDOM_FULLY = 0x10;

/**
 * `-j MASQUERADE [--random-fully]`. The info struct differs by family: iptables sends
 * nf_nat_ipv4_multi_range_compat (rangesize 1, range[0].flags: 24 bytes), ip6tables sends
 * nf_nat_range (flags u32 first, then addresses and ports: 40 bytes); the kernel refuses the
 * other family's struct with EINVAL.
 */
export function masqueradeTarget(randomFully: boolean, family: IPFamily = 'IPv4'): XtTargetExpr {
  const flags = randomFully ? NF_NAT_RANGE_PROTO_RANDOM_FULLY : 0;
  const info =
    family === 'IPv6'
      ? struct(40, (v) => v.setUint32(0, flags, true))
      : struct(24, (v) => (v.setUint32(0, 1, true), v.setUint32(4, flags, true)));
  return target('MASQUERADE', 0, info);
}
/** random-fully of a MASQUERADE struct (undefined when it names addresses or ports). */
export function readMasquerade(info: Uint8Array, family: IPFamily): boolean | undefined {
  const v = view(info);
  const flagsAt = family === 'IPv6' ? 0 : 4;
  if (info.length < (family === 'IPv6' ? 40 : 24) || (family === 'IPv4' && v.getUint32(0, true) !== 1))
    return undefined;
  const flags = v.getUint32(flagsAt, true);
  if ((flags & ~NF_NAT_RANGE_PROTO_RANDOM_FULLY) !== 0 || info.subarray(flagsAt + 4).some((x) => x !== 0))
    return undefined;
  return flags !== 0;
}

/**
 * `-j REDIRECT --to-ports P`: IPv4 nf_nat_ipv4_multi_range_compat (rangesize 1, flags, min_ip,
 * max_ip, __be16 min, max: 24 bytes), IPv6 nf_nat_range (flags, min_addr, max_addr, __be16
 * min_proto @36, max_proto @38: 40 bytes); flags NF_NAT_RANGE_PROTO_SPECIFIED.
 */
export function redirectTarget(port: number, family: IPFamily): XtTargetExpr {
  const info =
    family === 'IPv6'
      ? struct(
          40,
          (v) => (
            v.setUint32(0, NF_NAT_RANGE_PROTO_SPECIFIED, true),
            v.setUint16(36, port, false),
            v.setUint16(38, port, false)
          ),
        )
      : struct(20, (v) => {
          v.setUint32(0, 1, true);
          v.setUint32(4, NF_NAT_RANGE_PROTO_SPECIFIED, true);
          v.setUint16(16, port, false);
          v.setUint16(18, port, false);
        });
  return target('REDIRECT', 0, info);
}
export function readRedirect(info: Uint8Array, family: IPFamily): number | undefined {
  const v = view(info);
  const [flagsAt, portAt, size] = family === 'IPv6' ? [0, 36, 40] : [4, 16, 20];
  if (info.length < size || (family === 'IPv4' && v.getUint32(0, true) !== 1)) return undefined;
  if (v.getUint32(flagsAt, true) !== NF_NAT_RANGE_PROTO_SPECIFIED) return undefined;
  const min = v.getUint16(portAt, false);
  return min === v.getUint16(portAt + 2, false) ? min : undefined;
}

/**
 * `-j DNAT --to-destination ADDR:PORT` (rev 2, nf_nat_range2: u32 flags (MAP_IPS |
 * PROTO_SPECIFIED), min_addr @4, max_addr @20 (nf_inet_addr), __be16 min_proto @36, max_proto
 * @38, base_proto @40: 42 -> 48 bytes), the same for both families.
 */
export function dnatTarget(addr: Uint8Array, port: number): XtTargetExpr {
  const info = struct(42, (v, b) => {
    v.setUint32(0, NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED, true);
    b.set(addr, 4);
    b.set(addr, 20);
    v.setUint16(36, port, false);
    v.setUint16(38, port, false);
  });
  return target('DNAT', 2, info);
}
export function readDnat(info: Uint8Array, family: IPFamily): { addr: Uint8Array; port: number } | undefined {
  if (info.length < 42) return undefined;
  const v = view(info);
  const len = family === 'IPv4' ? 4 : 16;
  const min = info.subarray(4, 4 + len),
    max = info.subarray(20, 20 + len);
  if (v.getUint32(0, true) !== (NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED)) return undefined;
  if (
    !min.every((x, i) => x === max[i]) ||
    v.getUint16(36, false) !== v.getUint16(38, false) ||
    v.getUint16(40, false) !== 0
  )
    return undefined;
  return { addr: Uint8Array.from(min), port: v.getUint16(36, false) };
}

/**
 * `-j REJECT` with the port-unreachable default of each family: ipt_reject_info's
 * IPT_ICMP_PORT_UNREACHABLE is 3, ip6t_reject_info's IP6T_ICMP6_PORT_UNREACH is 4 (3 there
 * would be address-unreachable).
 */
export function rejectTarget(family: IPFamily = 'IPv4'): XtTargetExpr {
  const withCode = family === 'IPv6' ? 4 : 3;
  return target(
    'REJECT',
    0,
    struct(4, (v) => v.setUint32(0, withCode, true)),
  );
}
export const isDefaultReject = (info: Uint8Array, family: IPFamily): boolean =>
  info.length >= 4 && view(info).getUint32(0, true) === (family === 'IPv6' ? 4 : 3);
