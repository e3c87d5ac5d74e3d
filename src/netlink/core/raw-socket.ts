// The seam between our protocol code and a socket. The real one is our own addon,
// native/netlink-socket (socket, sendmsg, recvmsg on a libuv poll, setsockopt); tests
// substitute a function-backed fake kernel (fake/kernel.ts).

import { NetlinkSocket } from 'netlink-socket';
import { errnoName } from './errors.ts';

export interface SocketFailure {
  errno: number;
  code: string;
}

/** The effective buffer sizes of a socket (getsockopt: the kernel doubles what was asked for). */
export interface BufferSizes {
  send: number;
  recv: number;
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
  /** The effective send and receive buffer sizes. */
  bufferSizes?(): BufferSizes;
  /** Joins a multicast group (NETLINK_ADD_MEMBERSHIP): the kernel's notifications arrive as datagrams. */
  joinGroup?(group: number): void;
  close(): void;
}

export interface SocketOptions {
  /** SO_RCVBUF request; the kernel caps it at net.core.rmem_max (and doubles it) unless forceBuffers. */
  recvBufferBytes?: number;
  /** SO_SNDBUF request; the kernel caps it at net.core.wmem_max (and doubles it) unless forceBuffers. */
  sendBufferBytes?: number;
  /**
   * Set the buffer sizes with SO_SNDBUFFORCE/SO_RCVBUFFORCE, past net.core.{w,r}mem_max, as
   * iptables-nft-restore does for its large batches. Needs CAP_NET_ADMIN; without it the
   * plain, capped options are used.
   */
  forceBuffers?: boolean;
  /**
   * Receive into a fixed buffer of this size instead of peeking at each datagram's size.
   * The kernel sizes dump datagrams after the reader's buffer (up to 32 KiB), so 32768 makes
   * dumps take about 8 times fewer datagrams than peeking (which reads 4 KiB ones). Only for
   * sockets whose replies never exceed it (a larger datagram arrives truncated: ENOBUFS).
   */
  recvMessageBytes?: number;
  /** Multicast groups to join (NETLINK_ADD_MEMBERSHIP), for sockets that listen to kernel events. */
  groups?: readonly number[];
  /**
   * NETLINK_EXT_ACK (default on): the kernel's error replies carry its message and the offset
   * of the offending attribute (NLMSGERR_ATTR_MSG/OFFS), which NetlinkError shows.
   */
  extAck?: boolean;
  /**
   * NETLINK_CAP_ACK (default off): error replies no longer echo the whole request, only its
   * header, so far more of them fit in the receive buffer. Not for ipset, which reads the echo.
   */
  capAck?: boolean;
}

const DEFAULT_RCVBUF = 8 << 20;
const DEFAULT_SNDBUF = 8 << 20;

// <asm-generic/socket.h> and <linux/netlink.h>.
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_RCVBUF = 8;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SOL_NETLINK = 270;
const NETLINK_ADD_MEMBERSHIP = 1;
const NETLINK_CAP_ACK = 10;
const NETLINK_EXT_ACK = 11;

type NativeSocket = NetlinkSocket;

interface NativeErr {
  errno?: number;
  code?: string;
}

const toFailure = (e: NativeErr): SocketFailure => {
  const errno = Math.abs(e.errno ?? 0);
  return { errno, code: e.code ?? errnoName(errno) };
};

const isPermissionError = (e: unknown): boolean => {
  const code = (e as NativeErr).code;
  return code === 'EPERM' || code === 'EACCES';
};

/** Sets a buffer size, forced past the sysctl cap when asked and allowed. */
function setBuffer(sock: NativeSocket, plain: number, forced: number, bytes: number, force: boolean): void {
  if (force) {
    try {
      sock.setsockopt(SOL_SOCKET, forced, bytes);
      return;
    } catch (e) {
      if (!isPermissionError(e)) throw e;
    }
  }
  sock.setsockopt(SOL_SOCKET, plain, bytes);
}

function configure(sock: NativeSocket, opts: SocketOptions): void {
  const force = opts.forceBuffers ?? false;
  setBuffer(sock, SO_RCVBUF, SO_RCVBUFFORCE, opts.recvBufferBytes ?? DEFAULT_RCVBUF, force);
  setBuffer(sock, SO_SNDBUF, SO_SNDBUFFORCE, opts.sendBufferBytes ?? DEFAULT_SNDBUF, force);
  if (opts.extAck ?? true) sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1);
  if (opts.capAck) sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1);
  for (const g of opts.groups ?? []) sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, g);
}

/** A netlink socket of the given protocol in the calling thread's network namespace. */
export function openRawSocket(protocol: number, opts: SocketOptions = {}): RawSocket {
  const sock = new NetlinkSocket(protocol);
  try {
    configure(sock, opts);
  } catch (e) {
    sock.close();
    throw e;
  }
  // A netlink socket must not keep the process alive on its own: owners close it.
  sock.unref();
  const recvBytes = opts.recvMessageBytes ?? 0;
  // Only our own setsockopt changes it; read once so that it stays known after close().
  const sendBuffer = sock.getsockopt(SOL_SOCKET, SO_SNDBUF);
  return {
    localPort: sock.port,
    send(chunks) {
      try {
        sock.send(chunks as Uint8Array[]);
        return Promise.resolve();
      } catch (e) {
        const f = toFailure(e as NativeErr);
        return Promise.reject(Object.assign(new Error(`netlink send: ${f.code}`), f));
      }
    },
    listen(onDatagram, onError) {
      sock.listen(onDatagram, (err) => onError(toFailure(err)), recvBytes);
    },
    maxSendBytes() {
      return sendBuffer - 32;
    },
    bufferSizes() {
      return { send: sendBuffer, recv: sock.getsockopt(SOL_SOCKET, SO_RCVBUF) };
    },
    joinGroup(group) {
      sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group);
    },
    close() {
      sock.close();
    },
  };
}
