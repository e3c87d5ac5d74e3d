import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { formatGoTime } from '../../../src/health/go-time.ts';
import { ProxyHealth, startProxyHealthServer, TO_BE_DELETED_TAINT } from '../../../src/health/proxy-health.ts';

const SYNC_PERIOD = 30_000;

function setup() {
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 3, 0, 0));
  const counts = { healthz: new Map<number, number>(), livez: new Map<number, number>() };
  const health = new ProxyHealth({
    clock,
    healthTimeoutMs: 2 * SYNC_PERIOD,
    counters: {
      healthz: (c) => counts.healthz.set(c, (counts.healthz.get(c) ?? 0) + 1),
      livez: (c) => counts.livez.set(c, (counts.livez.get(c) ?? 0) + 1),
    },
  });
  return { clock, health, counts };
}

async function get(port: number, path: string): Promise<{ status: number; type: string | null; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
}

test('formatGoTime writes Go time.Time.String() form in UTC', (t) => {
  t.is(formatGoTime(Date.UTC(2026, 10, 23, 3, 4, 5, 120)), '2026-11-23 03:04:05.12 +0000 UTC');
  t.is(formatGoTime(Date.UTC(2026, 0, 2, 3, 4, 5)), '2026-01-02 03:04:05 +0000 UTC');
  t.is(formatGoTime(undefined), '0001-01-01 00:00:00 +0000 UTC');
});

test('healthy while starting up, before any update', (t) => {
  const { health } = setup();
  t.true(health.isHealthy());
  t.is(health.healthz().code, 200);
  t.is(health.livez().code, 200);
});

test('an update queued for longer than healthTimeout without a sync makes it unhealthy', (t) => {
  const { clock, health } = setup();
  health.updated('IPv4');
  clock.advance(1000);
  health.queuedUpdate('IPv4');
  clock.advance(2 * SYNC_PERIOD - 1);
  t.true(health.isHealthy(), 'not late yet');
  health.queuedUpdate('IPv4'); // a later change does not reset the oldest one
  clock.advance(1);
  t.false(health.isHealthy());
  t.is(health.healthz().code, 503);
  t.is(health.livez().code, 503);
  health.updated('IPv4');
  t.true(health.isHealthy());
});

test('with no queued change, time alone never makes it unhealthy', (t) => {
  const { clock, health } = setup();
  health.updated('IPv4');
  clock.advance(10 * SYNC_PERIOD);
  t.true(health.isHealthy());
});

test('dual stack: one family late is enough to be unhealthy', (t) => {
  const { clock, health } = setup();
  health.updated('IPv4');
  health.updated('IPv6');
  health.queuedUpdate('IPv6');
  clock.advance(2 * SYNC_PERIOD);
  t.false(health.isHealthy());
  health.updated('IPv6');
  t.true(health.isHealthy());
});

test('/healthz fails for a node being deleted or tainted by the autoscaler; /livez does not', (t) => {
  const { health } = setup();
  health.updated('IPv4');
  health.syncNode({ metadata: { name: 'n1', deletionTimestamp: '2026-11-23T03:00:00Z' } });
  t.false(health.nodeEligible);
  t.is(health.healthz().code, 503);
  t.is(health.livez().code, 200);
  health.syncNode({
    metadata: { name: 'n1' },
    spec: { taints: [{ key: TO_BE_DELETED_TAINT, value: '1700000000', effect: 'NoSchedule' }] },
  });
  t.is(health.healthz().code, 503);
  health.syncNode({ metadata: { name: 'n1' }, spec: { taints: [{ key: 'other', effect: 'NoSchedule' }] } });
  t.true(health.nodeEligible);
  t.is(health.healthz().code, 200);
  health.nodeGone();
  t.is(health.healthz().code, 503);
  t.is(health.livez().code, 200);
});

test('over HTTP: /healthz and /livez bodies, codes, headers and counts', async (t) => {
  const { clock, health, counts } = setup();
  const server = await startProxyHealthServer({ address: '127.0.0.1:0', health });
  t.teardown(() => server.close());
  health.updated('IPv4');
  const now = formatGoTime(clock.now());

  const ok = await get(server.port, '/healthz');
  t.is(ok.status, 200);
  t.is(ok.type, 'application/json');
  t.is(ok.body, `{"lastUpdated": "${now}","currentTime": "${now}", "nodeEligible": true}`);
  const body = JSON.parse(ok.body) as { lastUpdated: string; currentTime: string; nodeEligible: boolean };
  t.true(body.nodeEligible);

  const live = await get(server.port, '/livez');
  t.is(live.status, 200);
  t.is(live.body, `{"lastUpdated": "${now}","currentTime": "${now}"}`);

  const updatedAt = formatGoTime(clock.now());
  health.queuedUpdate('IPv4');
  clock.advance(2 * SYNC_PERIOD + 500);
  const bad = await get(server.port, '/healthz');
  t.is(bad.status, 503);
  t.deepEqual(JSON.parse(bad.body), {
    lastUpdated: updatedAt,
    currentTime: formatGoTime(clock.now()),
    nodeEligible: true,
  });
  t.is((await get(server.port, '/livez')).status, 503);

  t.is((await get(server.port, '/other')).status, 404);
  t.deepEqual(
    [...counts.healthz],
    [
      [200, 1],
      [503, 1],
    ],
  );
  t.deepEqual(
    [...counts.livez],
    [
      [200, 1],
      [503, 1],
    ],
  );
});
