// The ipset objects the client speaks in: plain data, no I/O.

/** The set types kube-proxy's IPVS mode uses. */
export type IpsetType =
  'hash:ip' | 'hash:ip,port' | 'hash:ip,port,ip' | 'hash:ip,port,net' | 'hash:net' | 'bitmap:port';
export const IPSET_TYPES: readonly IpsetType[] = [
  'hash:ip',
  'hash:ip,port',
  'hash:ip,port,ip',
  'hash:ip,port,net',
  'hash:net',
  'bitmap:port',
];

export type IpsetFamily = 'inet' | 'inet6';

export interface IpsetCreateOptions {
  /** inet (the default) or inet6; ignored for bitmap:port, which has no address family. */
  family?: IpsetFamily;
  /** Initial hash size (hash types). */
  hashSize?: number;
  /** Largest number of entries (hash types). */
  maxElem?: number;
  /** Entries may carry a comment (kube-proxy's sets all do). */
  comment?: boolean;
  /** Default entry timeout in seconds: the set then supports timeouts. */
  timeout?: number;
  /** bitmap:port range; default 0-65535. */
  portRange?: { from: number; to: number };
  /** Type revision; default: the highest the kernel supports (asked with IPSET_CMD_TYPE). */
  revision?: number;
}

export type IpsetProto = 'tcp' | 'udp' | 'sctp' | 'icmp' | 'icmpv6' | number;

/**
 * One member. Which fields apply depends on the set type:
 *   hash:ip          ip
 *   hash:ip,port     ip, proto, port
 *   hash:ip,port,ip  ip, proto, port, ip2
 *   hash:ip,port,net ip, proto, port, ip2, cidr2
 *   hash:net         ip, cidr
 *   bitmap:port      port
 */
export interface IpsetEntry {
  ip?: string;
  cidr?: number;
  proto?: IpsetProto;
  port?: number;
  ip2?: string;
  cidr2?: number;
  comment?: string;
  /** Seconds; only in sets created with a timeout. */
  timeout?: number;
}

/** A set as the kernel lists it. */
export interface IpsetHeader {
  name: string;
  type: string;
  family: IpsetFamily | 'unspec';
  revision: number;
  /** The kernel index (what xt_set rules refer to); absent with protocol 6. */
  index?: number;
  hashSize?: number;
  maxElem?: number;
  timeout?: number;
  comment: boolean;
  portRange?: { from: number; to: number };
  references?: number;
  memSize?: number;
  elements?: number;
  bucketSize?: number;
}

export interface IpsetInfo extends IpsetHeader {
  entries: IpsetEntry[];
}
