// Per-Service traffic counters (upstream issue 9125), opt-in: kubeproxyts_service_packets_total,
// _bytes_total and _connections_total per Service port and frontend kind. Nothing is counted
// here: the kernel counts (IPVS keeps stats per virtual server), and the values are read at
// scrape time, once per scrape for the three metrics, so a sync never pays for them.

import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

export interface ServiceTrafficSample {
  readonly namespace: string;
  readonly service: string;
  /** The port's name, or its number when unnamed. */
  readonly port: string;
  readonly protocol: string;
  /** cluster-ip, external, node-port. */
  readonly frontend: string;
  /** Absent where the mode does not count them (iptables mode). */
  readonly packets?: number;
  readonly bytes?: number;
  /** Absent where the kernel does not count connections. */
  readonly connections?: number;
}

const LABELS = ['namespace', 'service', 'port', 'protocol', 'frontend'] as const;
type Label = (typeof LABELS)[number];

/** One read serves every metric of a scrape: reads are shared while one is in flight or just done. */
function sharedReader(
  read: () => Promise<readonly ServiceTrafficSample[]>,
  now: () => number,
): () => Promise<readonly ServiceTrafficSample[]> {
  let last: { at: number; p: Promise<readonly ServiceTrafficSample[]> } | undefined;
  return () => {
    const t = now();
    if (!last || t - last.at > 1000) last = { at: t, p: read() };
    return last.p;
  };
}

export function registerServiceTraffic(
  registry: Registry,
  read: () => Promise<readonly ServiceTrafficSample[]>,
  opts: { now?: () => number; onError?: (err: unknown) => void } = {},
): void {
  const shared = sharedReader(read, opts.now ?? (() => performance.now()));
  const counter = (name: string, help: string, value: (s: ServiceTrafficSample) => number | undefined): void => {
    new Counter<Label>({
      name,
      help,
      labelNames: LABELS,
      registers: [registry],
      async collect() {
        this.reset();
        let samples: readonly ServiceTrafficSample[];
        try {
          samples = await shared();
        } catch (err) {
          // A failed read leaves the metric empty for this scrape rather than failing /metrics.
          opts.onError?.(err);
          return;
        }
        for (const s of samples) {
          const v = value(s);
          if (v === undefined) continue;
          this.inc(
            { namespace: s.namespace, service: s.service, port: s.port, protocol: s.protocol, frontend: s.frontend },
            v,
          );
        }
      },
    });
  };
  counter(
    'kubeproxyts_service_packets_total',
    'Packets sent to a Service port (client to Service direction), as the kernel counts them',
    (s) => s.packets,
  );
  counter(
    'kubeproxyts_service_bytes_total',
    'Bytes sent to a Service port (client to Service direction), as the kernel counts them',
    (s) => s.bytes,
  );
  counter(
    'kubeproxyts_service_connections_total',
    'Connections to a Service port, as the kernel counts them',
    (s) => s.connections,
  );
}
