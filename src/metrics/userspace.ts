// The userspace mode's data-path metrics (kubeproxyts_userspace_*; upstream's userspace proxier
// exported none), read at scrape time from the proxy sockets' counters. Per IP family only:
// a label per service port would grow with the cluster. The descriptor budget (base/
// descriptor-budget.ts) is the daemon's, over both families: its gauges have no label.

import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

/** One family's counters since start (the data path's ProxyStats, summed over its ports). */
export interface UserspaceSample {
  readonly family: 'IPv4' | 'IPv6';
  readonly activeConnections: number;
  readonly activeUdpAssociations: number;
  readonly accepted: number;
  readonly failedOver: number;
  readonly refused: number;
  readonly overBudget: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

export const USERSPACE_METRICS = [
  'kubeproxyts_userspace_active_connections',
  'kubeproxyts_userspace_active_udp_associations',
  'kubeproxyts_userspace_accepted_connections_total',
  'kubeproxyts_userspace_failed_over_connections_total',
  'kubeproxyts_userspace_refused_connections_total',
  'kubeproxyts_userspace_bytes_total',
  'kubeproxyts_userspace_over_budget_connections_total',
  'kubeproxyts_userspace_descriptor_budget',
  'kubeproxyts_userspace_descriptors_in_use',
] as const;

/** The daemon's descriptor budget for the proxy, as DescriptorBudget reports it. */
export interface BudgetSample {
  readonly limit: number;
  readonly inUse: number;
}

/** Registers the metrics in `registry`; `read` is called once per scrape. */
export function registerUserspaceMetrics(
  registry: Registry,
  read: () => readonly UserspaceSample[],
  budget?: () => BudgetSample,
): void {
  const samples = read;
  const registers = [registry];
  const gauge = (name: string, help: string, pick: (s: UserspaceSample) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['ip_family'],
      registers,
      collect() {
        this.reset();
        for (const s of samples()) this.set({ ip_family: s.family }, pick(s));
      },
    });
  };
  // Counters kept by the data path: each scrape reports its running totals.
  const counter = (name: string, help: string, pick: (s: UserspaceSample) => number): void => {
    new Counter({
      name,
      help,
      labelNames: ['ip_family'],
      registers,
      collect() {
        this.reset();
        for (const s of samples()) this.inc({ ip_family: s.family }, pick(s));
      },
    });
  };
  gauge(USERSPACE_METRICS[0], 'TCP connections the userspace proxy is relaying now', (s) => s.activeConnections);
  gauge(USERSPACE_METRICS[1], 'UDP client associations the userspace proxy holds now', (s) => s.activeUdpAssociations);
  counter(USERSPACE_METRICS[2], 'Connections accepted by the userspace proxy sockets', (s) => s.accepted);
  counter(
    USERSPACE_METRICS[3],
    'Connections whose first endpoint failed to connect and that were tried on the next one',
    (s) => s.failedOver,
  );
  counter(
    USERSPACE_METRICS[4],
    'Connections reset because the service port had no endpoint or every attempt failed',
    (s) => s.refused,
  );
  counter(
    USERSPACE_METRICS[6],
    "TCP connections reset and UDP clients' datagrams dropped at once because the proxy's descriptor budget was spent",
    (s) => s.overBudget,
  );
  if (budget) {
    const plain = (name: string, help: string, pick: (b: BudgetSample) => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(pick(budget()));
        },
      });
    };
    plain(
      USERSPACE_METRICS[7],
      'Descriptors the userspace proxy may hold (RLIMIT_NOFILE less the reserve for the rest of the daemon)',
      (b) => b.limit,
    );
    plain(
      USERSPACE_METRICS[8],
      'Descriptors the userspace proxy holds now: 2 a TCP connection, 1 a UDP association, 1 a proxy socket',
      (b) => b.inUse,
    );
  }
  new Counter({
    name: USERSPACE_METRICS[5],
    help: 'Bytes relayed by the userspace proxy: in (client to endpoint), out (endpoint to client)',
    labelNames: ['ip_family', 'direction'],
    registers,
    collect() {
      this.reset();
      for (const s of samples()) {
        this.inc({ ip_family: s.family, direction: 'in' }, s.bytesIn);
        this.inc({ ip_family: s.family, direction: 'out' }, s.bytesOut);
      }
    },
  });
}
