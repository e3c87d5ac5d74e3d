// Plain structs for IPVS virtual services, real servers (destinations) and settings.
// Addresses are text ("10.96.0.1", "fd00::10"); ports and counters are numbers, byte and
// packet counters bigints (they are u64 in the kernel).

import type { IPFamily } from '../../base/ip.ts';
import type { Attr } from '../core/index.ts';

export type { IPFamily };
export type IpvsProtocol = 'tcp' | 'udp' | 'sctp';
/** Forwarding method: masq (NAT, what kube-proxy uses), local, tunnel (ipip), route (DR), bypass. */
export type IpvsForward = 'masq' | 'local' | 'tunnel' | 'route' | 'bypass';

/**
 * What names a virtual service: (family, protocol, address, port), or (family, fwmark).
 * The kernel keeps the two kinds in separate tables.
 */
export type IpvsServiceKey = IpvsAddrKey | IpvsFwmarkKey;

export interface IpvsAddrKey {
  family: IPFamily;
  protocol: IpvsProtocol;
  address: string;
  port: number;
}

export interface IpvsFwmarkKey {
  family: IPFamily;
  fwmark: number;
}

export const isFwmarkKey = (k: IpvsServiceKey): k is IpvsFwmarkKey => 'fwmark' in k && typeof k.fwmark === 'number';

export interface IpvsServiceOptions {
  /** Scheduler name: rr, wrr, lc, wlc, sh, dh, mh, sed, nq, ... (module ip_vs_<name>). */
  scheduler: string;
  /**
   * IP_VS_SVC_F_* flags (sh-fallback, sh-port, one-packet ...). IP_VS_SVC_F_PERSISTENT is
   * added by the encoder whenever `timeout` > 0, and the kernel's internal HASHED bit is
   * never reported.
   */
  flags?: number;
  /** Persistence (session affinity) timeout in seconds; 0 = not persistent. */
  timeout?: number;
  /** Persistence granularity as a prefix length (default 32 for IPv4, 128 for IPv6). */
  netmask?: number;
  /** Persistence engine name ("sip"); rarely used. */
  peName?: string;
}

/** A service to add or edit. */
export type IpvsServiceSpec = IpvsServiceKey & IpvsServiceOptions;

/** The counters the kernel keeps per service and per destination. */
export interface IpvsStats {
  conns: bigint;
  inPkts: bigint;
  outPkts: bigint;
  inBytes: bigint;
  outBytes: bigint;
  cps: bigint;
  inPps: bigint;
  outPps: bigint;
  inBps: bigint;
  outBps: bigint;
}

/** A service as the kernel reports it. `unknown` keeps the attributes this code does not know. */
export type IpvsService = IpvsServiceKey &
  Required<Omit<IpvsServiceOptions, 'peName'>> & {
    peName?: string;
    stats: IpvsStats;
    unknown: readonly Attr[];
  };

/** A real server to add or edit. */
export interface IpvsDestinationSpec {
  address: string;
  port: number;
  /** Default 'masq'. */
  forward?: IpvsForward;
  weight: number;
  /** Connection thresholds; 0 = none (the default). */
  upperThreshold?: number;
  lowerThreshold?: number;
}

/** What names a destination within its service. */
export interface IpvsDestinationKey {
  address: string;
  port: number;
}

/** A destination as the kernel reports it. */
export interface IpvsDestination {
  family: IPFamily;
  address: string;
  port: number;
  forward: IpvsForward;
  weight: number;
  upperThreshold: number;
  lowerThreshold: number;
  activeConns: number;
  inactiveConns: number;
  persistentConns: number;
  tunnelType: number;
  tunnelPort: number;
  tunnelFlags: number;
  stats: IpvsStats;
  unknown: readonly Attr[];
}

/** The connection time-outs (seconds). In a set request, 0 or absent means "leave as is". */
export interface IpvsTimeouts {
  tcp: number;
  tcpFin: number;
  udp: number;
}

export interface IpvsInfo {
  /** "1.2.1" */
  version: string;
  connTableSize: number;
}
