// The binary info structs of the xtables matches and targets the IPVS companion rules use,
// laid out as iptables-nft 1.8.9 sends them (checked byte for byte against an strace capture:
// test/vm/scenarios/ipvs-proxier-companion.capture.txt). Host byte order (x86: little endian)
// unless a field is __be*; every struct is padded to XT_ALIGN (8 bytes).

import type { XtMatchExpr } from './xt-match.ts';
import type { XtTargetExpr } from './xt-target.ts';

const XT_ALIGN = (n: number): number => (n + 7) & ~7;

function struct(size: number, fill: (v: DataView, b: Uint8Array) => void): Uint8Array {
  const b = new Uint8Array(XT_ALIGN(size));
  fill(new DataView(b.buffer), b);
  return b;
}

/**
 * `-m set --match-set NAME dst,dst,src` (xt_set_info_match_v4: index u16, dim u8, flags u8,
 * two ip_set_counter_match, flags u32): `index` is the set's kernel index (IPSET_CMD_GET_BYNAME);
 * flags has bit n set when the n-th direction (1-based) is src.
 */
export function setMatch(index: number, dirs: readonly ('src' | 'dst')[]): XtMatchExpr {
  if (dirs.length < 1 || dirs.length > 6) throw new RangeError(`set match: 1 to 6 directions, not ${dirs.length}`);
  const info = struct(48, (v) => {
    v.setUint16(0, index, true);
    v.setUint8(2, dirs.length);
    let flags = 0;
    dirs.forEach((d, i) => {
      if (d === 'src') flags |= 1 << (i + 1);
    });
    v.setUint8(3, flags);
  });
  return { type: 'xtmatch', name: 'set', rev: 4, info };
}

/** `-m comment --comment TEXT` (xt_comment_info: char comment[256], NUL-terminated). */
export function commentMatch(text: string): XtMatchExpr {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > 255) throw new RangeError(`comment longer than 255 bytes: ${JSON.stringify(text)}`);
  return { type: 'xtmatch', name: 'comment', rev: 0, info: struct(256, (_v, b) => b.set(bytes, 0)) };
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
  return { type: 'xtmatch', name: 'addrtype', rev: 1, info };
}

/** `-m physdev ! --physdev-is-in` (xt_physdev_info: 4 x char[16], u8 invert, u8 bitmask; XT_PHYSDEV_OP_ISIN 0x08). */
export function physdevNotIsInMatch(): XtMatchExpr {
  return { type: 'xtmatch', name: 'physdev', rev: 0, info: struct(66, (v) => (v.setUint8(64, 0x08), v.setUint8(65, 0x08))) };
}

/** Conntrack states as xt_conntrack bits (XT_CONNTRACK_STATE_BIT). */
export const CtStateBit = { INVALID: 1 << 0, ESTABLISHED: 1 << 1, RELATED: 1 << 2, NEW: 1 << 3 } as const;

/**
 * `-m conntrack --ctstate ...` (xt_conntrack_mtinfo3: 8 nf_inet_addr, expires, l4proto, ports,
 * then match_flags u16 @146, invert_flags u16 @148, state_mask u16 @150 ...; 162 -> 168 bytes).
 */
export function ctstateMatch(states: readonly (keyof typeof CtStateBit)[]): XtMatchExpr {
  const info = struct(162, (v) => {
    v.setUint16(146, 0x0001 /* XT_CONNTRACK_STATE */, true);
    v.setUint16(150, states.reduce((m, s) => m | CtStateBit[s], 0), true);
  });
  return { type: 'xtmatch', name: 'conntrack', rev: 3, info };
}

/**
 * `-m ipvs --vaddr A --vproto P --vport N` (xt_ipvs_mtinfo: vaddr, vmask (nf_inet_addr), __be16
 * vport, u8 l4proto, u8 fwd_method, __be16 vportctl, u8 invert, u8 bitmask). The bitmask iptables
 * sends is 0x0f: XT_IPVS_IPVS_PROPERTY | PROTO | VADDR | VPORT.
 */
export function ipvsMatch(vaddr: Uint8Array, l4proto: number, vport: number): XtMatchExpr {
  const info = struct(40, (v, b) => {
    b.set(vaddr, 0);
    b.fill(0xff, 16, 32);
    v.setUint16(32, vport, false);
    v.setUint8(34, l4proto);
    v.setUint8(39, 0x0f);
  });
  return { type: 'xtmatch', name: 'ipvs', rev: 0, info };
}

/** `-j MARK --set-xmark MARK/MASK` (xt_mark_tginfo2: u32 mark, u32 mask); --or-mark v is v/v, --xor-mark v is v/0. */
export function markTarget(mark: number, mask: number): XtTargetExpr {
  return { type: 'xttarget', name: 'MARK', rev: 2, info: struct(8, (v) => (v.setUint32(0, mark >>> 0, true), v.setUint32(4, mask >>> 0, true))) };
}

/**
 * `-j MASQUERADE [--random-fully]`. The info struct differs by family: iptables sends
 * nf_nat_ipv4_multi_range_compat (rangesize 1, range[0].flags: 24 bytes), ip6tables sends
 * nf_nat_range (flags u32 first, then addresses and ports: 40 bytes); the kernel refuses the
 * other family's struct with EINVAL.
 */
export function masqueradeTarget(randomFully: boolean, family: 'IPv4' | 'IPv6' = 'IPv4'): XtTargetExpr {
  const flags = randomFully ? 0x10 /* NF_NAT_RANGE_PROTO_RANDOM_FULLY */ : 0;
  const info =
    family === 'IPv6'
      ? struct(40, (v) => v.setUint32(0, flags, true))
      : struct(24, (v) => {
          v.setUint32(0, 1, true);
          v.setUint32(4, flags, true);
        });
  return { type: 'xttarget', name: 'MASQUERADE', rev: 0, info };
}

/**
 * `-j REJECT` with the port-unreachable default of each family: ipt_reject_info's
 * IPT_ICMP_PORT_UNREACHABLE is 3, ip6t_reject_info's IP6T_ICMP6_PORT_UNREACH is 4 (3 there
 * would be address-unreachable).
 */
export function rejectTarget(family: 'IPv4' | 'IPv6' = 'IPv4'): XtTargetExpr {
  const withCode = family === 'IPv6' ? 4 : 3;
  return { type: 'xttarget', name: 'REJECT', rev: 0, info: struct(4, (v) => v.setUint32(0, withCode, true)) };
}
