// The userspace mode's data-path metrics, read from the proxy sockets' counters at scrape time.
import test from 'ava';
import { Registry } from 'prom-client';
import { registerUserspaceMetrics } from '../../../src/metrics/index.ts';
import { listenIPOf, sampleOf } from '../../../src/daemon/modes/userspace.ts';

const port = (accepted: number, failedOver: number, refused: number, bytesIn: number, bytesOut: number) => ({
  accepted,
  failedOver,
  refused,
  overBudget: refused * 10,
  bytesIn,
  bytesOut,
  active: 0,
});

test('per-port counters are summed per family and exported on each scrape', async (t) => {
  const registry = new Registry();
  let stats = {
    activeConnections: 3,
    activeUdpAssociations: 1,
    perPort: new Map([
      ['default/a:', port(10, 1, 2, 100, 200)],
      ['default/b:p', port(5, 0, 1, 50, 60)],
    ]),
    retiredOther: port(0, 0, 0, 0, 0),
  };
  registerUserspaceMetrics(
    registry,
    () => [sampleOf('IPv4', stats)],
    () => ({ limit: 14_976, inUse: 7 }),
  );
  const text = await registry.metrics();
  for (const line of [
    'kubeproxyts_userspace_active_connections{ip_family="IPv4"} 3',
    'kubeproxyts_userspace_active_udp_associations{ip_family="IPv4"} 1',
    'kubeproxyts_userspace_accepted_connections_total{ip_family="IPv4"} 15',
    'kubeproxyts_userspace_failed_over_connections_total{ip_family="IPv4"} 1',
    'kubeproxyts_userspace_refused_connections_total{ip_family="IPv4"} 3',
    'kubeproxyts_userspace_over_budget_connections_total{ip_family="IPv4"} 30',
    'kubeproxyts_userspace_descriptor_budget 14976',
    'kubeproxyts_userspace_descriptors_in_use 7',
    'kubeproxyts_userspace_bytes_total{ip_family="IPv4",direction="in"} 150',
    'kubeproxyts_userspace_bytes_total{ip_family="IPv4",direction="out"} 260',
  ])
    t.true(text.split('\n').includes(line), `${line}\n${text}`);
  // default/b:p retired and its name folded into the ports gone: the sum goes on from there.
  stats = {
    ...stats,
    perPort: new Map([['default/a:', port(11, 1, 2, 100, 200)]]),
    retiredOther: port(5, 0, 1, 50, 60),
  };
  t.true((await registry.metrics()).includes('kubeproxyts_userspace_accepted_connections_total{ip_family="IPv4"} 16'));
});

test('the sockets bind --bind-address when it is a specific address of the family, else any', (t) => {
  t.is(listenIPOf('0.0.0.0', 'IPv4'), '0.0.0.0');
  t.is(listenIPOf('0.0.0.0', 'IPv6'), '::');
  t.is(listenIPOf('10.0.0.5', 'IPv4'), '10.0.0.5');
  t.is(listenIPOf('10.0.0.5', 'IPv6'), '::');
  t.is(listenIPOf('fd00::5', 'IPv6'), 'fd00::5');
  t.is(listenIPOf('::', 'IPv4'), '0.0.0.0');
});
