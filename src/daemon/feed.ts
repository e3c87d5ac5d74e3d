// The SourceHandler the daemon gives its source: every event goes to the change tracker of
// each served family (one tracker per family, as upstream runs one proxier per family), is
// counted (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_*), and kicks the sync loop
// when a tracker says a sync is needed. The Node also drives the healthz node eligibility.

import type { Logger } from '../base/logger.ts';
import type { ProxyHealth } from '../health/index.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import type { ChangeTracker } from '../model/index.ts';
import type { SourceHandler, SourceKind } from '../sources/index.ts';

export interface FeedOptions {
  trackers: readonly ChangeTracker[];
  /** Called when some tracker needs a sync (SyncLoop.changed). */
  changed: () => void;
  health?: ProxyHealth;
  metrics?: ProxyMetrics;
  logger?: Logger;
}

export function trackerFeed(o: FeedOptions): SourceHandler {
  let nodeSeen = false;
  const pending = (): void => {
    const first = o.trackers[0];
    if (!first || !o.metrics) return;
    const p = first.pending();
    o.metrics.serviceChangesPending.set(p.services);
    o.metrics.endpointChangesPending.set(p.endpointSlices);
  };
  const each = (f: (t: ChangeTracker) => boolean): void => {
    let needed = false;
    for (const t of o.trackers) needed = f(t) || needed;
    pending();
    if (needed) o.changed();
  };
  return {
    onService(prev, cur) {
      o.metrics?.serviceChangesTotal.inc();
      each((t) => t.onService(prev, cur));
    },
    onEndpointSlice(prev, cur) {
      o.metrics?.endpointChangesTotal.inc();
      if (cur) each((t) => t.onEndpointSlice(cur, false));
      else if (prev) each((t) => t.onEndpointSlice(prev, true));
    },
    onNode(node) {
      if (node) {
        nodeSeen = true;
        o.health?.syncNode(node);
      } else if (nodeSeen) {
        // Only a Node that was there and went away makes the node ineligible; a standalone
        // node without a Node manifest stays eligible.
        o.health?.nodeGone();
      }
      each((t) => t.onNode(node));
    },
    onServiceCIDRs(cidrs) {
      each((t) => t.onServiceCIDRs(cidrs));
    },
    onSynced(kind: SourceKind) {
      o.logger?.debug('Source listed everything', { kind });
    },
  };
}
