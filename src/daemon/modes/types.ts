// A proxy mode, defined in one place: how it is built, what it keeps of other proxies' state at
// start, what --cleanup removes of it, which metrics it registers and what its sync reports
// feed them, and how `trace` judges its packets. The daemon asks the definition; it never asks
// which mode runs (index.ts holds one definition per name of proxier/types.ts PROXY_MODES).

import type { Clock } from '../../base/clock.ts';
import type { DescriptorBudget } from '../../base/descriptor-budget.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import type { ProxyConfig } from '../../config/index.ts';
import type { TraceTraits } from '../../explain/modes.ts';
import type { LeftoverPolicy } from '../../leftovers/policy.ts';
import type { CleanupStep } from '../../leftovers/steps.ts';
import type { MetricGroup, NfacctReader, ProxyMetrics, UserspaceSample } from '../../metrics/index.ts';
import type { NetlinkConnection, SocketOptions } from '../../netlink/core/index.ts';
import type { Proxier, ProxyMode, SyncReport, SysctlWriter } from '../../proxier/types.ts';
import type { LocalhostNodePortMetricsSample, LocalhostRejectedSample } from '../../metrics/localhost-nodeports.ts';

/** nftables mode's localhost node-port listeners, for the metrics. */
export interface LocalhostNodePortMetrics {
  samples(): LocalhostNodePortMetricsSample[];
  rejected(): Promise<LocalhostRejectedSample[]>;
}

export interface ProxierSet {
  readonly mode: ProxyMode;
  readonly proxiers: ReadonlyMap<IPFamily, Proxier>;
  /** Start-up checks (IPVS: kernel support, sysctls); rejects with what is missing. */
  init(signal?: AbortSignal): Promise<void>;
  /** Closes the netlink sockets. */
  close(): void;
  /**
   * Calls `onDrift` when someone else changes our kernel objects (nftables: our tables; iptables: our
   * chains; IPVS: the companion chains and kube-ipvs0; proxier/drift/).
   */
  watchDrift?(onDrift: (why: string) => void, syncing: () => boolean): { close(): void };
  /**
   * Every periodic sync is a full one that reads the kernel back (IPVS: virtual servers and ipsets
   * are never announced). Other modes hear drift and sync fully at most hourly (sync-loop.ts).
   */
  readonly periodicFull?: boolean;
  /** Modes that notice kernel drift between syncs (iptables: the canary chains) call `kick` to ask for a sync. */
  watch?(kick: () => void): void;
  /** userspace mode: the proxy sockets' counters per family, for the metrics. */
  proxyStats?(): readonly UserspaceSample[];
  /** nftables mode with KubeProxyNFTablesLocalhostNodePorts: the listeners' figures per family, for the metrics. */
  localhostNodePorts?: LocalhostNodePortMetrics;
  /** close(), awaited (userspace mode: the proxy sockets' listeners and connections end too). */
  shutdown?(): Promise<void>;
}

/** A mode's start, split where the daemon removes other proxies' leftovers. */
export interface ModeSet extends Omit<ProxierSet, 'init'> {
  /** Checks before anything is removed (IPVS: the kernel has it; iptables: no legacy rules). */
  preflight?(signal?: AbortSignal): Promise<void>;
  /** After the leftovers are gone: the mode's own start (IPVS: sysctls; iptables: nfacct objects). */
  init?(signal?: AbortSignal): Promise<void>;
}

export interface ProxierDeps {
  logger: Logger;
  clock: Clock;
  sysctl: SysctlWriter;
  /** Per-exchange netlink time-out. Default 30 s. */
  timeoutMs?: number;
  /** The userspace proxy's share of RLIMIT_NOFILE (nofile.ts); unset: none (tests). */
  descriptorBudget?: DescriptorBudget;
  /** iptables mode: told once init() has made the nfacct objects (the metrics read them). */
  onNfacct?: (reader: NfacctReader) => void;
  /**
   * iptables mode: the full-sync period (KUBE_PROXY_TS_FULL_SYNC_PERIOD), after which a full
   * sync rewrites every chain instead of trusting the last; default an hour.
   */
  fullSyncPeriodMs?: number;
}

/** Netlink sockets the set owns (closed with it). */
export interface Sockets {
  open: (protocol: number, opts?: SocketOptions) => NetlinkConnection;
  openWithPort: (protocol: number, opts?: SocketOptions) => { conn: NetlinkConnection; port: number };
  /** Closes every socket opened so far. */
  close: () => void;
}

/** What a mode's syncs feed besides the common metrics (upstream: each mode's own metrics.go). */
export interface SyncMetrics {
  /** The mode's own metrics, registered as upstream's RegisterMetrics(mode) does. */
  readonly groups: readonly MetricGroup[];
  /** A sync of `family` failed. */
  failed?(metrics: ProxyMetrics, family: IPFamily, e: unknown): void;
  /** A sync of `family` committed. */
  committed?(metrics: ProxyMetrics, family: IPFamily, report: SyncReport): void;
  /** The sync loop's attempt failed (every family). */
  loopFailed?(metrics: ProxyMetrics, families: readonly IPFamily[]): void;
  /**
   * kubeproxy_sync_proxy_rules_no_local_endpoints_total counts service ports, as upstream's
   * nftables and iptables proxiers do (true), or Services, as its IPVS proxier does (false).
   */
  readonly noLocalEndpointsPerPort: boolean;
}

export interface ModeDefinition {
  readonly name: ProxyMode;
  /** The mode's proxiers, one per family, on sockets opened through `sockets`. */
  build(config: ProxyConfig, families: readonly IPFamily[], deps: ProxierDeps, sockets: Sockets): ModeSet;
  /** What the start keeps of other proxies' state (leftovers/). */
  readonly leftovers: LeftoverPolicy;
  /** What --cleanup removes of this mode, in order (kernel sockets through `open`, closed by the caller). */
  cleanupSteps(
    open: (protocol: number) => NetlinkConnection,
    deps: { logger: Logger; clock: Clock },
  ): Promise<CleanupStep[]>;
  readonly metrics: SyncMetrics;
  /** The mode proxies through sockets of this process, which get a share of RLIMIT_NOFILE (nofile.ts). */
  proxiesThroughSockets(config: ProxyConfig): boolean;
  /** Upstream's word on a deprecated mode, said at every start (deprecations.ts). */
  readonly deprecation?: { readonly reason: string; readonly message: string };
  /** How `trace` judges this mode's packets (explain/modes.ts). */
  readonly traceTraits: TraceTraits;
}
