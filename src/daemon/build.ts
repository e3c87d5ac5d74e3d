// The real parts of a daemon, made from the configuration: the source (Kubernetes API or
// manifest directory), the proxiers of the selected mode on netlink sockets, the systemd
// notifier and the metrics registry.

import { registerLocalhostNodePortMetrics } from '../metrics/localhost-nodeports.ts';
import { existsSync } from 'node:fs';
import { cpus, hostname, networkInterfaces } from 'node:os';
import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import { parseDuration } from '../config/index.ts';
import type { ProxyConfig } from '../config/index.ts';
import { createMetrics, registerUserspaceMetrics } from '../metrics/index.ts';
import { metricsOps } from './ops.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
// Not ../sources/index.ts: that loads the Kubernetes client, which standalone mode never needs.
import { ManifestDirSource } from '../sources/manifest-dir.ts';
import type { EventSink } from '../sources/events.ts';
import type { Reject, Source } from '../sources/types.ts';
import { LoadBalancingNotices } from './load-balancing-notices.ts';
import { ConntrackFlusher } from '../conntrack/index.ts';
import { applyConntrackSettings, procConntrackIO } from './conntrack-settings.ts';
import { Daemon } from './daemon.ts';
import { badConfigWarnings, detectLocalWarning, familiesLogLine, nodeNameOf, servedFamilies } from './families.ts';
import type { HostFacts } from './families.ts';
import { applyOomScoreAdj } from './oom-score.ts';
import { proxyBudgetSize, raiseNofileLimit } from './nofile.ts';
import { DescriptorBudget } from '../base/descriptor-budget.ts';
import { buildProxiers } from './proxiers.ts';
import { MODES } from './modes/index.ts';
import { createNotifier } from './sd-notify.ts';
import { wireServiceTraffic } from './service-traffic.ts';
import { wireNfacctMetrics } from './nfacct-metrics.ts';
import { ProcSysctl } from './sysctl.ts';
import { removeTraceTables } from '../live-trace/tables.ts';
import { connect, Protocol } from '../netlink/core/index.ts';
import { errorMessage } from '../base/errors.ts';

export interface BuildDeps {
  logger: Logger;
  clock: Clock;
  version: string;
  env?: NodeJS.ProcessEnv;
  /** The --config path, shown by /flagz. */
  configFile?: string;
  /** Told after every successful sync (main.ts: the heap release). */
  onSynced?: (done: { full: boolean; ms: number }) => void;
  /** A large input was applied (main.ts: the heap release's request). */
  onLargeInputSynced?: () => void;
}

/**
 * KUBE_PROXY_TS_FULL_SYNC_PERIOD: an internal knob, not a flag (upstream has none either; its
 * FullSyncPeriod is a constant hour): the longest time between full syncs, a Go duration (in
 * iptables mode also between the full syncs that rewrite every chain rather than trust the last).
 * Tests and benchmarks shorten it; a bad value is said once and the hour kept.
 */
export function fullSyncPeriodFrom(env: NodeJS.ProcessEnv, logger: Logger): number | undefined {
  const text = env['KUBE_PROXY_TS_FULL_SYNC_PERIOD'];
  if (text === undefined || text === '') return undefined;
  try {
    const ms = parseDuration(text);
    if (ms > 0) return ms;
  } catch {
    // said below
  }
  logger.warn('KUBE_PROXY_TS_FULL_SYNC_PERIOD is not a positive duration; full syncs stay hourly', { value: text });
  return undefined;
}

export async function buildSource(
  config: ProxyConfig,
  nodeName: string,
  deps: { logger: Logger; clock: Clock; metrics: ProxyMetrics; onLargeInput?: () => void },
): Promise<Source> {
  // Source rejects carry free text; the metric gets a bounded label.
  const onReject = (r: Reject): void =>
    deps.metrics.objectsRejectedTotal.inc({ kind: String(r.kind), reason: 'invalid-object' });
  const dir = config.kubeProxyTS.manifestDir;
  if (dir !== '') {
    const { logger, clock, onLargeInput } = deps;
    return new ManifestDirSource({ dir, nodeName, logger, clock, onReject, ...(onLargeInput ? { onLargeInput } : {}) });
  }
  const { kubeconfig, master } = config.clientConnection;
  // Loaded on demand: @kubernetes/client-node takes seconds to load on a busy machine.
  const { kubernetesSourceFromFlags } = await import('../sources/index.ts');
  const { qps, burst, contentType } = config.clientConnection;
  const m = deps.metrics;
  return kubernetesSourceFromFlags(
    { ...(kubeconfig !== '' ? { kubeconfig } : {}), ...(master !== '' ? { master } : {}) },
    { nodeName, logger: deps.logger, clock: deps.clock, onReject, resyncPeriodMs: config.configSyncPeriodMs },
    {
      qps,
      burst,
      contentType,
      // client-go's rest_client_* for our API client; a watch's life is not a latency.
      observe: (o) => {
        m.restClientRequestsTotal.inc({ code: o.code, method: o.method, host: o.host });
        m.restClientRateLimiterDuration.observe({ verb: o.method, host: o.host }, o.waitedMs / 1000);
        if (!o.watch) m.restClientRequestDuration.observe({ verb: o.method, host: o.host }, o.durationMs / 1000);
      },
    },
  );
}

/** trace --live tables a killed daemon left (their owner no longer runs); a failure is only logged. */
async function removeStaleTraceTables(logger: Logger): Promise<void> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  try {
    await removeTraceTables(conn, { all: false, logger });
  } catch (e) {
    logger.warn('Could not look for trace --live tables left by an earlier run', { err: errorMessage(e) });
  } finally {
    conn.close();
  }
}

/** The host facts the families depend on, read from this process's network namespace. */
export function hostFacts(): HostFacts {
  const addresses = Object.values(networkInterfaces()).flatMap((list) =>
    (list ?? []).map((a) => ({ address: a.address, internal: a.internal })),
  );
  return { ipv6Kernel: existsSync('/proc/sys/net/ipv6'), addresses };
}

function optional<K extends string, V>(key: K, v: V | undefined): Partial<Record<K, V>> {
  return v === undefined ? {} : ({ [key]: v } as Record<K, V>);
}

/** Everything for `serve`; throws with a readable message when a part cannot be made. */
export async function buildDaemon(config: ProxyConfig, deps: BuildDeps): Promise<Daemon> {
  const { logger, clock } = deps;
  const nodeName = nodeNameOf(config, hostname());
  const served = servedFamilies(config, hostFacts());
  const { families } = served;
  const line = familiesLogLine(served);
  logger.info(line.msg, { ...line.fields, ...(served.nodeIP !== '' ? { nodeIP: served.nodeIP } : {}) });
  for (const err of badConfigWarnings(config, served))
    logger.error('Kube-proxy configuration may be incomplete or incorrect', { err });
  const dlw = detectLocalWarning(config, served.primary);
  if (dlw !== undefined) logger.info(dlw, { clusterCIDRs: config.clusterCIDRs.join(',') });
  const metrics = createMetrics({
    version: deps.version,
    mode: config.mode,
    groups: MODES[config.mode].metrics.groups,
  });
  const ops = metricsOps(config, { ...deps, metrics });
  const sysctl = new ProcSysctl();
  // Before any socket opens; the budget matters to the userspace proxy only.
  const nofile = raiseNofileLimit(logger);
  const descriptorBudget = MODES[config.mode].proxiesThroughSockets(config)
    ? new DescriptorBudget(proxyBudgetSize(nofile.soft, logger).limit)
    : undefined;
  const lbNotices = new LoadBalancingNotices(logger);
  const fullSyncPeriod = fullSyncPeriodFrom(deps.env ?? process.env, logger);
  const proxiers = buildProxiers(config, families, {
    logger,
    clock,
    sysctl,
    ...(descriptorBudget ? { descriptorBudget } : {}),
    onNfacct: (reader) => wireNfacctMetrics(metrics, reader, logger),
    ...optional('fullSyncPeriodMs', fullSyncPeriod),
  });
  const proxyStats = proxiers.proxyStats?.bind(proxiers);
  if (proxyStats)
    registerUserspaceMetrics(
      metrics.registry,
      proxyStats,
      descriptorBudget ? () => ({ limit: descriptorBudget.limit, inUse: descriptorBudget.inUse }) : undefined,
    );
  const localhostNodePorts = proxiers.localhostNodePorts;
  if (localhostNodePorts)
    registerLocalhostNodePortMetrics(metrics.registry, localhostNodePorts.samples, localhostNodePorts.rejected);
  let source: Source;
  // A large manifest read or removed: memory given back after the sync that applied it.
  const late: { daemon?: Daemon } = {};
  const onLargeInput = (): void => late.daemon?.loop.afterNextSync(() => deps.onLargeInputSynced?.());
  try {
    source = await buildSource(config, nodeName, { logger, clock, metrics, onLargeInput });
  } catch (e) {
    proxiers.close();
    throw e;
  }
  const notifier = createNotifier({ clock, logger, ...(deps.env ? { env: deps.env } : {}) });
  const prepare = async (): Promise<void> => {
    await applyOomScoreAdj(config.oomScoreAdj, logger);
    await applyConntrackSettings(config.conntrack, cpus().length, procConntrackIO(), logger);
    await removeStaleTraceTables(logger);
  };
  const staleFlows = openStaleFlowFlusher(logger, clock, metrics);
  const localAddresses = (): string[] => hostFacts().addresses.map((a) => a.address);
  let events: EventSink | undefined;
  if (config.kubeProxyTS.manifestDir === '') {
    const { kubeconfig, master } = config.clientConnection;
    const { eventRecorderFromFlags } = await import('../sources/index.ts');
    events = eventRecorderFromFlags(
      { ...(kubeconfig !== '' ? { kubeconfig } : {}), ...(master !== '' ? { master } : {}) },
      { logger, clock, hostname: hostname() },
    );
    lbNotices.events = events;
  }
  const daemon = new Daemon({
    config,
    nodeName,
    families,
    logger,
    clock,
    notifier,
    metrics,
    source,
    proxiers,
    prepare,
    staleFlows,
    localAddresses,
    controlSocket: config.kubeProxyTS.controlSocket,
    metricsOps: ops,
    // API mode waits for its Node as upstream does (about 30 s); standalone has no Node to wait for.
    nodeWaitMs: config.kubeProxyTS.manifestDir === '' ? 30_000 : 0,
    ...optional('fullSyncPeriodMs', fullSyncPeriod),
    ...optional('onSynced', deps.onSynced),
    ...(events ? { events } : {}),
    loadBalancingNotice: lbNotices.notice,
  });
  late.daemon = daemon;
  if (config.kubeProxyTS.serviceTrafficMetrics)
    wireServiceTraffic({ metrics, trackers: daemon.trackers, proxiers, logger });
  return daemon;
}

/** Stale UDP/SCTP flows are deleted over ctnetlink after each committed sync; its runs counted. */
function openStaleFlowFlusher(logger: Logger, clock: Clock, metrics: ProxyMetrics): ConntrackFlusher {
  return ConntrackFlusher.open({
    logger: logger.child({ component: 'conntrack' }),
    clock,
    counters: (r) => {
      if (r.mode === 'reconcile') {
        for (const f of r.families) {
          metrics.conntrackReconcilerSyncDuration.labels(f).observe(r.durationMs / 1000);
          metrics.conntrackReconcilerDeletedEntriesTotal.labels(f).inc(r.deleted);
        }
      } else if (r.deleted > 0) {
        // Flush runs cover every family and both UDP and SCTP at once.
        metrics.conntrackEntriesDeletedTotal.labels('any', 'udp/sctp').inc(r.deleted);
      }
      if (r.errors > 0) {
        metrics.netlinkErrorsTotal.labels('conntrack', r.mode).inc(r.errors);
        logger.warn('conntrack flush had errors; failed targets are retried at the next sync', {
          errors: r.errors,
          retained: r.retained,
        });
      }
    },
  });
}
