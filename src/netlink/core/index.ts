// The netlink toolkit every subsystem client builds on.
export * from './constants.ts';
export * from './errors.ts';
export * from './bytes.ts';
export * from './attrs.ts';
export * from './message.ts';
export * from './connection.ts';
export * from './nfnetlink.ts';
export * from './genl.ts';
export type { RawSocket, SocketFailure, SocketOptions } from './raw-socket.ts';
export { openRawSocket } from './raw-socket.ts';
export { listenChanges, listenMulticast } from './multicast.ts';
export type { ChangeHandlers, MulticastHandlers, MulticastListener } from './multicast.ts';

import { NetlinkConnection } from './connection.ts';
import type { ConnectionOptions } from './connection.ts';
import { openRawSocket } from './raw-socket.ts';
import type { SocketOptions } from './raw-socket.ts';

/** Opens a connection for `protocol` (Protocol.NETFILTER, GENERIC, ROUTE) in this netns. */
export function connect(protocol: number, opts: ConnectionOptions & SocketOptions = {}): NetlinkConnection {
  return new NetlinkConnection(openRawSocket(protocol, opts), opts);
}

/**
 * connect(), and the socket's port id: the kernel marks the notifications of the changes a
 * socket makes with it, which is how a listener tells our own changes apart.
 */
export function connectWithPort(
  protocol: number,
  opts: ConnectionOptions & SocketOptions = {},
): { conn: NetlinkConnection; port: number } {
  const sock = openRawSocket(protocol, opts);
  return { conn: new NetlinkConnection(sock, opts), port: sock.localPort };
}
