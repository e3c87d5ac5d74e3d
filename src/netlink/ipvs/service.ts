// IPVS_CMD_ATTR_SERVICE: the nested attributes that name and describe a virtual service.
//
//   request (ipvsadm -A -t 10.96.0.1:80 -s rr), in ipvsadm's order:
//   IPVS_CMD_ATTR_SERVICE (nested, NLA_F_NESTED set)
//     AF u16 | PROTOCOL u16 | ADDR 16 bytes | PORT be16        (or AF | FWMARK u32)
//     SCHED_NAME "rr\0" | FLAGS {u32 flags, u32 mask=~0} | TIMEOUT u32 | NETMASK (see fields.ts)
//   The kernel requires SCHED_NAME, FLAGS, TIMEOUT and NETMASK in NEW/SET_SERVICE, and only
//   the key for GET/DEL_SERVICE and to name the service of a destination.
//   Replies add STATS and STATS64, and nest without NLA_F_NESTED.

import { NetlinkDecodeError } from '../core/index.ts';
import type { Attr, AttrSet, AttrWriter } from '../core/index.ts';
import {
  IP_VS_SCHEDNAME_MAXLEN,
  IP_VS_PENAME_MAXLEN,
  IP_VS_SVC_F_HASHED,
  IP_VS_SVC_F_PERSISTENT,
  IpvsSvcAttr as A,
} from './constants.ts';
import {
  addressBytes,
  afName,
  afNumber,
  checkPort,
  checkU32,
  nestedNoFlag,
  protocolName,
  protocolNumber,
  readAddress,
  readNetmask,
  writeNetmask,
  writeUnknown,
} from './fields.ts';
import { encodeStats, pickStats } from './stats.ts';
import { isFwmarkKey } from './types.ts';
import type { IpvsService, IpvsServiceKey, IpvsServiceSpec } from './types.ts';

/** "TCP 10.96.0.1:80", "UDP [fd00::10]:53", "FWM 7": how errors and logs name a service. */
export function serviceLabel(k: IpvsServiceKey): string {
  if (isFwmarkKey(k)) return `FWM ${k.fwmark}${k.family === 'IPv6' ? ' IPv6' : ''}`;
  const host = k.family === 'IPv6' ? `[${k.address}]` : k.address;
  return `${k.protocol.toUpperCase()} ${host}:${k.port}`;
}

/** The identifying attributes (AF, then FWMARK or PROTOCOL, ADDR, PORT). */
export function writeServiceKey(w: AttrWriter, k: IpvsServiceKey): void {
  w.u16(A.AF, afNumber(k.family));
  if (isFwmarkKey(k)) {
    if (!Number.isInteger(k.fwmark) || k.fwmark <= 0 || k.fwmark > 0xffffffff)
      throw new TypeError(`service fwmark ${k.fwmark} must be a non-zero u32`);
    w.u32(A.FWMARK, k.fwmark);
    return;
  }
  const { bytes } = addressBytes(k.address, k.family, 'service address');
  w.u16(A.PROTOCOL, protocolNumber(k.protocol));
  w.bytes(A.ADDR, bytes);
  w.u16(A.PORT, checkPort(k.port, 'service'), 'net');
}

function checkName(name: string, max: number, what: string): string {
  if (typeof name !== 'string' || name.length === 0 || Buffer.byteLength(name) > max - 1 || name.includes('\0')) {
    throw new TypeError(`${what} ${JSON.stringify(name)} must be 1 to ${max - 1} bytes`);
  }
  return name;
}

/** The flags a request carries: the caller's, plus PERSISTENT when there is a timeout. */
export function requestFlags(s: IpvsServiceSpec): number {
  const timeout = s.timeout ?? 0;
  return (((s.flags ?? 0) & ~IP_VS_SVC_F_HASHED) | (timeout > 0 ? IP_VS_SVC_F_PERSISTENT : 0)) >>> 0;
}

/** A full service for NEW_SERVICE / SET_SERVICE, byte for byte what ipvsadm sends. */
export function writeServiceSpec(w: AttrWriter, s: IpvsServiceSpec): void {
  writeServiceKey(w, s);
  w.str(A.SCHED_NAME, checkName(s.scheduler, IP_VS_SCHEDNAME_MAXLEN, 'scheduler'));
  if (s.peName !== undefined) w.str(A.PE_NAME, checkName(s.peName, IP_VS_PENAME_MAXLEN, 'persistence engine'));
  w.out.u16le(12).u16le(A.FLAGS).u32le(requestFlags(s)).u32le(0xffffffff);
  w.u32(A.TIMEOUT, checkU32(s.timeout ?? 0, 'persistence timeout'));
  writeNetmask(w, A.NETMASK, s.family, s.netmask ?? (s.family === 'IPv6' ? 128 : 32));
}

const KNOWN = new Set<number>(Object.values(A));

/** Decodes the attributes of one IPVS_CMD_ATTR_SERVICE nest (a dump entry or a GET reply). */
export function decodeService(attrs: AttrSet): IpvsService {
  const where = attrs.where;
  const family = afName(attrs.require(A.AF, attrs.u16(A.AF)), where, attrs.get(A.AF)!.offset);
  const fwmark = attrs.u32(A.FWMARK);
  let key: IpvsServiceKey;
  if (fwmark !== undefined && fwmark !== 0) {
    key = { family, fwmark };
  } else {
    const protoAttr = attrs.get(A.PROTOCOL);
    const addr = attrs.get(A.ADDR);
    const port = attrs.u16(A.PORT, 'net');
    if (!protoAttr || !addr || port === undefined)
      throw new NetlinkDecodeError(where, 0, 'a service needs a fwmark or a protocol, address and port');
    key = {
      family,
      protocol: protocolName(attrs.require(A.PROTOCOL, attrs.u16(A.PROTOCOL)), where, protoAttr.offset),
      address: readAddress(addr, family, where),
      port,
    };
  }
  const flagsAttr = attrs.get(A.FLAGS);
  if (flagsAttr && flagsAttr.data.length < 4)
    throw new NetlinkDecodeError(where, flagsAttr.offset, `flags of ${flagsAttr.data.length} bytes`);
  const flags = flagsAttr ? new DataView(flagsAttr.data.buffer, flagsAttr.data.byteOffset, 4).getUint32(0, true) : 0;
  const netmaskAttr = attrs.get(A.NETMASK);
  if (netmaskAttr && netmaskAttr.data.length < 4)
    throw new NetlinkDecodeError(where, netmaskAttr.offset, `netmask of ${netmaskAttr.data.length} bytes`);
  const peName = attrs.str(A.PE_NAME);
  const unknown: Attr[] = attrs.all.filter((a) => !KNOWN.has(a.type));
  return {
    ...key,
    scheduler: attrs.str(A.SCHED_NAME) ?? '',
    flags: (flags & ~IP_VS_SVC_F_HASHED) >>> 0,
    timeout: attrs.u32(A.TIMEOUT) ?? 0,
    netmask: netmaskAttr ? readNetmask(netmaskAttr.data, family) : family === 'IPv6' ? 128 : 32,
    ...(peName !== undefined ? { peName } : {}),
    stats: pickStats(attrs, A.STATS, A.STATS64),
    unknown,
  };
}

/**
 * Writes a service the way the kernel reports it (ip_vs_genl_fill_service): the decoder's
 * pair, used for round trips and by fake kernels in tests. Unknown attributes go last.
 */
export function writeServiceEntry(w: AttrWriter, type: number, s: IpvsService): void {
  nestedNoFlag(w, type, (n) => {
    n.u16(A.AF, afNumber(s.family));
    if (isFwmarkKey(s)) n.u32(A.FWMARK, s.fwmark);
    else {
      n.u16(A.PROTOCOL, protocolNumber(s.protocol));
      n.bytes(A.ADDR, addressBytes(s.address, s.family, 'service address').bytes);
      n.u16(A.PORT, s.port, 'net');
    }
    n.str(A.SCHED_NAME, s.scheduler);
    if (s.peName !== undefined) n.str(A.PE_NAME, s.peName);
    n.out
      .u16le(12)
      .u16le(A.FLAGS)
      .u32le(s.flags | IP_VS_SVC_F_HASHED)
      .u32le(0xffffffff);
    n.u32(A.TIMEOUT, s.timeout);
    writeNetmask(n, A.NETMASK, s.family, s.netmask);
    encodeStats(n, A.STATS, A.STATS64, s.stats);
    writeUnknown(n, s.unknown);
  });
}
