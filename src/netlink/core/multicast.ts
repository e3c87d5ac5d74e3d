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

/** What a monitor of one kind of kernel object hands its owner: decoded changes. */
export interface ChangeHandlers<C> {
  /**
   * Announcements of changes made through this port are passed over undecoded (our own large
   * syncs announce every object they write).
   */
  skip?(portId: number): boolean;
  onChange(c: C): void;
  /** Announcements were lost: anything may have changed. */
  onOverflow(): void;
  onError(e: Error): void;
}

/**
 * listenMulticast with each message decoded by `decode` (undefined: not a change the monitor
 * reports); a message that does not decode is reported to onError and the rest go on.
 */
export function listenChanges<C>(
  protocol: number,
  groups: readonly number[],
  decode: (m: InMessage) => C | undefined,
  h: ChangeHandlers<C>,
  opts: SocketOptions = {},
): MulticastListener {
  return listenMulticast(
    protocol,
    groups,
    {
      onMessage(m) {
        if (h.skip?.(m.pid)) return;
        let c: C | undefined;
        try {
          c = decode(m);
        } catch (e) {
          h.onError(asError(e));
          return;
        }
        if (c) h.onChange(c);
      },
      onOverflow: () => h.onOverflow(),
      onError: (e) => h.onError(e),
    },
    opts,
  );
}
