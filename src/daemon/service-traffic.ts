// The opt-in per-Service traffic metrics (--service-traffic-metrics): each family's proxier
// reads its kernel counters at scrape time, labelled here with the Service port's names from
// the model. A mode whose proxier cannot count yet is said once at start.

import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import { registerServiceTraffic } from '../metrics/service-traffic.ts';
import type { ServiceTrafficSample } from '../metrics/service-traffic.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import type { ChangeTracker } from '../model/index.ts';
import type { ProxierSet } from './modes/index.ts';

export async function readServiceTraffic(
  trackers: ReadonlyMap<IPFamily, ChangeTracker>,
  proxiers: ProxierSet,
): Promise<ServiceTrafficSample[]> {
  const out: ServiceTrafficSample[] = [];
  for (const [family, proxier] of proxiers.proxiers) {
    if (!proxier.trafficCounters) continue;
    const services = trackers.get(family)?.desired.services;
    for (const s of await proxier.trafficCounters()) {
      const info = services?.get(s.id);
      if (!info) continue; // gone since the last sync
      out.push({
        namespace: info.namespace,
        service: info.name,
        port: info.portName || String(info.port),
        protocol: info.protocol,
        frontend: s.frontend,
        ...(s.packets !== undefined ? { packets: s.packets } : {}),
        ...(s.bytes !== undefined ? { bytes: s.bytes } : {}),
        ...(s.connections !== undefined ? { connections: s.connections } : {}),
      });
    }
  }
  return out;
}

export function wireServiceTraffic(o: {
  metrics: ProxyMetrics;
  trackers: ReadonlyMap<IPFamily, ChangeTracker>;
  proxiers: ProxierSet;
  logger: Logger;
}): void {
  if (![...o.proxiers.proxiers.values()].some((p) => p.trafficCounters)) {
    o.logger.warn('Per-Service traffic metrics are not available in this mode yet; none are exported', {
      mode: o.proxiers.mode,
    });
    return;
  }
  registerServiceTraffic(o.metrics.registry, () => readServiceTraffic(o.trackers, o.proxiers), {
    onError: (err) =>
      o.logger.warn('Reading the per-Service traffic counters failed', { op: 'service traffic metrics', err }),
  });
}
