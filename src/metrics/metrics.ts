// The Prometheus metrics, on a registry of our own (never prom-client's global one).
// Upstream's names, help texts, label names and buckets where the meaning is the same
// (pkg/proxy/metrics/metrics.go, with the ip_family labels upstream added in 1.33), so
// existing dashboards and alerts keep working; our own carry the kubeproxyts_ prefix.

import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  exponentialBuckets,
  linearBuckets,
} from 'prom-client';
import type { SlotCensus } from '../health/connection-slots.ts';
import { registerHttpSlotMetrics } from './http-slots.ts';

/** Upstream: ExponentialBuckets(0.001, 2, 15): 1 ms .. ~16 s. */
export const SYNC_DURATION_BUCKETS: readonly number[] = exponentialBuckets(0.001, 2, 15);

/** Upstream's merge(): a leading 0, then 0.25 s, 0.5 s, 1..59 s, 60..115 s by 5, 120..300 s by 30. */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

export interface ProxyMetrics {
  readonly registry: Registry;

  // --- upstream kubeproxy_* ---------------------------------------------------------
  syncProxyRulesDuration: Histogram<'ip_family'>;
  syncFullProxyRulesDuration: Histogram<'ip_family'>;
  syncPartialProxyRulesDuration: Histogram<'ip_family'>;
  syncProxyRulesLastTimestamp: Gauge<'ip_family'>;
  syncProxyRulesLastQueuedTimestamp: Gauge<'ip_family'>;
  networkProgrammingDuration: Histogram<'ip_family'>;
  endpointChangesPending: Gauge;
  endpointChangesTotal: Counter;
  serviceChangesPending: Gauge;
  serviceChangesTotal: Counter;
  proxyHealthzTotal: Counter<'code'>;
  proxyLivezTotal: Counter<'code'>;
  noLocalEndpointsTotal: Gauge<'ip_family' | 'traffic_policy'>;
  nftablesSyncFailuresTotal: Counter<'ip_family'>;
  nftablesCleanupFailuresTotal: Counter<'ip_family'>;
  conntrackReconcilerSyncDuration: Histogram<'ip_family'>;
  conntrackReconcilerDeletedEntriesTotal: Counter<'ip_family'>;

  // iptables mode (registered only in that mode, as upstream's RegisterMetrics(mode); the
  // restore failures in IPVS mode too): fed by the iptables proxier after each sync.
  iptablesRulesTotal: Gauge<'ip_family' | 'table'>;
  iptablesRulesLast: Gauge<'ip_family' | 'table'>;
  iptablesRestoreFailuresTotal: Counter<'ip_family'>;
  iptablesPartialRestoreFailuresTotal: Counter<'ip_family'>;
  // kubeproxy_iptables_{ct_state_invalid_dropped,localhost_nodeports_accepted}_packets_total read
  // the kernel's nfacct objects at scrape time (nfacct.ts), registered once those exist.

  // --- component-base: the build and our API client (client-go's rest_client_*) ----------
  kubernetesBuildInfo: Gauge<
    | 'major'
    | 'minor'
    | 'git_version'
    | 'git_commit'
    | 'git_tree_state'
    | 'build_date'
    | 'go_version'
    | 'compiler'
    | 'platform'
  >;
  restClientRequestsTotal: Counter<'code' | 'method' | 'host'>;
  restClientRequestDuration: Histogram<'verb' | 'host'>;
  restClientRateLimiterDuration: Histogram<'verb' | 'host'>;

  // --- ours: kubeproxyts_* -----------------------------------------------------------
  /** Netlink requests that failed, by subsystem (nftables, ipvs, ipset, conntrack, route) and operation. */
  netlinkErrorsTotal: Counter<'subsystem' | 'op'>;
  /** Kubernetes objects skipped as invalid, by kind and reason. */
  objectsRejectedTotal: Counter<'kind' | 'reason'>;
  /** Conntrack entries deleted, by family and protocol. */
  conntrackEntriesDeletedTotal: Counter<'ip_family' | 'protocol'>;
  /** Failed syncs of the selected mode. */
  syncFailuresTotal: Counter<'mode'>;
  /**
   * Service ports the kernel refused (found by narrowing a refused batch down), skipped while the rest is programmed.
   */
  servicePortsRefusedTotal: Counter<'ip_family'>;
  /** 1, labelled with version and mode. */
  buildInfo: Gauge<'version' | 'mode' | 'node_version'>;
}

/** client-go's: 5 ms .. 60 s. */
export const REST_CLIENT_BUCKETS: readonly number[] = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/**
 * The metrics only some modes register, as upstream's RegisterMetrics(mode) does (each mode's
 * definition names its groups): 'nftables-sync' the nftables failures, 'iptables-sync' the
 * iptables-mode metrics, 'iptables-restore' only their restore failures (IPVS mode's companion rules).
 * Unregistered metrics still count but are not exported.
 */
export type MetricGroup = 'nftables-sync' | 'iptables-sync' | 'iptables-restore';

/** The iptables-mode metrics (groups 'iptables-sync' and 'iptables-restore'). */
function modeMetrics(registry: Registry, groups: readonly MetricGroup[]) {
  const iptables = groups.includes('iptables-sync') ? [registry] : [];
  const restore = iptables.length > 0 || groups.includes('iptables-restore') ? [registry] : [];
  const opts = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
    registers: Registry[] = iptables,
  ) => ({
    name,
    help,
    labelNames,
    registers,
  });
  return {
    iptablesRulesTotal: new Gauge(
      opts('kubeproxy_sync_proxy_rules_iptables_total', 'Total number of iptables rules owned by kube-proxy', [
        'ip_family',
        'table',
      ] as const),
    ),
    iptablesRulesLast: new Gauge(
      opts('kubeproxy_sync_proxy_rules_iptables_last', 'Number of iptables rules written by kube-proxy in last sync', [
        'ip_family',
        'table',
      ] as const),
    ),
    iptablesRestoreFailuresTotal: new Counter(
      opts(
        'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
        'Cumulative proxy iptables restore failures',
        ['ip_family'] as const,
        restore,
      ),
    ),
    iptablesPartialRestoreFailuresTotal: new Counter(
      opts(
        'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total',
        'Cumulative proxy iptables partial restore failures',
        ['ip_family'] as const,
      ),
    ),
  };
}

/** kubernetes_build_info's labels for our version ("v1.2.3" -> major 1, minor 2); Node.js in place of Go. */
export function kubernetesBuildLabels(version: string): Record<string, string> {
  const m = /^v?(\d+)\.(\d+)/.exec(version);
  return {
    major: m?.[1] ?? '',
    minor: m?.[2] ?? '',
    git_version: version,
    git_commit: '',
    git_tree_state: '',
    build_date: '',
    go_version: process.version,
    compiler: 'node',
    platform: `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`,
  };
}

export interface MetricsOptions {
  /** A registry to fill; default a new one. */
  registry?: Registry;
  /** Also export process/Node.js metrics (process_*, nodejs_*). Default true. */
  processMetrics?: boolean;
  version?: string;
  /** The build_info label. */
  mode?: string;
  /** The running mode's own metrics (its definition's groups); none by default. */
  groups?: readonly MetricGroup[];
  /** The HTTP servers' connection counts; default the process's (health/connection-slots.ts). */
  httpSlots?: () => readonly SlotCensus[];
}

/** Metric constructors bound to the registries the metrics go to. */
interface Makers {
  hist<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    buckets: readonly number[],
  ): Histogram<L>;
  gauge<L extends string>(name: string, help: string, labelNames?: readonly L[]): Gauge<L>;
  counter<L extends string>(name: string, help: string, labelNames?: readonly L[]): Counter<L>;
}

function makers(registers: Registry[]): Makers {
  return {
    hist: (name, help, labelNames, buckets) =>
      new Histogram({ name, help, labelNames, buckets: [...buckets], registers }),
    gauge: (name, help, labelNames = []) => new Gauge({ name, help, labelNames, registers }),
    counter: (name, help, labelNames = []) => new Counter({ name, help, labelNames, registers }),
  };
}

/** Upstream's sync latencies and timestamps, network programming latency, and pending changes. */
function syncMetrics({ hist, gauge, counter }: Makers) {
  return {
    syncProxyRulesDuration: hist(
      'kubeproxy_sync_proxy_rules_duration_seconds',
      'SyncProxyRules latency in seconds',
      ['ip_family'],
      SYNC_DURATION_BUCKETS,
    ),
    syncFullProxyRulesDuration: hist(
      'kubeproxy_sync_full_proxy_rules_duration_seconds',
      'SyncProxyRules latency in seconds for full resyncs',
      ['ip_family'],
      SYNC_DURATION_BUCKETS,
    ),
    syncPartialProxyRulesDuration: hist(
      'kubeproxy_sync_partial_proxy_rules_duration_seconds',
      'SyncProxyRules latency in seconds for partial resyncs',
      ['ip_family'],
      SYNC_DURATION_BUCKETS,
    ),
    syncProxyRulesLastTimestamp: gauge(
      'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
      'The last time proxy rules were successfully synced',
      ['ip_family'],
    ),
    syncProxyRulesLastQueuedTimestamp: gauge(
      'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
      'The last time a sync of proxy rules was queued',
      ['ip_family'],
    ),
    networkProgrammingDuration: hist(
      'kubeproxy_network_programming_duration_seconds',
      'In Cluster Network Programming Latency in seconds',
      ['ip_family'],
      NETWORK_PROGRAMMING_BUCKETS,
    ),
    endpointChangesPending: gauge(
      'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
      'Pending proxy rules Endpoint changes',
    ),
    endpointChangesTotal: counter(
      'kubeproxy_sync_proxy_rules_endpoint_changes_total',
      'Cumulative proxy rules Endpoint changes',
    ),
    serviceChangesPending: gauge(
      'kubeproxy_sync_proxy_rules_service_changes_pending',
      'Pending proxy rules Service changes',
    ),
    serviceChangesTotal: counter(
      'kubeproxy_sync_proxy_rules_service_changes_total',
      'Cumulative proxy rules Service changes',
    ),
  };
}

/** Upstream's healthz and livez answers. */
function healthMetrics({ counter }: Makers) {
  return {
    proxyHealthzTotal: counter('kubeproxy_proxy_healthz_total', 'Cumulative proxy healthz HTTP status', ['code']),
    proxyLivezTotal: counter('kubeproxy_proxy_livez_total', 'Cumulative proxy livez HTTP status', ['code']),
  };
}

/** Upstream's per-sync rule figure: Local-policy Services without endpoints. */
function ruleMetrics({ gauge }: Makers) {
  return {
    noLocalEndpointsTotal: gauge(
      'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
      'Number of services with a Local traffic policy and no endpoints',
      ['ip_family', 'traffic_policy'],
    ),
  };
}

/**
 * The nftables failures. Upstream's RegisterMetrics(mode) registers them in nftables mode only;
 * given makers without a registry (other modes), they count but are not exported.
 */
function nftablesMetrics({ counter }: Makers) {
  return {
    nftablesSyncFailuresTotal: counter(
      'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
      'Cumulative proxy nftables sync failures',
      ['ip_family'],
    ),
    nftablesCleanupFailuresTotal: counter(
      'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
      'Cumulative proxy nftables cleanup failures',
      ['ip_family'],
    ),
  };
}

/** Upstream's conntrack reconciler. */
function conntrackMetrics({ hist, counter }: Makers) {
  return {
    conntrackReconcilerSyncDuration: hist(
      'kubeproxy_conntrack_reconciler_sync_duration_seconds',
      'ReconcileConntrackFlowsLatency latency in seconds',
      ['ip_family'],
      SYNC_DURATION_BUCKETS,
    ),
    conntrackReconcilerDeletedEntriesTotal: counter(
      'kubeproxy_conntrack_reconciler_deleted_entries_total',
      'Cumulative conntrack flows deleted by conntrack reconciler',
      ['ip_family'],
    ),
  };
}

/** component-base: the build, and our API client (client-go's rest_client_*). */
function clientMetrics({ hist, gauge, counter }: Makers) {
  return {
    kubernetesBuildInfo: gauge(
      'kubernetes_build_info',
      "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
      [
        'major',
        'minor',
        'git_version',
        'git_commit',
        'git_tree_state',
        'build_date',
        'go_version',
        'compiler',
        'platform',
      ],
    ),
    restClientRequestsTotal: counter(
      'rest_client_requests_total',
      'Number of HTTP requests, partitioned by status code, method, and host.',
      ['code', 'method', 'host'],
    ),
    restClientRequestDuration: hist(
      'rest_client_request_duration_seconds',
      'Request latency in seconds. Broken down by verb, and host.',
      ['verb', 'host'],
      REST_CLIENT_BUCKETS,
    ),
    restClientRateLimiterDuration: hist(
      'rest_client_rate_limiter_duration_seconds',
      'Client side rate limiter latency in seconds. Broken down by verb, and host.',
      ['verb', 'host'],
      REST_CLIENT_BUCKETS,
    ),
  };
}

/** Ours: kubeproxyts_*. */
function ownMetrics({ gauge, counter }: Makers) {
  return {
    netlinkErrorsTotal: counter(
      'kubeproxyts_netlink_errors_total',
      'Netlink requests that failed, by subsystem and operation',
      ['subsystem', 'op'],
    ),
    objectsRejectedTotal: counter(
      'kubeproxyts_objects_rejected_total',
      'Kubernetes objects skipped as invalid, by kind and reason',
      ['kind', 'reason'],
    ),
    conntrackEntriesDeletedTotal: counter(
      'kubeproxyts_conntrack_entries_deleted_total',
      'Conntrack entries deleted (stale UDP flows), by IP family and protocol',
      ['ip_family', 'protocol'],
    ),
    syncFailuresTotal: counter('kubeproxyts_sync_failures_total', 'Failed proxy rule syncs, by mode', ['mode']),
    servicePortsRefusedTotal: counter(
      'kubeproxyts_service_ports_refused_total',
      'Service ports the kernel refused, skipped while everything else was programmed',
      ['ip_family'],
    ),
    buildInfo: gauge(
      'kubeproxyts_build_info',
      'A metric with a constant 1 value labelled with the version, proxy mode and Node.js version',
      ['version', 'mode', 'node_version'],
    ),
  };
}

export function createMetrics(opts: MetricsOptions = {}): ProxyMetrics {
  const registry = opts.registry ?? new Registry();
  const registers = [registry];
  const mk = makers(registers);
  const groups = opts.groups ?? [];
  // Registered in this order, which is the order of the exposition.
  const m: ProxyMetrics = {
    registry,
    ...syncMetrics(mk),
    ...healthMetrics(mk),
    ...ruleMetrics(mk),
    ...nftablesMetrics(makers(groups.includes('nftables-sync') ? registers : [])),
    ...conntrackMetrics(mk),
    ...modeMetrics(registry, groups),
    ...clientMetrics(mk),
    ...ownMetrics(mk),
  };
  registerHttpSlotMetrics(registry, opts.httpSlots);
  m.kubernetesBuildInfo.set(kubernetesBuildLabels(opts.version ?? 'v0.0.0-unknown'), 1);
  m.buildInfo.set(
    { version: opts.version ?? 'unknown', mode: opts.mode ?? 'unknown', node_version: process.version },
    1,
  );
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry });
  return m;
}

/** Seconds since the epoch, as upstream's timestamp gauges hold. */
export const epochSeconds = (ms: number): number => ms / 1000;
