// What every mode's proxier offers the daemon. A proxier owns only kernel objects that carry
// its name, is idempotent (the same desired state twice changes nothing), and reports what
// a sync cost so the daemon can fill metrics and logs.

import { errorMessage } from '../base/errors.ts';
import type { ChangeSet, DesiredState, LoadBalancingSupport, ServicePortId, ServicePortInfo } from '../model/index.ts';

/**
 * The proxy modes, the one list (config parses --proxy-mode against it; daemon/modes/ holds one
 * definition per name). In the order `--help` lists them.
 */
export const PROXY_MODES = ['nftables', 'ipvs', 'iptables', 'userspace'] as const;
export type ProxyMode = (typeof PROXY_MODES)[number];

/** Which per-Service load-balancing values each mode honours (docs/load-balancing.md has the table). */
export const LOAD_BALANCING_SUPPORT: Readonly<Record<ProxyMode, LoadBalancingSupport>> = {
  nftables: { mode: 'nftables', values: ['random', 'round-robin', 'consistent-hash'] },
  iptables: { mode: 'iptables', values: ['random', 'round-robin'] },
  ipvs: { mode: 'ipvs', values: ['round-robin', 'consistent-hash', 'least-connection'] },
  userspace: { mode: 'userspace', values: ['round-robin'] },
};

/**
 * Writes kernel settings under /proc/sys, which have no netlink interface: the daemon passes one
 * (daemon/sysctl.ts), so proxiers never touch /proc themselves.
 */
export interface SysctlWriter {
  /** Writes `value` to /proc/sys/<path> ("net/ipv4/vs/conntrack"); rejects naming the path on failure. */
  set(path: string, value: number): Promise<void>;
}

/**
 * Told when a Service asks for a load balancing (model/load-balancing.ts) the mode cannot
 * honour or that is unknown; may be called on every sync (the daemon says it once per Service).
 */
export type LoadBalancingNotice = (
  service: { readonly namespace: string; readonly name: string },
  asked: string,
  reason: string,
) => void;

export interface SyncReport {
  /** The sync rebuilt or re-read everything (first sync, periodic, after a failure). */
  full: boolean;
  /** Service ports whose rules this sync wrote. */
  servicesChanged: number;
  /** Time spent in kernel calls (netlink round trips), milliseconds. */
  kernelMs: number;
  /** Time spent planning (pure code), milliseconds. */
  planMs: number;
  /** Problems that did not fail the sync (a Service skipped, a retryable cleanup). */
  errors: SyncProblem[];
  /** Kernel transactions (batches) the sync was cut into. */
  batches?: number;
  /** The longest single kernel commit, milliseconds: what holds the kernel's lock longest. */
  longestBatchMs?: number;
  /** The separate clean-up of stale objects failed (nftables: upstream's cleanup-failure counter). */
  cleanupFailed?: boolean;
  /** Service ports the kernel refused in this sync (each is in `errors`), skipped until they change. */
  refused?: number;
  /** IPVS mode: writing its companion iptables rules failed (upstream's iptables restore failure counter). */
  companionFailed?: boolean;
  /** iptables mode: its rules after the sync and those it wrote (upstream's iptables rule gauges). */
  iptables?: IptablesSyncCounts;
}

/** A problem that did not fail a sync: what was skipped or left, and the error behind it. */
export interface SyncProblem {
  /**
   * What happened and what follows, without the error's text: "stale chains not removed
   * (retried at the next full sync)".
   */
  readonly what: string;
  /** The error behind it, when there is one (a NetlinkError keeps its op, errno and detail). */
  readonly cause?: unknown;
}

/** A problem as one line for logs and messages: "what: the cause's message". */
export const problemText = (p: SyncProblem): string =>
  p.cause === undefined ? p.what : `${p.what}: ${errorMessage(p.cause)}`;

/** Rules per table ("nat", "filter"), as upstream's kubeproxy_sync_proxy_rules_iptables_* gauges count them. */
export interface IptablesSyncCounts {
  /** Rules in our chains after the sync. */
  readonly total: Readonly<Record<string, number>>;
  /** Rules this sync wrote to the kernel (added or re-added). */
  readonly written: Readonly<Record<string, number>>;
}

/**
 * A failed sync, with what the metrics need to know of it (upstream's iptables restore and
 * partial-restore failure counters). `cause` is the original error.
 */
export class SyncFailedError extends Error {
  /** The sync was a partial one (only the changed service ports). */
  readonly partial: boolean;
  /** The kernel refused a transaction of the sync (upstream: iptables-restore failed). */
  readonly commitFailed: boolean;

  constructor(cause: unknown, partial: boolean, commitFailed: boolean) {
    super(errorMessage(cause), { cause });
    this.name = 'SyncFailedError';
    this.partial = partial;
    this.commitFailed = commitFailed;
  }
}

/**
 * Changes that arrive while a long sync runs (a full one at tens of thousands of Services
 * takes seconds): a proxier that can takes them between its batches and applies them at once,
 * instead of leaving them to wait for the sync's end. `take()` checks the tracker out (the
 * same `desired` object the sync was given moves on with it); undefined when nothing waits or
 * what waits needs a full sync of its own (a Node change).
 */
export interface ArrivingChanges {
  /** Whether take() would give changes now (cheap; asked between batches). */
  waiting(): boolean;
  take(): ChangeSet | undefined;
  /** The changes `take()` gave are in the kernel (network-programming latency is observed now). */
  applied(change: ChangeSet): void;
}

export interface Proxier {
  readonly mode: ProxyMode;
  /**
   * Brings the kernel to `desired`. `change` says what moved since the last successful
   * sync; with change.full (or after a failed sync) the proxier re-reads the kernel.
   * Throws on failure; the daemon retries with a full sync. `arriving`: see ArrivingChanges
   * (the nftables proxier takes them during full syncs; the others ignore them).
   */
  sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal, arriving?: ArrivingChanges): Promise<SyncReport>;
  /** Removes every kernel object this mode created, and nothing else. Safe to run twice. */
  cleanup(): Promise<void>;
  /**
   * For `kube-proxy-ts explain`: what the kernel holds for one service port, read back now
   * (never from the proxier's mirror), beside what the last successful sync wrote for it.
   */
  describe?(info: ServicePortInfo, opts?: DescribeOptions): Promise<PortDescription>;
  /** Per-service-port traffic counters, read from the kernel at scrape time (opt-in metrics). */
  trafficCounters?(signal?: AbortSignal): Promise<readonly TrafficSample[]>;
}

export interface DescribeOptions {
  signal?: AbortSignal;
  /**
   * Shared by the describe calls of one query (explain of every Service): a proxier may keep
   * what it read from the kernel there, so that a query reads each table once, not per port.
   */
  session?: Map<string, unknown>;
}

/** One kernel object (or part of one) that a service port owns. */
export interface ProgrammedEntry {
  /** Where it lives: a set or map name, "chain", "ipvs". */
  readonly where: string;
  /** What names it there: the element key as nft prints it, a chain name, "TCP 10.96.0.10:80". */
  readonly key: string;
  /** Its data: a verdict, an endpoint, a real server's settings; '' when none. */
  readonly value: string;
}

export interface PortDescription {
  readonly mode: ProxyMode;
  /** Read back from the kernel by this call. */
  readonly kernel: readonly ProgrammedEntry[];
  /** What the last successful sync wrote for the port (empty: never programmed). */
  readonly expected: readonly ProgrammedEntry[];
}

export interface TrafficSample {
  readonly id: ServicePortId;
  /** cluster-ip, external, node-port (IPVS: the virtual server's kind). */
  readonly frontend: string;
  /** Client-to-Service packets and bytes, where the mode counts them (IPVS, nftables; not iptables). */
  readonly packets?: number;
  readonly bytes?: number;
  /** New connections, where the mode counts them (all but the IPVS kinds without stats). */
  readonly connections?: number;
}
