// The connection slots of the daemon's HTTP servers (health/connection-slots.ts), read at
// scrape time: connections open per server, and those closed to make room for a new one
// (evicted) or at once because no slot could be freed (refused). A flood against the health,
// metrics or Service health-check ports shows here before a probe could ever fail.

import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { SlotCensus } from '../health/connection-slots.ts';
import { slotCensus } from '../health/connection-slots.ts';

export const HTTP_SLOT_METRICS = [
  'kubeproxyts_http_connections_open',
  'kubeproxyts_http_connections_closed_total',
] as const;

export function registerHttpSlotMetrics(registry: Registry, read: () => readonly SlotCensus[] = slotCensus): void {
  const registers = [registry];
  new Gauge({
    name: HTTP_SLOT_METRICS[0],
    help: 'Open connections of the daemon’s HTTP server (health, metrics, service-health: every Service health-check port together)',
    labelNames: ['server'],
    registers,
    collect() {
      this.reset();
      for (const s of read()) this.set({ server: s.server }, s.open);
    },
  });
  new Counter({
    name: HTTP_SLOT_METRICS[1],
    help: 'Connections of the daemon’s HTTP server closed by its connection limits: evicted to make room for a new one, or refused because none could',
    labelNames: ['server', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const s of read()) {
        this.inc({ server: s.server, reason: 'evicted' }, s.evicted);
        this.inc({ server: s.server, reason: 'refused' }, s.refused);
      }
    },
  });
}
