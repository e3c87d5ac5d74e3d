// rtnetlink links and addresses: message builders and decoders. Host byte order throughout.
//
//   RTM_NEWLINK "ip link add kube-ipvs0 type dummy"
//   ┌ ifinfomsg (16: family, pad, type, index, flags, change) ┬ IFLA_IFNAME ┬ IFLA_LINKINFO { IFLA_INFO_KIND } ┐
//   RTM_NEWADDR "ip addr add 10.96.0.1/32 dev kube-ipvs0"
//   ┌ ifaddrmsg (8: family, prefixlen, flags, scope, index) ┬ IFA_LOCAL ┬ [IFA_FLAGS] ┬ IFA_ADDRESS ┐
//
// iproute2 nests IFLA_LINKINFO without NLA_F_NESTED; we do the same, so our bytes equal the tool's.

import { ipFromBytes, parseIP } from '../../base/ip.ts';
import type { IPAddr } from '../../base/ip.ts';
import {
  AF_INET,
  AF_INET6,
  AF_UNSPEC,
  AttrSet,
  AttrWriter,
  ByteWriter,
  NetlinkDecodeError,
  NLM_F_CREATE,
  NLM_F_EXCL,
} from '../core/index.ts';
import type { InMessage, OutMessage } from '../core/index.ts';
import {
  IFADDRMSG_LEN,
  IFF_UP,
  IFINFOMSG_LEN,
  IFLA_INFO_KIND,
  IFA_F_NOPREFIXROUTE,
  Ifa,
  Ifla,
  OPER_STATES,
  RTEXT_FILTER_SKIP_STATS,
  RTEXT_FILTER_VF,
  RTM_DELADDR,
  RTM_DELLINK,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_NEWADDR,
  RTM_NEWLINK,
} from './constants.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Addr, AddrOptions, Link } from './types.ts';

export interface IfInfo {
  family: number;
  type: number;
  index: number;
  flags: number;
  change: number;
}

function ifinfo(out: ByteWriter, h: Partial<IfInfo>): void {
  out
    .u8(h.family ?? AF_UNSPEC)
    .u8(0)
    .u16le(h.type ?? 0)
    .i32le(h.index ?? 0)
    .u32le(h.flags ?? 0)
    .u32le(h.change ?? 0);
}

function linkMessage(
  type: number,
  flags: number,
  label: string,
  h: Partial<IfInfo>,
  fill: (w: AttrWriter) => void = () => {},
): OutMessage {
  const out = new ByteWriter(64);
  ifinfo(out, h);
  fill(new AttrWriter(out));
  return { type, flags, payload: out.toBytes(), label };
}

export function checkIfName(name: string): void {
  const n = Buffer.byteLength(name);
  if (n === 0 || n > 15 || /[\s/:]/.test(name))
    throw new TypeError(`"${name}" is not a valid interface name (1-15 bytes, no space, '/' or ':')`);
}

/** RTM_NEWLINK with NLM_F_CREATE|NLM_F_EXCL: a new link of `kind` ("dummy" for kube-ipvs0). */
export function newLinkMessage(name: string, kind: string): OutMessage {
  checkIfName(name);
  return linkMessage(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, `create link ${name} type ${kind}`, {}, (w) => {
    w.str(Ifla.IFNAME, name);
    const info = new AttrWriter();
    // iproute2 writes the kind without its NUL (NLA_STRING accepts both).
    info.bytes(IFLA_INFO_KIND, Buffer.from(kind, 'utf8'));
    w.bytes(Ifla.LINKINFO, info.finish());
  });
}

export const delLinkMessage = (index: number, name = `#${index}`): OutMessage =>
  linkMessage(RTM_DELLINK, 0, `delete link ${name}`, { index });

/** RTM_NEWLINK changing only IFF_UP, as `ip link set NAME up|down` does. */
export const setLinkUpMessage = (index: number, up: boolean, name = `#${index}`): OutMessage =>
  linkMessage(RTM_NEWLINK, 0, `set link ${name} ${up ? 'up' : 'down'}`, {
    index,
    flags: up ? IFF_UP : 0,
    change: IFF_UP,
  });

/** RTM_GETLINK of one link by name (the reply is one RTM_NEWLINK; ENODEV when there is none). */
export function getLinkMessage(name: string): OutMessage {
  checkIfName(name);
  return linkMessage(RTM_GETLINK, 0, `get link ${name}`, {}, (w) =>
    w.u32(Ifla.EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS).str(Ifla.IFNAME, name),
  );
}

export const getLinkByIndexMessage = (index: number): OutMessage =>
  linkMessage(RTM_GETLINK, 0, `get link #${index}`, { index }, (w) =>
    w.u32(Ifla.EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS),
  );

/** RTM_GETLINK dump of every link. */
export const listLinksMessage = (): OutMessage =>
  linkMessage(RTM_GETLINK, 0, 'list links', {}, (w) => w.u32(Ifla.EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS));

const familyNumber = (f: IPFamily): number => (f === 'IPv4' ? AF_INET : AF_INET6);

function addrMessage(
  type: number,
  flags: number,
  verb: string,
  index: number,
  ip: IPAddr,
  prefixLen: number,
  opts: AddrOptions,
  linkName: string,
): OutMessage {
  const max = ip.bytes.length * 8;
  if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > max)
    throw new RangeError(`prefix /${prefixLen} out of range for ${ip.text}`);
  const out = new ByteWriter(64);
  out
    .u8(familyNumber(ip.family))
    .u8(prefixLen)
    .u8(0)
    .u8(opts.scope ?? 0)
    .u32le(index);
  const w = new AttrWriter(out);
  w.bytes(Ifa.LOCAL, ip.bytes);
  if (opts.noPrefixRoute) w.u32(Ifa.FLAGS, IFA_F_NOPREFIXROUTE);
  w.bytes(Ifa.ADDRESS, ip.bytes);
  return {
    type,
    flags,
    payload: out.toBytes(),
    label: `${verb} address ${ip.text}/${prefixLen} ${verb === 'add' ? 'to' : 'from'} ${linkName}`,
  };
}

function parseAddrText(address: string): IPAddr {
  const ip = parseIP(address);
  if (!ip) throw new TypeError(`"${address}" is not an IP address`);
  return ip;
}

/** RTM_NEWADDR (NLM_F_CREATE|NLM_F_EXCL): EEXIST when the address is already there. Prefix defaults to /32 or /128. */
export function newAddrMessage(
  index: number,
  address: string,
  prefixLen?: number,
  opts: AddrOptions = {},
  linkName = `#${index}`,
): OutMessage {
  const ip = parseAddrText(address);
  return addrMessage(
    RTM_NEWADDR,
    NLM_F_CREATE | NLM_F_EXCL,
    'add',
    index,
    ip,
    prefixLen ?? ip.bytes.length * 8,
    opts,
    linkName,
  );
}

/** RTM_DELADDR: EADDRNOTAVAIL when the address is not there. */
export function delAddrMessage(index: number, address: string, prefixLen?: number, linkName = `#${index}`): OutMessage {
  const ip = parseAddrText(address);
  return addrMessage(RTM_DELADDR, 0, 'delete', index, ip, prefixLen ?? ip.bytes.length * 8, {}, linkName);
}

/**
 * RTM_GETADDR dump. The kernel filters by family; it honours `index` only on sockets with
 * NETLINK_GET_STRICT_CHK, so callers filter by link themselves (as iproute2 does).
 */
export function listAddrsMessage(family?: IPFamily, index = 0): OutMessage {
  const out = new ByteWriter(8);
  out
    .u8(family ? familyNumber(family) : AF_UNSPEC)
    .u8(0)
    .u8(0)
    .u8(0)
    .u32le(index);
  return { type: RTM_GETADDR, flags: 0, payload: out.toBytes(), label: `list ${family ?? 'all'} addresses` };
}

export function parseIfInfo(m: InMessage): { hdr: IfInfo; attrs: AttrSet } {
  const p = m.payload;
  if (p.length < IFINFOMSG_LEN)
    throw new NetlinkDecodeError('ifinfomsg', 0, `payload of ${p.length} bytes is shorter than ifinfomsg`);
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const hdr = {
    family: p[0]!,
    type: dv.getUint16(2, true),
    index: dv.getInt32(4, true),
    flags: dv.getUint32(8, true),
    change: dv.getUint32(12, true),
  };
  return { hdr, attrs: new AttrSet(p.subarray(IFINFOMSG_LEN), 'link', IFINFOMSG_LEN) };
}

const macText = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':');

/** Decodes an RTM_NEWLINK (a GETLINK reply or dump part), or an RTM_DELLINK announcement. */
export function decodeLink(m: InMessage): Link {
  if (m.type !== RTM_NEWLINK && m.type !== RTM_DELLINK)
    throw new NetlinkDecodeError('link', 0, `message type ${m.type} is not RTM_NEWLINK or RTM_DELLINK`);
  const { hdr, attrs } = parseIfInfo(m);
  const link: Link = {
    index: hdr.index,
    name: attrs.require(Ifla.IFNAME, attrs.str(Ifla.IFNAME)),
    flags: hdr.flags,
    up: (hdr.flags & IFF_UP) !== 0,
    linkType: hdr.type,
  };
  const kind = attrs.nested(Ifla.LINKINFO)?.str(IFLA_INFO_KIND);
  if (kind !== undefined) link.kind = kind;
  const mtu = attrs.u32(Ifla.MTU);
  if (mtu !== undefined) link.mtu = mtu;
  const mac = attrs.bytes(Ifla.ADDRESS);
  if (mac !== undefined) link.mac = macText(mac);
  const oper = attrs.u8(Ifla.OPERSTATE);
  if (oper !== undefined) link.operState = OPER_STATES[oper] ?? String(oper);
  return link;
}

/** Decodes an RTM_NEWADDR (a GETADDR dump part), or an RTM_DELADDR announcement. */
export function decodeAddr(m: InMessage): Addr {
  if (m.type !== RTM_NEWADDR && m.type !== RTM_DELADDR)
    throw new NetlinkDecodeError('address', 0, `message type ${m.type} is not RTM_NEWADDR or RTM_DELADDR`);
  const p = m.payload;
  if (p.length < IFADDRMSG_LEN)
    throw new NetlinkDecodeError('ifaddrmsg', 0, `payload of ${p.length} bytes is shorter than ifaddrmsg`);
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const fam = p[0]!;
  const attrs = new AttrSet(p.subarray(IFADDRMSG_LEN), 'address', IFADDRMSG_LEN);
  const raw = attrs.bytes(Ifa.LOCAL) ?? attrs.bytes(Ifa.ADDRESS);
  if (!raw) throw new NetlinkDecodeError('address', IFADDRMSG_LEN, 'neither IFA_LOCAL nor IFA_ADDRESS present');
  const want = fam === AF_INET ? 4 : fam === AF_INET6 ? 16 : -1;
  if (raw.length !== want)
    throw new NetlinkDecodeError('address', IFADDRMSG_LEN, `family ${fam} address of ${raw.length} bytes`);
  const ip = ipFromBytes(raw);
  const a: Addr = {
    index: dv.getUint32(4, true),
    family: ip.family,
    address: ip.text,
    prefixLen: p[1]!,
    scope: p[3]!,
    flags: attrs.u32(Ifa.FLAGS) ?? p[2]!,
  };
  const label = attrs.str(Ifa.LABEL);
  if (label !== undefined) a.label = label;
  return a;
}
