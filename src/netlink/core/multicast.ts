// A netlink socket that only listens: it joins multicast groups and hands each message the
// kernel announces to a callback (as `nft monitor` or `ip monitor` do). Its own socket, so
// announcements never mix with the replies a NetlinkConnection matches by seq.
//
// Announcements can be lost: when the receive buffer is full the kernel drops them and the
// next read fails with ENOBUFS. That is reported as an overflow, so the owner can assume
// that anything may have changed.

import { asError } from '../../base/errors.ts';
import type { InMessage } from './message.ts';
import { parseMessages } from './message.ts';
import { openRawSocket } from './raw-socket.ts';
import type { RawSocket, SocketFailure, SocketOptions } from './raw-socket.ts';

export interface MulticastHandlers {
  onMessage(m: InMessage): void;
  /** Announcements were dropped (ENOBUFS, or a datagram cut short). */
  onOverflow(): void;
  /** A socket error other than an overflow, or a datagram that does not parse. */
  onError(e: Error): void;
}

export interface MulticastListener {
  /** Our socket's port id. */
  readonly localPort: number;
  close(): void;
}

/** Opens a listening socket of `protocol` in this namespace, joined to `groups`. */
export function listenMulticast(
  protocol: number,
  groups: readonly number[],
  handlers: MulticastHandlers,
  opts: SocketOptions & { open?: (protocol: number, opts: SocketOptions) => RawSocket } = {},
): MulticastListener {
  const { open = openRawSocket, ...sockOpts } = opts;
  const sock = open(protocol, sockOpts);
  try {
    if (!sock.joinGroup) throw new Error('this netlink socket cannot join multicast groups');
    for (const g of groups) sock.joinGroup(g);
  } catch (e) {
    sock.close();
    throw e;
  }
  let closed = false;
  sock.listen(
    (buf) => {
      if (closed) return;
      let msgs: InMessage[];
      try {
        msgs = parseMessages(buf);
      } catch (e) {
        handlers.onError(asError(e));
        return;
      }
      for (const m of msgs) handlers.onMessage(m);
    },
    (err: SocketFailure) => {
      if (closed) return;
      if (err.code === 'ENOBUFS') handlers.onOverflow();
      else handlers.onError(new Error(`netlink multicast socket: ${err.code}`));
    },
  );
  return {
    localPort: sock.localPort,
    close() {
      if (closed) return;
      closed = true;
      sock.close();
    },
  };
}
