// The kubeproxy_nftables_localhost_nodeport_* metrics: upstream 1.37's names and labels, read at
// scrape time from the listeners and from the ruleset's counters.
import test from 'ava';
import { Registry } from 'prom-client';
import { registerLocalhostNodePortMetrics } from '../../../src/metrics/localhost-nodeports.ts';

test('listeners and failures per ip_family, rejected packets per ip_family and protocol', async (t) => {
  const registry = new Registry();
  let failures = 1;
  registerLocalhostNodePortMetrics(
    registry,
    () => [
      { family: 'IPv4', listeners: 3, creationFailures: failures },
      { family: 'IPv6', listeners: 1, creationFailures: 0 },
    ],
    () =>
      Promise.resolve([
        { family: 'IPv4', protocol: 'UDP', packets: 7 },
        { family: 'IPv4', protocol: 'SCTP', packets: 3 },
      ]),
  );
  failures = 2;
  const text = await registry.metrics();
  for (const line of [
    'kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv4"} 3',
    'kubeproxy_nftables_localhost_nodeport_listeners{ip_family="IPv6"} 1',
    'kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family="IPv4"} 2',
    'kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"} 7',
    'kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="SCTP"} 3',
    '# TYPE kubeproxy_nftables_localhost_nodeport_rejected_packets_total counter',
  ])
    t.true(text.includes(line), `${line}\n${text}`);
});
