// IPVS_CMD_ATTR_DEST: a real server of a service.
//
//   request (ipvsadm -a -t 10.96.0.1:80 -r 10.0.0.2:8080 -m -w 1), in ipvsadm 1.31's order:
//   IPVS_CMD_ATTR_DEST (nested, NLA_F_NESTED set)
//     ADDR_FAMILY u16 | ADDR 16 bytes | PORT be16 | FWD_METHOD u32 | WEIGHT u32
//     TUN_TYPE u8 | TUN_PORT be16 | TUN_FLAGS u16 | U_THRESH u32 | L_THRESH u32
//   NEW/SET_DEST need ADDR, PORT, FWD_METHOD, WEIGHT, U_THRESH and L_THRESH; DEL_DEST only
//   ADDR and PORT. Replies add ACTIVE_CONNS, INACT_CONNS, PERSIST_CONNS, STATS, STATS64.

import { NetlinkDecodeError } from '../core/index.ts';
import type { Attr, AttrSet, AttrWriter } from '../core/index.ts';
import type { IPFamily } from '../../base/ip.ts';
import { IpvsDestAttr as A } from './constants.ts';
import {
  addressBytes,
  afName,
  afNumber,
  checkPort,
  checkU32,
  forwardName,
  forwardNumber,
  nestedNoFlag,
  readAddress,
  writeUnknown,
} from './fields.ts';
import { encodeStats, pickStats } from './stats.ts';
import type { IpvsDestination, IpvsDestinationKey, IpvsDestinationSpec } from './types.ts';

export const destinationLabel = (d: IpvsDestinationKey): string =>
  d.address.includes(':') ? `[${d.address}]:${d.port}` : `${d.address}:${d.port}`;

/** ADDR_FAMILY, ADDR, PORT: enough to name a destination (DEL_DEST). */
export function writeDestinationKey(w: AttrWriter, d: IpvsDestinationKey): IPFamily {
  const { family, bytes } = addressBytes(d.address, undefined, 'destination address');
  w.u16(A.ADDR_FAMILY, afNumber(family));
  w.bytes(A.ADDR, bytes);
  w.u16(A.PORT, checkPort(d.port, 'destination'), 'net');
  return family;
}

/** A full destination for NEW_DEST / SET_DEST, byte for byte what ipvsadm sends. */
export function writeDestinationSpec(w: AttrWriter, d: IpvsDestinationSpec): void {
  writeDestinationKey(w, d);
  w.u32(A.FWD_METHOD, forwardNumber(d.forward ?? 'masq'));
  if (!Number.isInteger(d.weight) || d.weight < 0 || d.weight > 0x7fffffff)
    throw new TypeError(`destination weight ${d.weight} is out of range`);
  w.u32(A.WEIGHT, d.weight);
  // Tunnel settings (kernel 5.3+) only matter for forward 'tunnel'; ipvsadm sends zeros.
  w.u8(A.TUN_TYPE, 0);
  w.u16(A.TUN_PORT, 0, 'net');
  w.u16(A.TUN_FLAGS, 0);
  w.u32(A.U_THRESH, checkU32(d.upperThreshold ?? 0, 'upper threshold'));
  w.u32(A.L_THRESH, checkU32(d.lowerThreshold ?? 0, 'lower threshold'));
}

const KNOWN = new Set<number>(Object.values(A));

/** Decodes one IPVS_CMD_ATTR_DEST nest. `serviceFamily` applies when ADDR_FAMILY is absent (old kernels). */
export function decodeDestination(attrs: AttrSet, serviceFamily?: IPFamily): IpvsDestination {
  const where = attrs.where;
  const afAttr = attrs.get(A.ADDR_FAMILY);
  const family = afAttr
    ? afName(attrs.require(A.ADDR_FAMILY, attrs.u16(A.ADDR_FAMILY)), where, afAttr.offset)
    : serviceFamily;
  if (!family) throw new NetlinkDecodeError(where, 0, 'destination without an address family');
  const addr = attrs.get(A.ADDR);
  const port = attrs.u16(A.PORT, 'net');
  if (!addr || port === undefined) throw new NetlinkDecodeError(where, 0, 'destination without address or port');
  const fwdAttr = attrs.get(A.FWD_METHOD);
  const weight = attrs.u32(A.WEIGHT) ?? 0;
  return {
    family,
    address: readAddress(addr, family, where),
    port,
    forward: fwdAttr
      ? forwardName(attrs.require(A.FWD_METHOD, attrs.u32(A.FWD_METHOD)), where, fwdAttr.offset)
      : 'masq',
    weight: weight | 0, // an int in the kernel
    upperThreshold: attrs.u32(A.U_THRESH) ?? 0,
    lowerThreshold: attrs.u32(A.L_THRESH) ?? 0,
    activeConns: attrs.u32(A.ACTIVE_CONNS) ?? 0,
    inactiveConns: attrs.u32(A.INACT_CONNS) ?? 0,
    persistentConns: attrs.u32(A.PERSIST_CONNS) ?? 0,
    tunnelType: attrs.u8(A.TUN_TYPE) ?? 0,
    tunnelPort: attrs.u16(A.TUN_PORT, 'net') ?? 0,
    tunnelFlags: attrs.u16(A.TUN_FLAGS) ?? 0,
    stats: pickStats(attrs, A.STATS, A.STATS64),
    unknown: attrs.all.filter((a: Attr) => !KNOWN.has(a.type)),
  };
}

/** Writes a destination the way the kernel reports it (ip_vs_genl_fill_dest): the decoder's pair. */
export function writeDestinationEntry(w: AttrWriter, type: number, d: IpvsDestination): void {
  nestedNoFlag(w, type, (n) => {
    n.bytes(A.ADDR, addressBytes(d.address, d.family, 'destination address').bytes);
    n.u16(A.PORT, d.port, 'net');
    n.u32(A.FWD_METHOD, forwardNumber(d.forward));
    n.u32(A.WEIGHT, d.weight >>> 0);
    n.u8(A.TUN_TYPE, d.tunnelType);
    n.u16(A.TUN_PORT, d.tunnelPort, 'net');
    n.u16(A.TUN_FLAGS, d.tunnelFlags);
    n.u32(A.U_THRESH, d.upperThreshold);
    n.u32(A.L_THRESH, d.lowerThreshold);
    n.u32(A.ACTIVE_CONNS, d.activeConns);
    n.u32(A.INACT_CONNS, d.inactiveConns);
    n.u32(A.PERSIST_CONNS, d.persistentConns);
    n.u16(A.ADDR_FAMILY, afNumber(d.family));
    encodeStats(n, A.STATS, A.STATS64, d.stats);
    writeUnknown(n, d.unknown);
  });
}
