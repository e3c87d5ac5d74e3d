// API mode end to end in-process: the real KubernetesSource (--master) against the fake API
// server, the daemon's trackers and nftables proxiers on FakeNft.
import test from 'ava';
import { systemClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { buildSource } from '../../../src/daemon/build.ts';
import { Daemon } from '../../../src/daemon/daemon.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { ep, node, slice, svc } from '../model/helpers.ts';
import { config, eventually, fakeNftProxiers } from './fakes.ts';

test('--master: Services, EndpointSlices and the Node come from the API server and are programmed', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create({ apiVersion: 'v1', kind: 'Service', ...svc('web', { clusterIP: '10.96.0.10' }) });
  api.create({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    ...slice('web-1', 'web', [ep('10.244.1.2')]),
  });
  api.create({ apiVersion: 'v1', kind: 'Node', ...node('node-a', { internal: ['192.168.1.10'] }) });

  const parsed = config([
    '--proxy-mode',
    'nftables',
    '--master',
    api.url,
    '--hostname-override',
    'node-a',
    '--min-sync-period',
    '10ms',
    '--cluster-cidr',
    '10.244.0.0/16',
  ]);
  const cfg = { ...parsed, healthzBindAddress: '', metricsBindAddress: '' };
  const logger = memoryLogger();
  const metrics = createMetrics({ processMetrics: false });
  const source = await buildSource(cfg, 'node-a', { logger, clock: systemClock, metrics });
  const proxiers = fakeNftProxiers(['IPv4']);
  const notifier = new RecordingNotifier({ clock: systemClock });
  const daemon = new Daemon({
    config: cfg,
    nodeName: 'node-a',
    families: ['IPv4'],
    logger,
    clock: systemClock,
    notifier,
    metrics,
    source,
    proxiers,
  });
  t.teardown(() => daemon.stop());
  await daemon.start();
  await daemon.ready;
  const nft = proxiers.nft.get('IPv4')!;
  t.truthy(nft.set('cluster-ips')?.elements.some((e) => e.key[0] === '10.96.0.10'));
  // nodePortAddresses "primary" (the default) resolves to the Node's InternalIP.
  await eventually(() => nft.set('nodeport-ips')?.elements.some((e) => e.key[0] === '192.168.1.10') === true);

  api.create({ apiVersion: 'v1', kind: 'Service', ...svc('api', { clusterIP: '10.96.0.20' }) });
  await eventually(() => nft.set('cluster-ips')?.elements.some((e) => e.key[0] === '10.96.0.20') === true, 5000);
  api.remove('Service', 'default/web');
  await eventually(() => nft.set('cluster-ips')?.elements.some((e) => e.key[0] === '10.96.0.10') === false, 5000);
  t.pass();
});
