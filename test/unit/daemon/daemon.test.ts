// The daemon's wiring with fakes: a test-driven source, nftables proxiers over FakeNft, a
// recording notifier, real HTTP servers on ephemeral ports.
import test from 'ava';
import { systemClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { Daemon } from '../../../src/daemon/daemon.ts';
import type { DaemonParts } from '../../../src/daemon/daemon.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import { nodeHttpListen } from '../../../src/health/index.ts';
import type { ListenFn } from '../../../src/health/index.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import type { IPFamily } from '../../../src/base/ip.ts';
import { ep, node, slice, svc } from '../model/helpers.ts';
import { config, eventually, fakeNftProxiers, FakeSource } from './fakes.ts';

const HC_PORT = 31000;

function setup(argv: string[] = [], families: IPFamily[] = ['IPv4']) {
  // Port 0 (ephemeral) is not a valid flag value, so it is set on the parsed config.
  const parsed = config(['--min-sync-period', '10ms', '--hostname-override', 'node-a', ...argv]);
  const cfg = {
    ...parsed,
    healthzBindAddress: argv.includes('--healthz-bind-address') ? parsed.healthzBindAddress : '127.0.0.1:0',
    metricsBindAddress: '127.0.0.1:0',
  };
  const logger = memoryLogger();
  const notifier = new RecordingNotifier({ clock: systemClock });
  const source = new FakeSource();
  const proxiers = fakeNftProxiers(families);
  const metrics = createMetrics({ processMetrics: false });
  // Service health checks ask for fixed ports; bind ephemeral ones and remember which.
  const hcPorts = new Map<number, number>();
  const listen: ListenFn = async (_host, port, handler) => {
    const hc = port === HC_PORT;
    const l = await nodeHttpListen('127.0.0.1', hc ? 0 : port, handler);
    if (hc) hcPorts.set(port, l.port);
    return l;
  };
  const parts: DaemonParts = {
    config: cfg,
    nodeName: 'node-a',
    families,
    logger,
    clock: systemClock,
    notifier,
    metrics,
    source,
    proxiers,
    listen,
  };
  const daemon = new Daemon(parts);
  return { cfg, logger, notifier, source, proxiers, metrics, daemon, hcPorts };
}

test('nothing is programmed before the source has listed; then one full sync, READY, healthz and metrics', async (t) => {
  const s = setup();
  t.teardown(() => s.daemon.stop());
  await s.daemon.start();
  const h = s.source.handler!;
  h.onService(undefined, svc('web', { clusterIP: '10.96.0.10' }));
  h.onEndpointSlice(undefined, slice('web-1', 'web', [ep('10.244.1.2'), ep('10.244.2.2')]));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(s.proxiers.nft.get('IPv4')!.generationId, 0, 'no sync before the sources synced');
  t.false(s.notifier.messages.includes('READY=1'));

  s.source.markSynced();
  await s.daemon.ready;
  const nft = s.proxiers.nft.get('IPv4')!;
  t.true(nft.generationId >= 1);
  t.truthy(nft.set('cluster-ips')?.elements.some((e) => e.key[0] === '10.96.0.10'));
  t.true(
    s.notifier.messages.some((m) => m.startsWith('STATUS=nftables: 1 services, 2 endpoints')),
    s.notifier.messages.join('\n'),
  );
  t.true(s.notifier.messages.includes('READY=1'));

  const hz = await fetch(`http://127.0.0.1:${s.daemon.healthzPort()}/healthz`);
  t.is(hz.status, 200);
  t.true((JSON.parse(await hz.text()) as { nodeEligible: boolean }).nodeEligible);
  const metrics = await (await fetch(`http://127.0.0.1:${s.daemon.metricsPort()}/metrics`)).text();
  t.regex(metrics, /kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]/);
  t.regex(metrics, /kubeproxy_sync_proxy_rules_service_changes_total 1/);
  t.regex(metrics, /kubeproxy_sync_proxy_rules_endpoint_changes_total 1/);
  t.is(await (await fetch(`http://127.0.0.1:${s.daemon.metricsPort()}/proxyMode`)).text(), 'nftables');
});

test('changes after READY are applied by partial syncs; stop leaves the rules and closes everything', async (t) => {
  const s = setup();
  await s.daemon.start();
  const h = s.source.handler!;
  h.onService(undefined, svc('web', { clusterIP: '10.96.0.10' }));
  s.source.markSynced();
  await s.daemon.ready;
  const nft = s.proxiers.nft.get('IPv4')!;
  h.onService(undefined, svc('api', { clusterIP: '10.96.0.20' }));
  await eventually(() => nft.set('cluster-ips')?.elements.some((e) => e.key[0] === '10.96.0.20') === true);
  t.true(s.notifier.messages.some((m) => m.endsWith('(partial)')));

  const port = s.daemon.healthzPort()!;
  await s.daemon.stop();
  await s.daemon.stop(); // idempotent
  t.true(s.notifier.messages.includes('STOPPING=1'));
  t.true(s.source.stopped);
  t.true(s.proxiers.closed);
  t.truthy(nft.set('cluster-ips')?.elements.length, 'the rules stay in place');
  await t.throwsAsync(fetch(`http://127.0.0.1:${port}/healthz`), undefined, 'the healthz server is closed');
});

test('a Local LoadBalancer Service gets a health-check server answering with its local endpoints', async (t) => {
  const s = setup();
  t.teardown(() => s.daemon.stop());
  await s.daemon.start();
  const h = s.source.handler!;
  h.onService(
    undefined,
    svc('lb', {
      clusterIP: '10.96.0.30',
      type: 'LoadBalancer',
      eTP: 'Local',
      hcPort: HC_PORT,
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  h.onEndpointSlice(
    undefined,
    slice('lb-1', 'lb', [ep('10.244.1.2', { node: 'node-a' }), ep('10.244.2.2', { node: 'node-b' })]),
  );
  s.source.markSynced();
  await s.daemon.ready;
  await eventually(() => s.hcPorts.has(HC_PORT));
  const res = await fetch(`http://127.0.0.1:${s.hcPorts.get(HC_PORT)}/`);
  t.is(res.status, 200);
  const body = JSON.parse(await res.text()) as { service: { namespace: string; name: string }; localEndpoints: number };
  t.deepEqual(body.service, { namespace: 'default', name: 'lb' });
  t.is(body.localEndpoints, 1);

  // The local endpoint goes away: 503.
  h.onEndpointSlice(slice('lb-1', 'lb', []), slice('lb-1', 'lb', [ep('10.244.2.2', { node: 'node-b' })]));
  await eventually(() => s.daemon.healthChecks.status().get('default/lb')?.localEndpoints === 0);
  t.is((await fetch(`http://127.0.0.1:${s.hcPorts.get(HC_PORT)}/`)).status, 503);
  const metrics = await s.metrics.registry.getSingleMetricAsString(
    'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
  );
  t.regex(metrics, /traffic_policy="external"\} 1/);
});

test('the Node drives healthz eligibility: a node tainted for deletion answers 503', async (t) => {
  const s = setup();
  t.teardown(() => s.daemon.stop());
  await s.daemon.start();
  const h = s.source.handler!;
  s.source.markSynced();
  await s.daemon.ready;
  const n = node('node-a', { internal: ['192.168.1.10'] });
  h.onNode(n);
  t.is((await fetch(`http://127.0.0.1:${s.daemon.healthzPort()}/healthz`)).status, 200);
  h.onNode({ ...n, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } });
  t.is((await fetch(`http://127.0.0.1:${s.daemon.healthzPort()}/healthz`)).status, 503);
  t.is((await fetch(`http://127.0.0.1:${s.daemon.healthzPort()}/livez`)).status, 200, 'livez ignores the Node');
});

test('dual-stack cluster CIDRs: one tracker and one proxier per family, each programmed', async (t) => {
  const s = setup(['--cluster-cidr', '10.244.0.0/16,fd00:10:244::/48'], ['IPv4', 'IPv6']);
  t.teardown(() => s.daemon.stop());
  await s.daemon.start();
  const h = s.source.handler!;
  h.onService(undefined, svc('web', { clusterIPs: ['10.96.0.10', 'fd00:10:96::10'] }));
  h.onEndpointSlice(undefined, slice('web-4', 'web', [ep('10.244.1.2')]));
  h.onEndpointSlice(undefined, slice('web-6', 'web', [ep('fd00:10:244:1::2')], { addressType: 'IPv6' }));
  s.source.markSynced();
  await s.daemon.ready;
  t.deepEqual([...s.daemon.trackers.keys()], ['IPv4', 'IPv6']);
  t.truthy(
    s.proxiers.nft
      .get('IPv4')!
      .set('cluster-ips')
      ?.elements.some((e) => e.key[0] === '10.96.0.10'),
  );
  t.truthy(
    s.proxiers.nft
      .get('IPv6')!
      .set('cluster-ips')
      ?.elements.some((e) => e.key[0] === 'fd00:10:96::10'),
  );
  t.true(
    s.notifier.messages.some((m) => m.startsWith('STATUS=nftables: 2 services, 2 endpoints')),
    s.notifier.messages.join('\n'),
  );
});

test('a part that cannot start stops what started and rejects', async (t) => {
  const s = setup();
  s.proxiers.init = () => Promise.reject(new Error('IPVS mode is unavailable: ENOENT'));
  await t.throwsAsync(s.daemon.start(), { message: /IPVS mode is unavailable/ });
  t.true(s.proxiers.closed);
  t.true(s.source.stopped);
});

test('bindAddressHardFail: a taken healthz port fails the start', async (t) => {
  const taken = await nodeHttpListen('127.0.0.1', 0, () => {});
  t.teardown(() => taken.close());
  const s = setup(['--healthz-bind-address', `127.0.0.1:${taken.port}`, '--bind-address-hard-fail']);
  t.teardown(() => s.daemon.stop());
  await t.throwsAsync(s.daemon.start(), { message: /failed to start healthz server/ });
  t.true(s.proxiers.closed);
});
