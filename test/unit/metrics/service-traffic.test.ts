// The opt-in per-Service traffic metrics: read once per scrape, labelled from the model, a
// failed read leaves them empty (and is reported) without failing /metrics.
import test from 'ava';
import { Registry } from 'prom-client';
import type { IPFamily } from '../../../src/base/ip.ts';
import { readServiceTraffic } from '../../../src/daemon/service-traffic.ts';
import type { ProxierSet } from '../../../src/daemon/modes/index.ts';
import { registerServiceTraffic } from '../../../src/metrics/service-traffic.ts';
import type { ChangeTracker, ServicePortId } from '../../../src/model/index.ts';
import type { Proxier } from '../../../src/proxier/types.ts';
import { ep, newTracker, slice, svc } from '../model/helpers.ts';

test('the counters are read once per scrape and exported with their labels', async (t) => {
  const registry = new Registry();
  let reads = 0;
  let now = 0;
  registerServiceTraffic(
    registry,
    async () => {
      reads++;
      return [
        {
          namespace: 'default',
          service: 'web',
          port: 'http',
          protocol: 'TCP',
          frontend: 'cluster-ip',
          packets: 10 * reads,
          bytes: 600 * reads,
          connections: 2 * reads,
        },
      ];
    },
    { now: () => now },
  );
  const first = await registry.metrics();
  t.is(reads, 1);
  t.regex(
    first,
    /kubeproxyts_service_packets_total\{namespace="default",service="web",port="http",protocol="TCP",frontend="cluster-ip"\} 10/,
  );
  t.regex(first, /kubeproxyts_service_bytes_total\{.*\} 600/);
  t.regex(first, /kubeproxyts_service_connections_total\{.*\} 2/);
  now += 5000;
  t.regex(await registry.metrics(), /kubeproxyts_service_packets_total\{.*\} 20/);
  t.is(reads, 2);
});

test('a failed read: the metrics are empty for that scrape, the error reported', async (t) => {
  const registry = new Registry();
  const errors: unknown[] = [];
  registerServiceTraffic(registry, () => Promise.reject(new Error('EPERM')), { onError: (e) => errors.push(e) });
  const text = await registry.metrics();
  t.notRegex(text, /kubeproxyts_service_packets_total\{/);
  t.true(errors.length >= 1);
});

test('samples get the Service port names from the model; ports gone since are left out', async (t) => {
  const { t: tracker } = newTracker();
  tracker.onService(undefined, svc('web', { ports: [{ name: '', protocol: 'UDP', port: 53 }] }));
  tracker.onEndpointSlice(
    slice('web-1', 'web', [ep('10.244.1.1')], { ports: [{ name: '', protocol: 'UDP', port: 5353 }] }),
    false,
  );
  tracker.checkout();
  const proxier = {
    mode: 'ipvs',
    sync: () => Promise.reject(new Error('unused')),
    cleanup: () => Promise.resolve(),
    trafficCounters: async () => [
      { id: 'default/web:/UDP' as ServicePortId, frontend: 'cluster-ip', packets: 3, bytes: 120, connections: 3 },
      { id: 'default/gone:/TCP' as ServicePortId, frontend: 'cluster-ip', packets: 1, bytes: 1 },
    ],
  } as Proxier;
  const set: ProxierSet = {
    mode: 'ipvs',
    proxiers: new Map<IPFamily, Proxier>([['IPv4', proxier]]),
    init: () => Promise.resolve(),
    close: () => undefined,
  };
  const samples = await readServiceTraffic(new Map<IPFamily, ChangeTracker>([['IPv4', tracker]]), set);
  t.deepEqual(samples, [
    {
      namespace: 'default',
      service: 'web',
      port: '53',
      protocol: 'UDP',
      frontend: 'cluster-ip',
      packets: 3,
      bytes: 120,
      connections: 3,
    },
  ]);
});
