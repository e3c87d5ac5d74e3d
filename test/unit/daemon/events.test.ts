// Kubernetes Events as upstream posts them (events.k8s.io/v1), through the real API client
// against the fake API server: the daemon's "Starting" birth cry on its Node, and a
// Warning on a Service whose health-check port cannot be opened.
import test from 'ava';
import { FakeClock, systemClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { buildSource } from '../../../src/daemon/build.ts';
import { Daemon } from '../../../src/daemon/daemon.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import type { ListenFn } from '../../../src/health/index.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { eventRecorderFromFlags, EventRecorder, microTime, nodeRef } from '../../../src/sources/index.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { ep, slice, svc } from '../model/helpers.ts';
import { config, eventually, fakeNftProxiers } from './fakes.ts';

test('an Event is an events.k8s.io/v1 object in the regarding object\'s namespace ("default" for a Node)', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const clock = new FakeClock(Date.parse('2026-11-26T18:00:00.123Z'));
  const rec = eventRecorderFromFlags({ master: api.url }, { logger: memoryLogger(), clock, hostname: 'worker-1' });
  rec.eventf(nodeRef('node-a'), 'Normal', 'Starting', 'StartKubeProxy', '');
  await rec.flush();
  t.is(api.events.length, 1);
  const { namespace, event, contentType } = api.events[0]!;
  t.is(namespace, 'default');
  t.regex(contentType, /application\/json/);
  t.like(event, {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { namespace: 'default' },
    eventTime: '2026-11-26T18:00:00.123000Z',
    reportingController: 'kube-proxy',
    reportingInstance: 'kube-proxy-worker-1',
    action: 'StartKubeProxy',
    reason: 'Starting',
    regarding: { kind: 'Node', name: 'node-a', uid: 'node-a' },
    note: '',
    type: 'Normal',
  });
  t.regex(String(event['metadata'].name), /^node-a\.[0-9a-f]+$/);
  t.is(microTime(0), '1970-01-01T00:00:00.000000Z');
});

test('a refused POST is logged, never thrown', async (t) => {
  const logger = memoryLogger();
  const rec = new EventRecorder({
    writer: { post: () => Promise.reject(new Error('403 Forbidden')) },
    clock: new FakeClock(),
    logger,
    hostname: 'h',
  });
  rec.eventf(nodeRef('n'), 'Normal', 'Starting', 'StartKubeProxy', '');
  await rec.flush();
  t.true(logger.records.some((r) => r.msg === 'Cannot post event'));
});

test('the daemon posts "Starting" on its Node, a Warning when a Service health check cannot listen; rest_client_* count its requests', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  api.create({
    apiVersion: 'v1',
    kind: 'Service',
    ...svc('lb', {
      clusterIP: '10.96.0.30',
      type: 'LoadBalancer',
      eTP: 'Local',
      hcPort: 32000,
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  });
  api.create({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    ...slice('lb-1', 'lb', [ep('10.244.1.2', { node: 'node-a' })]),
  });
  const cfg = {
    ...config(['--master', api.url, '--hostname-override', 'node-a', '--min-sync-period', '10ms']),
    healthzBindAddress: '',
    metricsBindAddress: '',
  };
  const logger = memoryLogger();
  const metrics = createMetrics({ processMetrics: false });
  const source = await buildSource(cfg, 'node-a', { logger, clock: systemClock, metrics });
  const events = eventRecorderFromFlags({ master: api.url }, { logger, clock: systemClock, hostname: 'worker-1' });
  const listen: ListenFn = () =>
    Promise.reject(
      Object.assign(new Error('listen EADDRINUSE: address already in use :::32000'), { code: 'EADDRINUSE' }),
    );
  const daemon = new Daemon({
    config: cfg,
    nodeName: 'node-a',
    families: ['IPv4'],
    logger,
    clock: systemClock,
    notifier: new RecordingNotifier({ clock: systemClock }),
    metrics,
    source,
    proxiers: fakeNftProxiers(['IPv4']),
    events,
    listen,
  });
  t.teardown(() => daemon.stop());
  await daemon.start();
  await daemon.ready;
  await eventually(() => api.events.length >= 2, 5000);
  await events.flush();
  const reasons = api.events.map(
    (e) => `${e.event['type']} ${e.event['reason']} ${e.event['regarding'].kind}/${e.event['regarding'].name}`,
  );
  t.true(reasons.includes('Normal Starting Node/node-a'), reasons.join('\n'));
  const warning = api.events.find((e) => e.event['reason'] === 'FailedToStartServiceHealthcheck');
  t.truthy(warning, reasons.join('\n'));
  t.is(warning!.namespace, 'default');
  t.like(warning!.event, {
    type: 'Warning',
    action: 'Listen',
    regarding: { kind: 'Service', namespace: 'default', name: 'lb' },
  });
  t.regex(
    String(warning!.event['note']),
    /node node-a failed to start healthcheck "default\/lb" on port 32000: listen EADDRINUSE/,
  );
  // The same API client's requests are counted as client-go's rest_client_* metrics.
  const text = await metrics.registry.metrics();
  const host = new URL(api.url).host;
  t.regex(
    text,
    new RegExp(`rest_client_requests_total\\{code="200",method="GET",host="${host.replaceAll('.', '\\.')}"\\} [1-9]`),
  );
  t.regex(text, /rest_client_request_duration_seconds_count\{verb="GET",host="[^"]+"\} [1-9]/);
});

test('--bind-address-hard-fail: a healthz server that cannot start is a FailedToStartProxierHealthcheck Warning, posted before start fails', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const cfg = {
    ...config(['--master', api.url, '--hostname-override', 'node-a', '--bind-address-hard-fail']),
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '',
  };
  const logger = memoryLogger();
  const metrics = createMetrics({ processMetrics: false });
  const source = await buildSource(cfg, 'node-a', { logger, clock: systemClock, metrics });
  const events = eventRecorderFromFlags({ master: api.url }, { logger, clock: systemClock, hostname: 'worker-1' });
  const listen: ListenFn = () => Promise.reject(new Error('listen EADDRINUSE: address already in use 127.0.0.1:10256'));
  const daemon = new Daemon({
    config: cfg,
    nodeName: 'node-a',
    families: ['IPv4'],
    logger,
    clock: systemClock,
    notifier: new RecordingNotifier({ clock: systemClock }),
    metrics,
    source,
    proxiers: fakeNftProxiers(['IPv4']),
    events,
    listen,
  });
  t.teardown(() => daemon.stop());
  await t.throwsAsync(daemon.start(), { message: /failed to start healthz server/ });
  t.is(api.events.length, 1, 'posted before start() rejected');
  t.like(api.events[0]!.event, {
    type: 'Warning',
    reason: 'FailedToStartProxierHealthcheck',
    action: 'StartKubeProxy',
    regarding: { kind: 'Node', name: 'node-a' },
  });
});
