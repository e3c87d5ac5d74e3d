// The running daemon: given its parts (a source, the proxiers of the selected mode, a
// notifier, a clock), it builds the trackers, health and servers around them, starts them in
// order and stops them in the reverse order. It knows nothing of sockets or flags: build.ts
// makes the real parts from the configuration, tests pass fakes.
//
//   source ──feed──> tracker per family ──SyncLoop──> sync.ts ──> proxier per family
//                                                        └──> service health checks, metrics
//
// Start: proxier start-up checks, healthz and metrics servers (upstream's retry-on-bind-
// failure), the source, then the sync loop, whose first full sync waits for the source to
// have listed everything; READY=1 follows it. Stop (SIGTERM/SIGINT): STOPPING=1, the sync loop
// (an in-flight sync is aborted), the source, the servers, the sockets. The programmed rules
// stay, so traffic keeps flowing across a restart, as upstream.

import { errorMessage } from '../base/errors.ts';
import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import type { ProxyConfig } from '../config/index.ts';
import { ProxyHealth, ServiceHealthServers, startProxyHealthServer } from '../health/index.ts';
import type { ListenFn } from '../health/index.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import { startMetricsServer } from '../metrics/index.ts';
import { ChangeTracker, RejectLog } from '../model/index.ts';
import type { DesiredState } from '../model/index.ts';
import { lbOption } from '../config/load-balancing-option.ts';
import type { LoadBalancingNotice } from '../proxier/types.ts';
import { nodeRef } from '../sources/events.ts';
import type { EventSink } from '../sources/events.ts';
import type { Source, SourceHandler } from '../sources/index.ts';
import { startControl } from './control.ts';
import type { ControlServer } from '../control/server.ts';
import { modelOptionsFor } from './families.ts';
import { healthCheckAddresses } from './health-addresses.ts';
import { trackerFeed } from './feed.ts';
import type { ProxierSet } from './modes/index.ts';
import type { Notifier } from './sd-notify.ts';
import { serveWithRetry } from './serve.ts';
import type { Closable, Served } from './serve.ts';
import { NodeWait } from './node-wait.ts';
import type { MetricsOps } from './ops.ts';
import { announceDeprecations } from './deprecations.ts';
import { Profiler } from './profiling.ts';
import { makeSync } from './sync.ts';
import type { FamilyPipeline, StaleFlowSink } from './sync.ts';
import { SyncLoop } from './sync-loop.ts';

export interface DaemonParts {
  config: ProxyConfig;
  nodeName: string;
  families: readonly IPFamily[];
  logger: Logger;
  clock: Clock;
  notifier: Notifier;
  metrics: ProxyMetrics;
  source: Source;
  proxiers: ProxierSet;
  /** How HTTP servers open (tests); default node:http. */
  listen?: ListenFn;
  /** Start-up settings after the proxiers' own checks (conntrack tunables). */
  prepare?: () => Promise<void>;
  /** Kubernetes Events (API mode): "Starting" on the Node, health-check listen failures on Services. */
  events?: EventSink;
  /** Told of Services asking for a load balancing the mode refuses (load-balancing-notices.ts). */
  loadBalancingNotice?: LoadBalancingNotice;
  /** This node's interface addresses (health-check node ports bind to those nodePortAddresses selects). */
  localAddresses?: () => readonly string[];
  /** The conntrack flusher (build.ts opens one); unset (tests): stale targets are only logged. */
  staleFlows?: StaleFlowSink;
  /** The control socket's path (explain, trace); unset: none (tests). */
  controlSocket?: string;
  /** How long the first sync waits for this node's Node (node-wait.ts); unset or 0: no wait. */
  nodeWaitMs?: number;
  /** The metrics port's /statusz, /flagz, /metrics/slis (ops.ts); unset: not served. */
  metricsOps?: MetricsOps;
  /** The longest time between full syncs (sync-loop.ts); unset: an hour, as upstream. */
  fullSyncPeriodMs?: number;
  /** Told after every successful sync (main.ts: the heap release). */
  onSynced?: (done: { full: boolean; ms: number }) => void;
}

export class Daemon {
  readonly health: ProxyHealth;
  readonly healthChecks: ServiceHealthServers;
  readonly loop: SyncLoop;
  readonly trackers: ReadonlyMap<IPFamily, ChangeTracker>;
  private readonly p: DaemonParts;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private healthz: Served<Closable> | undefined;
  private metricsServer: Served<Closable> | undefined;
  private control: ControlServer | undefined;
  private healthFallback: string | undefined;
  private started = false;
  private running = false;
  private stopped: Promise<void> | undefined;
  /** nftables mode: repairs drift as the kernel announces it. */
  private drift: { close(): void } | undefined;

  constructor(parts: DaemonParts) {
    this.p = parts;
    const { config, clock, metrics } = parts;
    this.log = parts.logger;
    this.health = new ProxyHealth({
      clock,
      healthTimeoutMs: 2 * config.syncPeriodMs,
      counters: {
        healthz: (code) => metrics.proxyHealthzTotal.inc({ code: String(code) }),
        livez: (code) => metrics.proxyLivezTotal.inc({ code: String(code) }),
      },
    });
    this.healthChecks = new ServiceHealthServers({
      proxyHealthy: () => this.health.isHealthy(),
      clock,
      logger: this.log.child({ component: 'service-health' }),
      ...(parts.listen ? { listen: parts.listen } : {}),
      // Upstream's service health server posts this Warning on the Service.
      onListenError: (service, port, err) => {
        const [namespace, name] = service.includes('/') ? (service.split('/', 2) as [string, string]) : ['', service];
        parts.events?.eventf(
          { kind: 'Service', namespace, name },
          'Warning',
          'FailedToStartServiceHealthcheck',
          'Listen',
          `node ${parts.nodeName} failed to start healthcheck "${service}" on port ${port}: ${err.message}`,
        );
      },
    });
    // One reject log for every family: a bad object is warned about and counted once.
    const rejectLog = new RejectLog(this.log.child({ component: 'model' }), (kind, reason) =>
      metrics.objectsRejectedTotal.inc({ kind, reason }),
    );
    const trackers = new Map<IPFamily, ChangeTracker>();
    const pipelines: FamilyPipeline[] = [];
    for (const family of parts.families) {
      const proxier = parts.proxiers.proxiers.get(family);
      if (!proxier) throw new Error(`no ${parts.proxiers.mode} proxier for ${family}`);
      const tracker = new ChangeTracker(modelOptionsFor(config, family, parts.nodeName), {
        logger: this.log.child({ component: 'model', family }),
        clock,
        rejectLog,
      });
      trackers.set(family, tracker);
      pipelines.push({ family, tracker, proxier });
    }
    this.trackers = trackers;
    this.loop = new SyncLoop({
      mode: parts.proxiers.mode,
      syncPeriodMs: config.syncPeriodMs,
      minSyncPeriodMs: config.minSyncPeriodMs,
      ...(parts.fullSyncPeriodMs !== undefined ? { fullSyncPeriodMs: parts.fullSyncPeriodMs } : {}),
      ...(parts.proxiers.periodicFull === true ? { periodicFull: true } : {}),
      ...(parts.onSynced ? { onSynced: parts.onSynced } : {}),
      families: parts.families,
      clock,
      health: this.health,
      notifier: parts.notifier,
      metrics,
      logger: this.log.child({ component: 'sync' }),
      sync: makeSync({
        pipelines,
        healthChecks: (wanted, states) => this.healthChecks.sync(wanted, this.healthAddresses(states)),
        metrics,
        logger: this.log.child({ component: 'sync' }),
        now: () => clock.now(),
        ...(parts.staleFlows ? { staleFlows: parts.staleFlows } : {}),
        ...(parts.loadBalancingNotice
          ? { loadBalancing: { nodeDefault: lbOption(parts.config).loadBalancing, notice: parts.loadBalancingNotice } }
          : {}),
      }),
    });
    // Kernel drift a mode notices between syncs (iptables: a canary chain gone) asks for a sync.
    parts.proxiers.watch?.(() => this.loop.changed());
  }

  /**
   * With bindAddressHardFail, a server that cannot start is a Warning on the Node (upstream's reasons), posted before
   * the exit.
   */
  private async hardFailEvent<T>(reason: string, serving: Promise<T>): Promise<T> {
    try {
      return await serving;
    } catch (err) {
      this.p.events?.eventf(nodeRef(this.p.nodeName), 'Warning', reason, 'StartKubeProxy', errorMessage(err));
      await this.p.events?.flush?.();
      throw err;
    }
  }

  /** The node IPs the health-check node ports bind to (nodePortAddresses), said once per change. */
  private healthAddresses(states: readonly DesiredState[]): string[] {
    const choice = healthCheckAddresses(this.p.config.nodePortAddresses, states, this.p.localAddresses?.() ?? []);
    if (choice.fallback !== undefined && choice.fallback !== this.healthFallback) {
      this.log.info('Service health checks listen on every address', { reason: choice.fallback });
    }
    this.healthFallback = choice.fallback;
    return choice.addresses;
  }

  /** Resolves after the first successful full sync (READY=1). */
  get ready(): Promise<void> {
    return this.loop.ready;
  }

  /** Starts everything; rejects (after stopping what started) when a part cannot start. */
  async start(): Promise<void> {
    if (this.started) throw new Error('daemon already started');
    this.started = true;
    const { config, clock, metrics, proxiers, source } = this.p;
    try {
      await proxiers.init(this.abort.signal);
      if (this.abort.signal.aborted) return; // stopped (a signal) while starting
      await this.p.prepare?.();
      const hardFail = config.bindAddressHardFail;
      if (config.healthzBindAddress !== '') {
        const address = config.healthzBindAddress;
        this.healthz = await this.hardFailEvent(
          'FailedToStartProxierHealthcheck',
          serveWithRetry({
            what: 'healthz',
            address,
            clock,
            logger: this.log,
            hardFail,
            start: () =>
              startProxyHealthServer({
                address,
                health: this.health,
                logger: this.log,
                ...(this.p.listen ? { listen: this.p.listen } : {}),
              }),
          }),
        );
      }
      if (config.metricsBindAddress !== '') {
        const address = config.metricsBindAddress;
        this.metricsServer = await this.hardFailEvent(
          'FailedToStartMetricServer',
          serveWithRetry({
            what: 'metrics',
            address,
            clock,
            logger: this.log,
            hardFail,
            start: () =>
              startMetricsServer({
                address,
                metrics,
                proxyMode: proxiers.mode,
                configz: () => config,
                logger: this.log,
                ...(this.p.metricsOps
                  ? { opsRoutes: this.p.metricsOps.routes, onHealthz: this.p.metricsOps.onHealthz }
                  : {}),
              }),
          }),
        );
      }
      await this.startControl();
      const { feed, nodeWait } = this.sourceFeed();
      if (this.abort.signal.aborted) {
        // stop() ran while the servers were starting: close what it could not see yet.
        await this.healthz?.close();
        await this.metricsServer?.close();
        await this.control?.close();
        return;
      }
      await source.start(feed);
      // Upstream's birth cry, once the informers run.
      this.p.events?.eventf(nodeRef(this.p.nodeName), 'Normal', 'Starting', 'StartKubeProxy', '');
      announceDeprecations(proxiers.mode, this.log, this.p.events, this.p.nodeName);
      this.loop.start(nodeWait.gate(source.waitForSync(this.abort.signal), this.abort.signal));
      this.drift = proxiers.watchDrift?.(
        (why) => this.loop.repair(why),
        () => this.loop.isSyncing(),
      );
      this.running = true;
      this.log.info('kube-proxy-ts started', {
        mode: proxiers.mode,
        families: this.p.families.join(','),
        node: this.p.nodeName,
      });
    } catch (e) {
      await this.stop().catch(() => undefined);
      throw e;
    }
  }

  /** What the source feeds: the trackers, and the first sync's wait for this node's Node. */
  private sourceFeed(): { feed: SourceHandler; nodeWait: NodeWait } {
    const trackersFeed = trackerFeed({
      trackers: [...this.trackers.values()],
      changed: () => this.loop.changed(),
      health: this.health,
      metrics: this.p.metrics,
      logger: this.log,
    });
    const nodeWait = new NodeWait({
      nodeName: this.p.nodeName,
      timeoutMs: this.p.nodeWaitMs ?? 0,
      clock: this.p.clock,
      logger: this.log,
    });
    const feed: SourceHandler = {
      ...trackersFeed,
      onNode: (node) => {
        trackersFeed.onNode(node);
        nodeWait.node(node);
      },
    };
    return { feed, nodeWait };
  }

  /** The control socket is a diagnostic: a daemon that cannot open it still proxies (said once). */
  private async startControl(): Promise<void> {
    const path = this.p.controlSocket;
    if (path === undefined || path === '') return;
    const { trackers, p } = this;
    try {
      this.control = await startControl({
        path,
        trackers,
        proxiers: p.proxiers,
        metrics: p.metrics,
        localAddresses: p.localAddresses ?? (() => []),
        logger: this.log,
        balancing: {
          ipvsScheduler: p.config.ipvs.scheduler,
          ...lbOption(p.config),
        },
        ...(p.config.enableProfiling ? { profiler: new Profiler() } : {}),
      });
    } catch (err) {
      this.log.warn('Cannot open the control socket; explain and trace will not reach this daemon', {
        op: 'control',
        path,
        err,
      });
    }
  }

  /** The port the healthz server is bound to, once it is (tests bind port 0). */
  healthzPort(): number | undefined {
    return (this.healthz?.current() as { port?: number } | undefined)?.port;
  }

  metricsPort(): number | undefined {
    return (this.metricsServer?.current() as { port?: number } | undefined)?.port;
  }

  /** Stops everything, leaving the programmed rules in place. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= this.doStop();
    return this.stopped;
  }

  private async doStop(): Promise<void> {
    this.abort.abort();
    const step = async (what: string, f: () => Promise<void>): Promise<void> => {
      try {
        await f();
      } catch (err) {
        this.log.warn('Stopping failed', { op: `stop ${what}`, err });
      }
    };
    this.drift?.close();
    await step('sync loop', () => this.loop.stop());
    await step('source', () => this.p.source.stop());
    await step('conntrack flusher', async () => this.p.staleFlows?.close?.());
    await step('service health checks', () => this.healthChecks.close());
    await step('healthz server', async () => this.healthz?.close());
    await step('metrics server', async () => this.metricsServer?.close());
    await step('control socket', async () => this.control?.close());
    const proxiers = this.p.proxiers;
    // The userspace mode's sockets end with the process: their connections are closed here.
    if (proxiers.shutdown) await step('proxiers', () => proxiers.shutdown!());
    else proxiers.close();
    if (this.running) this.log.info('Stopped; the programmed rules stay in place');
  }
}
