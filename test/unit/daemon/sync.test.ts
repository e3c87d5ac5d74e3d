// One daemon sync over real trackers and nftables proxiers on FakeNft.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import type { ConntrackFlusher } from '../../../src/conntrack/index.ts';
import { makeSync, mergeHealthChecks, noLocalEndpoints } from '../../../src/daemon/sync.ts';
import type { FamilyPipeline, StaleFlowSink } from '../../../src/daemon/sync.ts';
import type { ServiceHealthEntry } from '../../../src/health/index.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { StaleTarget } from '../../../src/model/index.ts';
import { NetlinkError } from '../../../src/netlink/core/index.ts';
import type { Proxier } from '../../../src/proxier/types.ts';
import { ep, slice, svc } from '../model/helpers.ts';
import { fakeNftProxiers } from './fakes.ts';

function setup() {
  const clock = new FakeClock(Date.parse('2026-11-23T04:00:00Z'));
  const logger = memoryLogger();
  const tracker = new ChangeTracker(
    { nodeName: 'node-a', family: 'IPv4', clusterCIDRs: ['10.244.0.0/16'] },
    { logger, clock },
  );
  const set = fakeNftProxiers(['IPv4']);
  let fail = false;
  const real = set.proxiers.get('IPv4')!;
  const proxier: Proxier = {
    mode: 'nftables',
    sync: (d, c, s) =>
      fail ? Promise.reject(new NetlinkError('add element ip kube-proxy-ts service-ips', 22)) : real.sync(d, c, s),
    cleanup: () => real.cleanup(),
  };
  const pipelines: FamilyPipeline[] = [{ family: 'IPv4', tracker, proxier }];
  const metrics = createMetrics({ processMetrics: false });
  const health: Map<string, ServiceHealthEntry>[] = [];
  const calls: string[] = [];
  const held: StaleTarget[] = [];
  const scheduled: StaleTarget[] = [];
  const staleFlows: StaleFlowSink = {
    reconcile: (d) => void calls.push(`reconcile ${d.family}`),
    schedule: (targets) => {
      calls.push(`schedule ${targets.length}`);
      scheduled.push(...targets);
    },
    hold: (targets) => {
      calls.push(`hold ${targets.length}`);
      held.push(...targets);
    },
  };
  const sync = makeSync({
    pipelines,
    metrics,
    logger,
    now: () => clock.now(),
    healthChecks: (w) => {
      health.push(new Map(w));
      return Promise.resolve();
    },
    staleFlows,
  });
  const signal = new AbortController().signal;
  const run = (full = false) => sync({ full, reason: 'kick', signal });
  return {
    clock,
    tracker,
    nft: set.nft.get('IPv4')!,
    metrics,
    health,
    calls,
    held,
    scheduled,
    run,
    setFail: (v: boolean) => (fail = v),
  };
}

test('a sync programs the checked-out state and reports counts and health checks', async (t) => {
  const s = setup();
  s.tracker.onService(undefined, svc('web', { clusterIP: '10.96.0.10' }));
  s.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.2'), ep('10.244.2.2')]), false);
  s.tracker.onService(
    undefined,
    svc('lb', {
      clusterIP: '10.96.0.30',
      type: 'LoadBalancer',
      eTP: 'Local',
      hcPort: 31000,
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  s.tracker.onEndpointSlice(slice('lb-1', 'lb', [ep('10.244.1.3', { node: 'node-a' })]), false);
  const out = await s.run(true);
  t.like(out, { services: 2, endpoints: 3 });
  // Where the time went, for the sync log line.
  t.true(out.planMs! >= 0 && out.kernelMs! >= 0, JSON.stringify(out));
  t.truthy(s.nft.set('service-ips')?.elements.some((e) => e.key[0] === '10.96.0.10'));
  t.deepEqual([...s.health.at(-1)!], [['default/lb', { port: 31000, localEndpoints: 1 }]]);
});

test('network-programming latency is observed from trigger times after a successful sync', async (t) => {
  const s = setup();
  await s.run(true);
  s.tracker.onService(undefined, svc('web', { clusterIP: '10.96.0.10' }));
  s.clock.advance(10);
  const trigger = new Date(s.clock.now()).toISOString();
  s.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.2')], { trigger }), false);
  s.clock.advance(1500);
  await s.run();
  const h = await s.metrics.registry.getSingleMetricAsString('kubeproxy_network_programming_duration_seconds');
  t.regex(h, /kubeproxy_network_programming_duration_seconds_count\{ip_family="IPv4"\} 1/);
  t.regex(h, /kubeproxy_network_programming_duration_seconds_sum\{ip_family="IPv4"\} 1\.5/);
});

test('the conntrack seam: reconcile after the first commit, schedule after each, hold for a failed sync', async (t) => {
  const s = setup();
  const dns = svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'p', protocol: 'UDP', port: 53 }] });
  const udpSlice = (ips: string[]) =>
    slice(
      'dns-1',
      'dns',
      ips.map((ip) => ep(ip)),
      { ports: [{ name: 'p', protocol: 'UDP', port: 53 }] },
    );
  s.tracker.onService(undefined, dns);
  s.tracker.onEndpointSlice(udpSlice(['10.244.1.2', '10.244.2.2']), false);
  await s.run(true);
  t.deepEqual(s.calls, ['reconcile IPv4', 'schedule 0']);
  s.tracker.onEndpointSlice(udpSlice(['10.244.1.2']), false);
  s.setFail(true);
  await t.throwsAsync(s.run(), { message: /service-ips: EINVAL/ });
  t.regex(
    await s.metrics.registry.getSingleMetricAsString('kubeproxyts_netlink_errors_total'),
    /subsystem="nftables",op="add element"\} 1/,
  );
  t.deepEqual(
    s.calls.slice(2),
    ['hold 1'],
    'a failed sync holds its targets: nothing is deleted before the rules commit',
  );
  t.like(s.held[0], { reason: 'endpoint-removed', endpointIP: '10.244.2.2', port: 53 });
  s.setFail(false);
  await s.run(true);
  t.deepEqual(s.calls.slice(3), ['schedule 0'], 'the next commit schedules (the flusher retries held targets then)');
});

test('noLocalEndpoints and mergeHealthChecks', (t) => {
  const s = setup();
  s.tracker.onService(
    undefined,
    svc('lb', {
      clusterIP: '10.96.0.30',
      type: 'LoadBalancer',
      eTP: 'Local',
      hcPort: 31000,
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  s.tracker.onEndpointSlice(slice('lb-1', 'lb', [ep('10.244.1.3', { node: 'node-b' })]), false);
  const twoPorts = [
    { name: 'a', protocol: 'TCP', port: 80 },
    { name: 'b', protocol: 'TCP', port: 81 },
  ];
  s.tracker.onService(undefined, svc('itp', { clusterIP: '10.96.0.31', iTP: 'Local', ports: twoPorts }));
  s.tracker.onEndpointSlice(slice('itp-1', 'itp', [ep('10.244.1.4', { node: 'node-b' })], { ports: twoPorts }), false);
  s.tracker.onService(undefined, svc('empty', { clusterIP: '10.96.0.32', iTP: 'Local' }));
  const { desired } = s.tracker.checkout();
  t.deepEqual(noLocalEndpoints(desired), { internal: 1, external: 1 }, 'a Service without any endpoint does not count');
  t.deepEqual(
    noLocalEndpoints(desired, true),
    { internal: 2, external: 1 },
    'per service port (upstream nftables): both ports of itp',
  );
  const merged = mergeHealthChecks([desired, desired]);
  t.deepEqual(merged.get('default/lb'), { port: 31000, localEndpoints: 0 });
});

test('the ConntrackFlusher of issue 6 fits the seam (checked by tsc)', (t) => {
  const fits: ConntrackFlusher extends StaleFlowSink ? true : false = true;
  t.true(fits);
});

test('a change a running sync takes answers the kicks before it; a family still waiting keeps them due', async (t) => {
  const clock = new FakeClock(0);
  const logger = memoryLogger();
  const tracker = (family: 'IPv4' | 'IPv6') =>
    new ChangeTracker({ nodeName: 'node-a', family, clusterCIDRs: [] }, { logger, clock });
  const v4 = tracker('IPv4');
  const v6 = tracker('IPv6');
  const events: string[] = [];
  // A proxier that, while it syncs, sees a change arrive (for both families) and takes its own.
  const taking = (own: ChangeTracker): Proxier => ({
    mode: 'nftables',
    sync: (_d, _c, _s, arriving) => {
      v4.onService(undefined, svc(`a${events.length}`, { clusterIP: '10.96.0.20' }));
      v6.onService(undefined, svc(`b${events.length}`, { clusterIP: 'fd00::20' }));
      events.push(`${own === v4 ? 'v4' : 'v6'} took ${arriving?.take()?.services.size ?? 0}`);
      return Promise.resolve({ full: false, servicesChanged: 0, kernelMs: 0, planMs: 0, errors: [] });
    },
    cleanup: () => Promise.resolve(),
  });
  const sync = makeSync({
    pipelines: [
      { family: 'IPv4', tracker: v4, proxier: taking(v4) },
      { family: 'IPv6', tracker: v6, proxier: taking(v6) },
    ],
    logger,
    now: () => clock.now(),
    healthChecks: () => Promise.resolve(),
  });
  let answered = 0;
  await sync({ full: false, reason: 'kick', signal: new AbortController().signal, answered: () => answered++ });
  // IPv4 took its change while IPv6's was still waiting: not answered. IPv6 took its own, but
  // the IPv4 one that arrived meanwhile waits: not answered either.
  t.deepEqual(events, ['v4 took 1', 'v6 took 1']);
  t.is(answered, 0);
  // One family: everything kicked before the take is in it.
  const one = makeSync({
    pipelines: [{ family: 'IPv4', tracker: v4, proxier: taking(v4) }],
    logger,
    now: () => clock.now(),
    healthChecks: () => Promise.resolve(),
  });
  v6.checkout();
  await one({ full: false, reason: 'kick', signal: new AbortController().signal, answered: () => answered++ });
  t.is(answered, 1);
});
