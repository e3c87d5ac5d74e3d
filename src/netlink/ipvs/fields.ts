// Field codecs shared by services and destinations: protocol numbers, address families, the
// 16-byte address union, and the persistence netmask, whose encoding depends on the family.

import { ipFromBytes, parseIP } from '../../base/ip.ts';
import type { IPFamily } from '../../base/ip.ts';
import { AF_INET, AF_INET6, NetlinkDecodeError } from '../core/index.ts';
import type { Attr, AttrWriter } from '../core/index.ts';
import {
  IP_VS_CONN_F_BYPASS,
  IP_VS_CONN_F_DROUTE,
  IP_VS_CONN_F_FWD_MASK,
  IP_VS_CONN_F_LOCALNODE,
  IP_VS_CONN_F_MASQ,
  IP_VS_CONN_F_TUNNEL,
  IPPROTO_SCTP,
  IPPROTO_TCP,
  IPPROTO_UDP,
} from './constants.ts';
import type { IpvsForward, IpvsProtocol } from './types.ts';

const PROTOCOLS: Record<IpvsProtocol, number> = { tcp: IPPROTO_TCP, udp: IPPROTO_UDP, sctp: IPPROTO_SCTP };
const FORWARDS: Record<IpvsForward, number> = {
  masq: IP_VS_CONN_F_MASQ,
  local: IP_VS_CONN_F_LOCALNODE,
  tunnel: IP_VS_CONN_F_TUNNEL,
  route: IP_VS_CONN_F_DROUTE,
  bypass: IP_VS_CONN_F_BYPASS,
};

export function protocolNumber(p: IpvsProtocol): number {
  const n = PROTOCOLS[p];
  if (n === undefined) throw new TypeError(`IPVS supports tcp, udp and sctp, not ${String(p)}`);
  return n;
}

export function protocolName(n: number, where: string, offset: number): IpvsProtocol {
  for (const [name, num] of Object.entries(PROTOCOLS)) if (num === n) return name as IpvsProtocol;
  throw new NetlinkDecodeError(where, offset, `unknown IPVS protocol ${n}`);
}

export function forwardNumber(f: IpvsForward): number {
  const n = FORWARDS[f];
  if (n === undefined) throw new TypeError(`unknown IPVS forwarding method ${String(f)}`);
  return n;
}

export function forwardName(n: number, where: string, offset: number): IpvsForward {
  const masked = n & IP_VS_CONN_F_FWD_MASK;
  for (const [name, num] of Object.entries(FORWARDS)) if (num === masked) return name as IpvsForward;
  throw new NetlinkDecodeError(where, offset, `unknown IPVS forwarding method ${n}`);
}

export const afNumber = (f: IPFamily): number => (f === 'IPv6' ? AF_INET6 : AF_INET);

export function afName(n: number, where: string, offset: number): IPFamily {
  if (n === AF_INET) return 'IPv4';
  if (n === AF_INET6) return 'IPv6';
  throw new NetlinkDecodeError(where, offset, `unknown address family ${n}`);
}

/**
 * An address as union nf_inet_addr: 16 bytes, an IPv4 address in the first 4 (ipvsadm and the
 * kernel both send all 16). Throws a TypeError for text that is no address of `family`.
 */
export function addressBytes(
  text: string,
  family: IPFamily | undefined,
  what: string,
): { family: IPFamily; bytes: Uint8Array } {
  const ip = parseIP(text);
  if (!ip) throw new TypeError(`${what}: ${JSON.stringify(text)} is not an IP address`);
  if (family && ip.family !== family) throw new TypeError(`${what}: ${text} is not an ${family} address`);
  const bytes = new Uint8Array(16);
  bytes.set(ip.bytes);
  return { family: ip.family, bytes };
}

/** Reads an address attribute of `family`: 16 bytes (the union) or exactly the address size. */
export function readAddress(a: Attr, family: IPFamily, where: string): string {
  const need = family === 'IPv4' ? 4 : 16;
  if (a.data.length < need)
    throw new NetlinkDecodeError(
      where,
      a.offset,
      `address of ${a.data.length} bytes, an ${family} address needs ${need}`,
    );
  return ipFromBytes(a.data.subarray(0, need)).text;
}

export function checkPort(port: number, what: string): number {
  if (!Number.isInteger(port) || port < 0 || port > 0xffff)
    throw new TypeError(`${what}: port ${port} is out of range`);
  return port;
}

export function checkU32(v: number, what: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new TypeError(`${what} ${v} is not a u32`);
  return v;
}

/**
 * The persistence netmask: for IPv4 the mask itself as a __be32 (255.255.255.0), for IPv6 the
 * prefix length as a host-order u32 (as ipvsadm sends it and ip_vs_ctl.c checks it: 1..128).
 */
export function writeNetmask(w: AttrWriter, type: number, family: IPFamily, prefix: number): void {
  const max = family === 'IPv4' ? 32 : 128;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max)
    throw new TypeError(`persistence netmask /${prefix} is out of range for ${family}`);
  if (family === 'IPv6') w.u32(type, prefix);
  else w.u32(type, prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0, 'net');
}

/** The inverse of writeNetmask. A non-contiguous IPv4 mask reads as its leading one bits. */
export function readNetmask(raw: Uint8Array, family: IPFamily): number {
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  if (family === 'IPv6') return dv.getUint32(0, true);
  const mask = dv.getUint32(0, false);
  let n = 0;
  while (n < 32 && mask & (0x80000000 >>> n)) n++;
  return n;
}

/**
 * A nested attribute without NLA_F_NESTED, as the kernel writes IPVS replies
 * (nla_nest_start_noflag). Requests use AttrWriter.nested, which sets the flag as ipvsadm does.
 */
export function nestedNoFlag(w: AttrWriter, type: number, fill: (w: AttrWriter) => void): void {
  const at = w.out.reserve(4);
  w.out.patchU16le(at + 2, type);
  fill(w);
  w.out.patchU16le(at, w.out.length - at);
}

/** Writes back attributes kept from a decode (round trips keep what they did not understand). */
export function writeUnknown(w: AttrWriter, attrs: readonly Attr[]): void {
  for (const a of attrs) {
    const flags = (a.nested ? 0x8000 : 0) | (a.netOrder ? 0x4000 : 0);
    w.bytes(a.type | flags, a.data);
  }
}
