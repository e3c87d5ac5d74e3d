// rtnetlink: the kube-ipvs0 dummy link, its addresses, and the node's addresses.
export * from './constants.ts';
export * from './types.ts';
export * from './errors.ts';
export {
  checkIfName,
  decodeAddr,
  decodeLink,
  delAddrMessage,
  delLinkMessage,
  getLinkByIndexMessage,
  getLinkMessage,
  listAddrsMessage,
  listLinksMessage,
  newAddrMessage,
  newLinkMessage,
  parseIfInfo,
  setLinkUpMessage,
} from './codec.ts';
export type { IfInfo } from './codec.ts';
export { ADDRS_PER_DATAGRAM, RouteClient, selectNodeAddresses } from './client.ts';
export type { AddAddrOptions, LinkRef, RouteCallOptions, RouteTransport } from './client.ts';
export { decodeRouteChange, monitorRoute, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_LINK } from './monitor.ts';
export type { RouteChange, RouteMonitorHandlers, RouteMonitorOptions } from './monitor.ts';

import { connect, Protocol } from '../core/index.ts';
import type { ConnectionOptions, SocketOptions } from '../core/index.ts';
import { RouteClient } from './client.ts';

/** A RouteClient on its own rtnetlink socket in this process's network namespace. */
export function openRoute(opts: ConnectionOptions & SocketOptions = {}): { client: RouteClient; close(): void } {
  const conn = connect(Protocol.ROUTE, opts);
  return { client: new RouteClient(conn), close: () => conn.close() };
}
