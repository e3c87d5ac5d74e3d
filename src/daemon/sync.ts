// One sync of every served family: check the desired state out of the family's tracker, hand
// it to the family's proxier, then feed what follows a successful sync: the per-Service
// health-check servers, the network-programming latency, the no-local-endpoints gauges, and
// the stale-flow targets for the conntrack flusher.
//
// `staleFlows` is the ConntrackFlusher of src/conntrack (build.ts opens it), driven as it expects:
// reconcile(desired) after the first committed sync of each family, schedule(change.stale,
// desired) after every committed sync, hold(change.stale) for a sync that failed (deleted only
// after the next commit). Without one (tests), stale targets are only logged.

import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import type { ServiceHealthEntry } from '../health/index.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import type { ChangeSet, ChangeTracker, DesiredState, LoadBalancing, StaleTarget } from '../model/index.ts';
import { NetlinkError } from '../netlink/core/index.ts';
import { problemText, SyncFailedError } from '../proxier/types.ts';
import type { ArrivingChanges, LoadBalancingNotice, Proxier } from '../proxier/types.ts';
import { checkLoadBalancing } from './load-balancing-notices.ts';
import type { SyncOutcome, SyncRequest } from './sync-loop.ts';
import { MODES } from './modes/index.ts';

export interface FamilyPipeline {
  family: IPFamily;
  tracker: ChangeTracker;
  proxier: Proxier;
}

/** What the sync hands the conntrack flusher (ConntrackFlusher fits it). */
export interface StaleFlowSink {
  schedule(targets: readonly StaleTarget[], desired: DesiredState): void;
  hold(targets: readonly StaleTarget[]): void;
  reconcile(desired: DesiredState): void;
  close?(): Promise<void>;
}

export interface SyncerOptions {
  pipelines: readonly FamilyPipeline[];
  /** ServiceHealthServers.sync: "namespace/name" -> port and local endpoints. */
  /** `states`: every family's committed state (the node IPs the health checks bind to). */
  healthChecks?: (wanted: ReadonlyMap<string, ServiceHealthEntry>, states: readonly DesiredState[]) => Promise<void>;
  /** Where stale UDP/SCTP flow targets go (the conntrack flusher). */
  staleFlows?: StaleFlowSink;
  metrics?: ProxyMetrics;
  logger: Logger;
  now: () => number;
  /** Told of Service ports asking for a load balancing the mode refuses (load-balancing-notices.ts). */
  loadBalancing?: { readonly nodeDefault: LoadBalancing | undefined; readonly notice: LoadBalancingNotice };
}

/**
 * kubeproxyts_netlink_errors_total for a failed sync. The op label keeps the verb and the
 * object kind only ("add element"), so that object names do not explode the label set.
 */
function countNetlinkError(metrics: ProxyMetrics | undefined, subsystem: string, e: unknown): void {
  if (e instanceof SyncFailedError) e = e.cause;
  if (!metrics || !(e instanceof NetlinkError)) return;
  const op = [e.verb, e.kind].filter((w) => w !== '').join(' ') || 'unknown';
  metrics.netlinkErrorsTotal.inc({ subsystem, op });
}

/**
 * Services using a Local policy that have no local endpoint, per policy (upstream's gauge).
 * `perPort`: count service ports, as upstream's nftables (and iptables) proxier does; its IPVS
 * proxier counts Services.
 */
export function noLocalEndpoints(desired: DesiredState, perPort = false): { internal: number; external: number } {
  const internal = new Set<string>();
  const external = new Set<string>();
  for (const [id, info] of desired.services) {
    if (!info.internalPolicyLocal && !info.externalPolicyLocal) continue;
    const sel = desired.selections.get(id);
    if (!sel || !sel.hasAnyEndpoints || sel.local.length > 0) continue;
    const key = perPort ? id : info.service;
    if (info.internalPolicyLocal) internal.add(key);
    if (info.externalPolicyLocal) external.add(key);
  }
  return { internal: internal.size, external: external.size };
}

/** Every family's health checks as one map (a dual-stack Service counts its local endpoints of both). */
export function mergeHealthChecks(states: readonly DesiredState[]): Map<string, ServiceHealthEntry> {
  const out = new Map<string, ServiceHealthEntry>();
  for (const d of states) {
    for (const [key, hc] of d.healthChecks) {
      const had = out.get(key);
      out.set(key, { port: hc.nodePort, localEndpoints: (had?.localEndpoints ?? 0) + hc.localEndpoints });
    }
  }
  return out;
}

/** kubeproxy_network_programming_duration_seconds for the changes now in the kernel. */
function observeLatency(o: SyncerOptions, family: IPFamily, change: ChangeSet): void {
  const now = o.now();
  for (const times of change.triggerTimes.values()) {
    for (const t of times)
      o.metrics?.networkProgrammingDuration.observe({ ip_family: family }, Math.max(0, now - t) / 1000);
  }
}

/**
 * What a pipeline's proxier may take while a long sync runs (ArrivingChanges): the tracker's
 * pending changes unless they need a full sync of their own; `taken` collects them, for the
 * stale flows they bring.
 */
function arrivingFor(o: SyncerOptions, p: FamilyPipeline, taken: ChangeSet[], req: SyncRequest): ArrivingChanges {
  return {
    waiting: () => p.tracker.syncNeeded && !p.tracker.fullPending,
    take: () => {
      if (!p.tracker.syncNeeded || p.tracker.fullPending) return undefined;
      const { change } = p.tracker.checkout();
      taken.push(change);
      // Checked out at once: every kick before this one is in it, unless another family waits.
      if (o.pipelines.every((q) => !q.tracker.syncNeeded)) req.answered?.();
      return change;
    },
    applied: (change) => observeLatency(o, p.family, change),
  };
}

export function makeSync(o: SyncerOptions): (req: SyncRequest) => Promise<SyncOutcome> {
  const committed = new Set<IPFamily>();
  return async (req) => {
    const states: DesiredState[] = [];
    let services = 0;
    let endpoints = 0;
    let planMs = 0;
    let kernelMs = 0;
    for (const p of o.pipelines) {
      if (req.full) p.tracker.requestFullSync();
      const { desired, change } = p.tracker.checkout();
      if (o.loadBalancing)
        checkLoadBalancing(p.proxier.mode, o.loadBalancing.nodeDefault, desired, change, o.loadBalancing.notice);
      // What the mode's own metrics take from its syncs (modes/).
      const modeMetrics = MODES[p.proxier.mode].metrics;
      const taken: ChangeSet[] = [];
      const stale = (): StaleTarget[] => [...change.stale, ...taken.flatMap((c) => c.stale)];
      let report;
      try {
        report = await p.proxier.sync(desired, change, req.signal, arrivingFor(o, p, taken, req));
      } catch (e) {
        countNetlinkError(o.metrics, p.proxier.mode, e);
        if (o.metrics) modeMetrics.failed?.(o.metrics, p.family, e);
        if (stale().length > 0) o.staleFlows?.hold(stale());
        throw e;
      }
      for (const e of report.errors)
        o.logger.warn('Sync problem', { family: p.family, mode: p.proxier.mode, problem: problemText(e) });
      if (o.metrics) modeMetrics.committed?.(o.metrics, p.family, report);
      if (report.refused) o.metrics?.servicePortsRefusedTotal.inc({ ip_family: p.family }, report.refused);
      observeLatency(o, p.family, change);
      planMs += report.planMs;
      kernelMs += report.kernelMs;
      const nle = noLocalEndpoints(desired, modeMetrics.noLocalEndpointsPerPort);
      o.metrics?.noLocalEndpointsTotal.set({ ip_family: p.family, traffic_policy: 'internal' }, nle.internal);
      o.metrics?.noLocalEndpointsTotal.set({ ip_family: p.family, traffic_policy: 'external' }, nle.external);
      if (o.staleFlows) {
        if (!committed.has(p.family)) o.staleFlows.reconcile(desired);
        o.staleFlows.schedule(stale(), desired);
      } else if (stale().length > 0) {
        o.logger.debug('Stale conntrack targets (no conntrack flusher)', {
          family: p.family,
          targets: stale().length,
        });
      }
      committed.add(p.family);
      states.push(desired);
      services += desired.services.size;
      for (const eps of desired.endpoints.values()) endpoints += eps.length;
    }
    o.metrics?.serviceChangesPending.set(0);
    o.metrics?.endpointChangesPending.set(0);
    if (o.healthChecks) await o.healthChecks(mergeHealthChecks(states), states);
    return { services, endpoints, planMs, kernelMs };
  };
}
