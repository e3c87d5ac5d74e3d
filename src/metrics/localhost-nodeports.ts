// nftables mode's localhost NodePort metrics (upstream 1.37, KubeProxyNFTablesLocalhostNodePorts),
// read at scrape time: the listeners per family, the listeners that could not be made, and the
// packets the ruleset rejected on loopback node ports (UDP and SCTP, which no listener serves).

import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

export interface LocalhostNodePortMetricsSample {
  readonly family: 'IPv4' | 'IPv6';
  readonly listeners: number;
  readonly creationFailures: number;
}

export interface LocalhostRejectedSample {
  readonly family: 'IPv4' | 'IPv6';
  readonly protocol: 'UDP' | 'SCTP';
  readonly packets: number;
}

export const LOCALHOST_NODEPORT_METRICS = [
  'kubeproxy_nftables_localhost_nodeport_listeners',
  'kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total',
  'kubeproxy_nftables_localhost_nodeport_rejected_packets_total',
] as const;

export function registerLocalhostNodePortMetrics(
  registry: Registry,
  read: () => readonly LocalhostNodePortMetricsSample[],
  rejected: () => Promise<readonly LocalhostRejectedSample[]>,
): void {
  const registers = [registry];
  new Gauge({
    name: LOCALHOST_NODEPORT_METRICS[0],
    help: 'Number of localhost NodePort listeners of the userspace proxy',
    labelNames: ['ip_family'],
    registers,
    collect() {
      this.reset();
      for (const s of read()) this.set({ ip_family: s.family }, s.listeners);
    },
  });
  new Counter({
    name: LOCALHOST_NODEPORT_METRICS[1],
    help: 'Number of localhost NodePort listeners that could not be created',
    labelNames: ['ip_family'],
    registers,
    collect() {
      this.reset();
      for (const s of read()) this.inc({ ip_family: s.family }, s.creationFailures);
    },
  });
  new Counter({
    name: LOCALHOST_NODEPORT_METRICS[2],
    help: 'Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running',
    labelNames: ['ip_family', 'protocol'],
    registers,
    async collect() {
      const samples = await rejected();
      this.reset();
      for (const s of samples) this.inc({ ip_family: s.family, protocol: s.protocol }, s.packets);
    },
  });
}
