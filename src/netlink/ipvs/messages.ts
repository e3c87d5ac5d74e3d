// The IPVS generic-netlink messages: one builder per command, and the reply decoders.
// `family` is the id the controller assigned to "IPVS" in this boot (see GenlFamilies).
//
//   nlmsghdr (type = family id) | genlmsghdr {cmd, version 1, 0} | IPVS_CMD_ATTR_* ...
//
// Flags: ipvsadm sends NEW/SET/DEL with NLM_F_REQUEST|NLM_F_ACK only (no CREATE/EXCL: the
// kernel's IPVS commands ignore them); the transport adds REQUEST and ACK (or DUMP).

import { genlMessage, NetlinkDecodeError, splitGenlPayload } from '../core/index.ts';
import type { InMessage, OutMessage, AttrSet } from '../core/index.ts';
import type { IPFamily } from '../../base/ip.ts';
import { IPVS_GENL_VERSION, IpvsCmd, IpvsCmdAttr, IpvsInfoAttr } from './constants.ts';
import { decodeDestination, destinationLabel, writeDestinationKey, writeDestinationSpec } from './destination.ts';
import { decodeService, serviceLabel, writeServiceKey, writeServiceSpec } from './service.ts';
import type {
  IpvsDestination,
  IpvsDestinationKey,
  IpvsDestinationSpec,
  IpvsInfo,
  IpvsService,
  IpvsServiceKey,
  IpvsServiceSpec,
  IpvsTimeouts,
} from './types.ts';

const msg = (family: number, cmd: number, label: string, fill?: Parameters<typeof genlMessage>[5]): OutMessage =>
  genlMessage(family, cmd, IPVS_GENL_VERSION, 0, label, fill);

export const newServiceMessage = (family: number, s: IpvsServiceSpec): OutMessage =>
  msg(family, IpvsCmd.NEW_SERVICE, `add ipvs service ${serviceLabel(s)} scheduler ${s.scheduler}`, (w) =>
    w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceSpec(n, s)),
  );

export const setServiceMessage = (family: number, s: IpvsServiceSpec): OutMessage =>
  msg(family, IpvsCmd.SET_SERVICE, `edit ipvs service ${serviceLabel(s)} scheduler ${s.scheduler}`, (w) =>
    w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceSpec(n, s)),
  );

export const delServiceMessage = (family: number, k: IpvsServiceKey): OutMessage =>
  msg(family, IpvsCmd.DEL_SERVICE, `delete ipvs service ${serviceLabel(k)}`, (w) =>
    w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceKey(n, k)),
  );

/** GET_SERVICE for one service (no dump flag), or all (with the dump flag and no key). */
export const getServiceMessage = (family: number, k?: IpvsServiceKey): OutMessage =>
  k
    ? msg(family, IpvsCmd.GET_SERVICE, `get ipvs service ${serviceLabel(k)}`, (w) =>
        w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceKey(n, k)),
      )
    : msg(family, IpvsCmd.GET_SERVICE, 'list ipvs services');

const destMessage = (
  family: number,
  cmd: number,
  verb: string,
  k: IpvsServiceKey,
  d: IpvsDestinationSpec | IpvsDestinationKey,
  full: boolean,
): OutMessage =>
  msg(family, cmd, `${verb} ipvs destination ${destinationLabel(d)} of ${serviceLabel(k)}`, (w) => {
    w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceKey(n, k));
    w.nested(IpvsCmdAttr.DEST, (n) =>
      full ? writeDestinationSpec(n, d as IpvsDestinationSpec) : writeDestinationKey(n, d),
    );
  });

export const newDestMessage = (family: number, k: IpvsServiceKey, d: IpvsDestinationSpec): OutMessage =>
  destMessage(family, IpvsCmd.NEW_DEST, 'add', k, d, true);
export const setDestMessage = (family: number, k: IpvsServiceKey, d: IpvsDestinationSpec): OutMessage =>
  destMessage(family, IpvsCmd.SET_DEST, 'edit', k, d, true);
export const delDestMessage = (family: number, k: IpvsServiceKey, d: IpvsDestinationKey): OutMessage =>
  destMessage(family, IpvsCmd.DEL_DEST, 'delete', k, d, false);

/** GET_DEST, sent as a dump: every destination of one service. */
export const getDestsMessage = (family: number, k: IpvsServiceKey): OutMessage =>
  msg(family, IpvsCmd.GET_DEST, `list ipvs destinations of ${serviceLabel(k)}`, (w) =>
    w.nested(IpvsCmdAttr.SERVICE, (n) => writeServiceKey(n, k)),
  );

/** SET_CONFIG: only the time-outs given (and non-zero) are changed, as in `ipvsadm --set`. */
export const setConfigMessage = (family: number, t: Partial<IpvsTimeouts>): OutMessage =>
  msg(family, IpvsCmd.SET_CONFIG, `set ipvs timeouts ${[t.tcp ?? 0, t.tcpFin ?? 0, t.udp ?? 0].join(' ')}`, (w) => {
    for (const [type, v] of [
      [IpvsCmdAttr.TIMEOUT_TCP, t.tcp],
      [IpvsCmdAttr.TIMEOUT_TCP_FIN, t.tcpFin],
      [IpvsCmdAttr.TIMEOUT_UDP, t.udp],
    ] as const) {
      if (v === undefined) continue;
      if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw new TypeError(`IPVS timeout ${v} is out of range`);
      w.u32(type, v);
    }
  });

export const getConfigMessage = (family: number): OutMessage => msg(family, IpvsCmd.GET_CONFIG, 'get ipvs timeouts');
export const getInfoMessage = (family: number): OutMessage => msg(family, IpvsCmd.GET_INFO, 'get ipvs info');
export const flushMessage = (family: number): OutMessage => msg(family, IpvsCmd.FLUSH, 'flush all ipvs services');

function expectCmd(m: InMessage, cmd: number, where: string): AttrSet {
  const g = splitGenlPayload(m, where);
  if (g.cmd !== cmd) throw new NetlinkDecodeError(where, 0, `expected command ${cmd}, got ${g.cmd}`);
  return g.attrs;
}

/** A NEW_SERVICE reply (dump entry or GET answer). */
export function parseServiceReply(m: InMessage): IpvsService {
  const attrs = expectCmd(m, IpvsCmd.NEW_SERVICE, 'ipvs service');
  const nest = attrs.nested(IpvsCmdAttr.SERVICE);
  if (!nest) throw new NetlinkDecodeError('ipvs service', 0, 'reply without IPVS_CMD_ATTR_SERVICE');
  return decodeService(nest);
}

/** A NEW_DEST reply (dump entry). */
export function parseDestReply(m: InMessage, serviceFamily?: IPFamily): IpvsDestination {
  const attrs = expectCmd(m, IpvsCmd.NEW_DEST, 'ipvs destination');
  const nest = attrs.nested(IpvsCmdAttr.DEST);
  if (!nest) throw new NetlinkDecodeError('ipvs destination', 0, 'reply without IPVS_CMD_ATTR_DEST');
  return decodeDestination(nest, serviceFamily);
}

/** The SET_CONFIG reply to GET_CONFIG. */
export function parseConfigReply(m: InMessage): IpvsTimeouts {
  const attrs = expectCmd(m, IpvsCmd.SET_CONFIG, 'ipvs config');
  return {
    tcp: attrs.u32(IpvsCmdAttr.TIMEOUT_TCP) ?? 0,
    tcpFin: attrs.u32(IpvsCmdAttr.TIMEOUT_TCP_FIN) ?? 0,
    udp: attrs.u32(IpvsCmdAttr.TIMEOUT_UDP) ?? 0,
  };
}

/** The SET_INFO reply to GET_INFO. */
export function parseInfoReply(m: InMessage): IpvsInfo {
  const attrs = expectCmd(m, IpvsCmd.SET_INFO, 'ipvs info');
  const v = attrs.require(IpvsInfoAttr.VERSION, attrs.u32(IpvsInfoAttr.VERSION));
  return {
    version: `${(v >> 16) & 0xff}.${(v >> 8) & 0xff}.${v & 0xff}`,
    connTableSize: attrs.u32(IpvsInfoAttr.CONN_TAB_SIZE) ?? 0,
  };
}
