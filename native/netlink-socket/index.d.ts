// The interface of src/netlink_socket.c. Methods throw Errors carrying errno (positive), code
// ("ENOBUFS") and syscall.

export interface NetlinkSocketError extends Error {
  errno: number;
  code: string;
  syscall: string;
}

export declare class NetlinkSocket {
  /** socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol), bound to a kernel-assigned port. */
  constructor(protocol: number);
  /** The port id the kernel assigned (nl_pid). */
  readonly port: number;
  /** Whether close() ran. */
  readonly closed: boolean;
  /** One datagram to the kernel (port 0) made of the chunks in order (at most 1024); returns its length. */
  send(chunks: Uint8Array[]): number;
  /**
   * Starts reading: each datagram whole (fixedBytes 0: peeked size) to onMessage; errors
   * (ENOBUFS after the queue is drained, a datagram truncated by fixedBytes) to onError.
   */
  listen(onMessage: (buf: Buffer) => void, onError: (err: NetlinkSocketError) => void, fixedBytes: number): void;
  setsockopt(level: number, name: number, value: number): void;
  getsockopt(level: number, name: number): number;
  ref(): void;
  unref(): void;
  /** Idempotent; safe inside onMessage/onError. */
  close(): void;
}

/** RLIMIT_NOFILE of <sys/resource.h>. */
export declare const RLIMIT_NOFILE: number;
/** getrlimit(2); an unlimited value is Infinity. Throws a NetlinkSocketError-shaped Error. */
export declare function getrlimit(resource: number): { soft: number; hard: number };
/** setrlimit(2); Infinity: unlimited. Raising the hard limit needs CAP_SYS_RESOURCE. */
export declare function setrlimit(resource: number, soft: number, hard: number): void;
/**
 * malloc_trim(0) (glibc): gives the free memory of malloc's arenas back to the kernel. True when
 * some was; false when none was or the C library is not glibc. Blocks for as long as walking
 * the arenas takes (a few ms for 100 MiB).
 */
export declare function mallocTrim(): boolean;
