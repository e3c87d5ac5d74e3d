// The userspace mode's data path as the proxier sees it: one socket per service port (a TCP
// listener or a UDP socket) that balances over the port's endpoints. The proxier decides
// which endpoints (the model's selection) and writes the KUBE-PORTALS rules that send the
// Service's traffic to the socket's port; this layer owns sockets and connections only.

import type { Clock } from '../../../base/clock.ts';
import type { DescriptorBudget } from '../../../base/descriptor-budget.ts';
import type { IPFamily } from '../../../base/ip.ts';
import type { Logger } from '../../../base/logger.ts';
import type { PortCounters } from './counters.ts';

export interface ProxyBackend {
  readonly ip: string;
  readonly port: number;
}

/** One service port's socket and what it balances over. */
export interface ProxyPortSpec {
  /** The service port's id (ServicePortId): the key across apply() calls. */
  readonly id: string;
  /** "namespace/name:port", for logs and metric labels. */
  readonly name: string;
  readonly protocol: 'TCP' | 'UDP';
  /** Endpoints in rotation order (ready ones, or terminating ones when none is ready); empty: refuse. */
  readonly backends: readonly ProxyBackend[];
  /** ClientIP session affinity timeout in seconds; 0: no affinity. */
  readonly affinitySeconds: number;
  /**
   * Bind exactly this port (a localhost NodePort), not one from --proxy-port-range or the
   * kernel's choice; a port taken by another process is this spec's error in apply().
   */
  readonly listenPort?: number;
}

/** --proxy-port-range: the ports proxy sockets may bind, inclusive. */
export interface PortRange {
  readonly first: number;
  readonly last: number;
}

export interface ProxyPortsOptions {
  readonly family: IPFamily;
  /** The address sockets bind: '0.0.0.0' / '::' (any), or --bind-address when it is a specific one. */
  readonly listenIP: string;
  /** Absent: the kernel picks each port. */
  readonly portRange?: PortRange;
  /** --udp-timeout: a UDP client association idle this long is closed (upstream default 250 ms). */
  readonly udpIdleTimeoutMs: number;
  readonly logger: Logger;
  readonly clock?: Clock;
  /**
   * A TCP connection with no byte either way for this long is reset on both sides. Default
   * DEFAULT_TCP_IDLE_TIMEOUT_MS (24 h: upstream had none; keep-alive already finds dead peers,
   * this bounds connections whose peers are alive but forgot them); 0: never.
   */
  readonly tcpIdleTimeoutMs?: number;
  /** UDP associations per service port at most (default 4096: each holds a descriptor). */
  readonly udpMaxAssociations?: number;
  /**
   * The daemon's descriptor budget, shared by every family's ports: past it a new TCP connection
   * is reset at once and a new UDP client's datagram dropped, both counted (overBudget). Default:
   * none.
   */
  readonly budget?: DescriptorBudget;
}

export interface ApplyResult {
  /** The port each spec's socket listens on (stable across apply() calls while the id stays). */
  readonly ports: ReadonlyMap<string, number>;
  /** Specs whose socket could not be opened (no free port in the range, EMFILE, ...): skipped. */
  readonly errors: ReadonlyMap<string, Error>;
}

/** Counters since start, per service port name and in total. */
export interface ProxyStats {
  readonly activeConnections: number;
  readonly activeUdpAssociations: number;
  /** Bytes waiting in the daemon's TCP write buffers over all live connections (backpressure bounds it). */
  readonly bufferedBytes?: number;
  readonly perPort: ReadonlyMap<string, PortTotals>;
  /**
   * The counters of retired ports whose names no longer fit in perPort (it keeps the most
   * recently retired names only): summed here so that totals over all ports never go backwards.
   */
  readonly retiredOther: PortTotals;
}

/** One service port's counters since start. */
export type PortTotals = Readonly<PortCounters>;

/**
 * The sockets of one IP family. apply() is the only mutator: it opens sockets for new ids,
 * swaps the backends of existing ones in place (established connections are untouched) and
 * closes the listeners of ids no longer present (their connections finish on their own).
 */
export interface ProxyPorts {
  apply(specs: readonly ProxyPortSpec[]): Promise<ApplyResult>;
  stats(): ProxyStats;
  /** Closes every listener and connection (daemon exit). */
  close(): Promise<void>;
}
