// The proxy's own health, with upstream's semantics (pkg/proxy/healthcheck/proxy_health.go):
//
//   - queuedUpdate(family) when a change arrives that needs a sync; updated(family) after a
//     successful sync. The proxy is unhealthy when, for some family, an update has been
//     queued for longer than healthTimeout (upstream: 2 x syncPeriod) without a sync.
//     Before the first update it is healthy (starting up).
//   - /livez reports only that. /healthz also fails while the Node is being deleted or is
//     tainted ToBeDeletedByClusterAutoscaler, so cloud load balancers drain the node.
//   - Both answer JSON {"lastUpdated": ..., "currentTime": ...} (healthz adds nodeEligible);
//     when healthy, lastUpdated is the current time, as upstream keeps for compatibility.
//
// Counting responses by code (proxy_healthz_total, proxy_livez_total) is injected.

import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import { nullLogger, type Logger } from '../base/logger.ts';
import type { Node } from '../model/k8s.ts';
import { formatGoTime } from './go-time.ts';
import { nodeHttpListen, parseHostPort, sendJSON, type HttpListener, type ListenFn } from './http.ts';

export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

export interface HealthCounters {
  healthz(code: number): void;
  livez(code: number): void;
}

export interface ProxyHealthOptions {
  clock: Clock;
  /** Upstream passes 2 x syncPeriod. */
  healthTimeoutMs: number;
  counters?: HealthCounters;
}

export interface HealthAnswer {
  code: 200 | 503;
  body: string;
}

export class ProxyHealth {
  private readonly clock: Clock;
  private readonly timeoutMs: number;
  private readonly counters: HealthCounters | undefined;
  private readonly lastUpdated = new Map<IPFamily, number>();
  private readonly oldestQueued = new Map<IPFamily, number>();
  // Eligible (and so healthy) while starting, until a Node event says otherwise.
  private eligible = true;

  constructor(opts: ProxyHealthOptions) {
    this.clock = opts.clock;
    this.timeoutMs = opts.healthTimeoutMs;
    this.counters = opts.counters;
  }

  /** A change needing a sync arrived for this family; the oldest pending one is kept. */
  queuedUpdate(family: IPFamily = 'IPv4'): void {
    if (!this.oldestQueued.has(family)) this.oldestQueued.set(family, this.clock.now());
  }

  /** The proxier of this family synced successfully. */
  updated(family: IPFamily = 'IPv4'): void {
    this.oldestQueued.delete(family);
    this.lastUpdated.set(family, this.clock.now());
  }

  /** Upstream's SyncNode: ineligible while being deleted or tainted for deletion by the autoscaler. */
  syncNode(node: Node): void {
    if (node.metadata?.deletionTimestamp !== undefined && node.metadata.deletionTimestamp !== '') {
      this.eligible = false;
      return;
    }
    this.eligible = !(node.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
  }

  /** The Node object was deleted: no longer eligible (upstream's OnNodeDelete). */
  nodeGone(): void {
    this.eligible = false;
  }

  get nodeEligible(): boolean {
    return this.eligible;
  }

  /** The proxier's health alone (ignores the Node), as /livez and the service health checks see it. */
  isHealthy(): boolean {
    return this.check().healthy;
  }

  /** Time of the last successful sync of any family; undefined before the first. */
  get lastUpdatedMs(): number | undefined {
    let last: number | undefined;
    for (const t of this.lastUpdated.values()) if (last === undefined || t > last) last = t;
    return last;
  }

  private check(): { healthy: boolean; lastUpdated: number | undefined } {
    const now = this.clock.now();
    let lastUpdated: number | undefined;
    for (const [family, updated] of this.lastUpdated) {
      if (lastUpdated === undefined || updated > lastUpdated) lastUpdated = updated;
      const queued = this.oldestQueued.get(family);
      if (queued === undefined) continue; // synced, or starting up
      if (now - queued < this.timeoutMs) continue; // pending, not late yet
      return { healthy: false, lastUpdated: updated };
    }
    return { healthy: true, lastUpdated };
  }

  healthz(): HealthAnswer {
    const eligible = this.eligible;
    const { healthy: proxyHealthy, lastUpdated } = this.check();
    const now = this.clock.now();
    const healthy = proxyHealthy && eligible;
    const code = healthy ? 200 : 503;
    this.counters?.healthz(code);
    const shown = healthy ? now : lastUpdated;
    return {
      code,
      body: `{"lastUpdated": ${JSON.stringify(formatGoTime(shown))},"currentTime": ${JSON.stringify(formatGoTime(now))}, "nodeEligible": ${eligible}}`,
    };
  }

  livez(): HealthAnswer {
    const { healthy, lastUpdated } = this.check();
    const now = this.clock.now();
    const code = healthy ? 200 : 503;
    this.counters?.livez(code);
    const shown = healthy ? now : lastUpdated;
    return {
      code,
      body: `{"lastUpdated": ${JSON.stringify(formatGoTime(shown))},"currentTime": ${JSON.stringify(formatGoTime(now))}}`,
    };
  }
}

export interface ProxyHealthServerOptions {
  /** "0.0.0.0:10256" by default in the config. */
  address: string;
  health: ProxyHealth;
  listen?: ListenFn;
  logger?: Logger;
}

/** Serves /healthz and /livez (anything else: 404). */
export async function startProxyHealthServer(opts: ProxyHealthServerOptions): Promise<HttpListener> {
  const { host, port } = parseHostPort(opts.address);
  const listen = opts.listen ?? nodeHttpListen;
  const log = opts.logger ?? nullLogger;
  const listener = await listen(host, port, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    let answer: HealthAnswer | undefined;
    if (path === '/healthz') answer = opts.health.healthz();
    else if (path === '/livez') answer = opts.health.livez();
    if (answer === undefined) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('404 page not found\n');
      return;
    }
    sendJSON(req, res, answer.code, answer.body);
  });
  log.info('Serving healthz', { address: opts.address, port: listener.port });
  return listener;
}
