// The seam between our protocol code and a socket. The real one wraps the `netlink`
// package's native socket; tests substitute a function-backed fake kernel (fake-kernel.ts).

import { RawNetlinkSocket } from 'netlink';
import { errnoName } from './errors.ts';

export interface SocketFailure {
  errno: number;
  code: string;
}

export interface RawSocket {
  /** The port id the kernel addresses replies to. */
  readonly localPort: number;
  /** Sends one datagram made of the given chunks. Rejects with a SocketFailure-shaped error. */
  send(chunks: readonly Uint8Array[]): Promise<void>;
  /** Registers the receivers; one datagram may hold several messages. */
  listen(onDatagram: (buf: Uint8Array) => void, onError: (err: SocketFailure) => void): void;
  /** The largest datagram the socket accepts (the kernel refuses len > sk_sndbuf - 32). */
  maxSendBytes(): number;
  /** Joins a multicast group (NETLINK_ADD_MEMBERSHIP): the kernel's notifications arrive as datagrams. */
  joinGroup?(group: number): void;
  close(): void;
}

export interface SocketOptions {
  /** SO_RCVBUF request; the kernel caps it at net.core.rmem_max (and doubles it). */
  recvBufferBytes?: number;
  /** SO_SNDBUF request; the kernel caps it at net.core.wmem_max (and doubles it). */
  sendBufferBytes?: number;
  /**
   * Receive into a fixed buffer of this size instead of peeking at each datagram's size.
   * The kernel sizes dump datagrams after the reader's buffer (up to 32 KiB), so 32768 makes
   * dumps take about 8 times fewer datagrams than peeking (which reads 4 KiB ones). Only for
   * sockets whose replies never exceed it (a larger datagram arrives truncated: ENOBUFS).
   */
  recvMessageBytes?: number;
  /** Multicast groups to join (NETLINK_ADD_MEMBERSHIP), for sockets that listen to kernel events. */
  groups?: readonly number[];
}

const DEFAULT_RCVBUF = 8 << 20;
const DEFAULT_SNDBUF = 8 << 20;

interface NativeErr {
  errno?: number;
  code?: string;
}

const toFailure = (e: NativeErr): SocketFailure => {
  const errno = Math.abs(e.errno ?? 0);
  return { errno, code: e.code ?? errnoName(errno) };
};

/** A netlink socket of the given protocol in the calling process's network namespace. */
export function openRawSocket(protocol: number, opts: SocketOptions = {}): RawSocket {
  const sock = new RawNetlinkSocket(protocol, {
    recvBufferSize: opts.recvBufferBytes ?? DEFAULT_RCVBUF,
    sendBufferSize: opts.sendBufferBytes ?? DEFAULT_SNDBUF,
    ...(opts.recvMessageBytes ? { messagePeeking: false, msgBufferSize: opts.recvMessageBytes } : {}),
  });
  for (const g of opts.groups ?? []) sock.addMembership(g);
  // A netlink socket must not keep the process alive on its own: owners close it.
  sock.unref();
  return {
    localPort: sock.address().port,
    send(chunks) {
      return new Promise((resolve, reject) => {
        sock.send(chunks as Uint8Array[], { port: 0 }, (err) => {
          if (err) reject(Object.assign(new Error(`netlink send: ${err.code}`), toFailure(err)));
          else resolve();
        });
      });
    },
    listen(onDatagram, onError) {
      sock.on('message', (msg) => onDatagram(msg));
      // A truncated datagram lost data we needed: report it as the kernel would (ENOBUFS-like).
      sock.on('truncatedMessage', () => onError({ errno: 105, code: 'ENOBUFS' }));
      sock.on('error', (err) => onError(toFailure(err)));
    },
    maxSendBytes() {
      return sock.getSendBufferSize() - 32;
    },
    joinGroup(group) {
      sock.addMembership(group);
    },
    close() {
      sock.close();
    },
  };
}
