// upstream's nfacct-fed iptables metrics (pkg/proxy/metrics nfacctMetricCollector): the kernel
// counts the packets two rules match in nfacct objects, and each scrape reads the object's
// packet count. A metric is registered only when its object exists (upstream: no sample where
// the kernel has no nfacct); a failed read keeps the last value and is reported.

import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

/** Each metric and the nfacct object it reads (names as upstream's metrics package has them). */
export const NFACCT_METRICS = [
  {
    counter: 'ct_state_invalid_dropped_pkts',
    name: 'kubeproxy_iptables_ct_state_invalid_dropped_packets_total',
    help: 'packets dropped by iptables to work around conntrack problems',
  },
  {
    counter: 'localhost_nps_accepted_pkts',
    name: 'kubeproxy_iptables_localhost_nodeports_accepted_packets_total',
    help: 'Number of packets accepted on nodeports of loopback interface',
  },
] as const;

export interface NfacctReader {
  /** The objects that exist (made at start). */
  readonly names: ReadonlySet<string>;
  /** The object's packet count. */
  read(counter: string): Promise<bigint>;
}

export function registerNfacctMetrics(
  registry: Registry,
  reader: NfacctReader,
  onError: (counter: string, err: unknown) => void = () => {},
): void {
  for (const d of NFACCT_METRICS) {
    // Once each: init() may run again after a failed start.
    if (!reader.names.has(d.counter) || registry.getSingleMetric(d.name)) continue;
    let last = 0;
    new Counter({
      name: d.name,
      help: d.help,
      registers: [registry],
      async collect() {
        try {
          last = Number(await reader.read(d.counter));
        } catch (err) {
          onError(d.counter, err);
        }
        this.reset();
        this.inc(last);
      },
    });
  }
}
