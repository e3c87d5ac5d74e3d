// rtnetlink change announcements, as `ip monitor link address` reads them: the kernel announces
// every link and address added or removed on the RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR and
// RTNLGRP_IPV6_IFADDR multicast groups (linux/rtnetlink.h). Each announcement's nlmsghdr
// carries the port id of the socket whose request made the change; the kernel's own changes
// (addresses removed with their link) and IPv6 address changes (addrconf announces them with
// port id 0 on 6.1) carry 0.

import { listenChanges, Protocol } from '../core/index.ts';
import type { ChangeHandlers, InMessage, MulticastListener, SocketOptions } from '../core/index.ts';
import { decodeAddr, decodeLink } from './codec.ts';
import { RTM_DELADDR, RTM_DELLINK, RTM_NEWADDR, RTM_NEWLINK } from './constants.ts';

/** linux/rtnetlink.h enum rtnetlink_groups. */
export const RTNLGRP_LINK = 1;
export const RTNLGRP_IPV4_IFADDR = 5;
export const RTNLGRP_IPV6_IFADDR = 9;

export type RouteChange =
  | {
      readonly kind: 'link';
      /** RTM_NEWLINK (added or changed) rather than RTM_DELLINK. */
      readonly added: boolean;
      readonly index: number;
      readonly name: string;
      readonly portId: number;
    }
  | {
      readonly kind: 'addr';
      /** RTM_NEWADDR rather than RTM_DELADDR. */
      readonly added: boolean;
      /** The link the address is (was) on. */
      readonly index: number;
      readonly address: string;
      readonly prefixLen: number;
      readonly portId: number;
    };

/** One announcement, or undefined when it is neither a link nor an address message. Throws NetlinkDecodeError. */
export function decodeRouteChange(m: InMessage): RouteChange | undefined {
  if (m.type === RTM_NEWLINK || m.type === RTM_DELLINK) {
    const l = decodeLink(m);
    return { kind: 'link', added: m.type === RTM_NEWLINK, index: l.index, name: l.name, portId: m.pid };
  }
  if (m.type === RTM_NEWADDR || m.type === RTM_DELADDR) {
    const a = decodeAddr(m);
    return {
      kind: 'addr',
      added: m.type === RTM_NEWADDR,
      index: a.index,
      address: a.address,
      prefixLen: a.prefixLen,
      portId: m.pid,
    };
  }
  return undefined;
}

export type RouteMonitorHandlers = ChangeHandlers<RouteChange>;

/** Which groups to join: links, and the addresses of the families given. */
export interface RouteMonitorOptions extends SocketOptions {
  readonly families?: readonly ('IPv4' | 'IPv6')[];
}

/** Listens to link and address announcements in this namespace on a socket of its own. */
export function monitorRoute(h: RouteMonitorHandlers, opts: RouteMonitorOptions = {}): MulticastListener {
  const { families = ['IPv4', 'IPv6'], ...sockOpts } = opts;
  const groups = [RTNLGRP_LINK];
  if (families.includes('IPv4')) groups.push(RTNLGRP_IPV4_IFADDR);
  if (families.includes('IPv6')) groups.push(RTNLGRP_IPV6_IFADDR);
  return listenChanges(Protocol.ROUTE, groups, decodeRouteChange, h, sockOpts);
}
