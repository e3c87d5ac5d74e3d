import { EventEmitter } from 'node:events';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import { installProcessHandlers } from '../../../src/daemon/signals.ts';
import { SyncLoop, type SyncRequest } from '../../../src/daemon/sync-loop.ts';
import { ProxyHealth } from '../../../src/health/proxy-health.ts';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(
  opts: {
    fail?: (req: SyncRequest) => boolean;
    hang?: boolean | (() => boolean);
    fullSyncPeriodMs?: number;
    periodicFull?: boolean;
  } = {},
) {
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 3, 0, 0));
  const logger = memoryLogger();
  const notifier = new RecordingNotifier({ clock, watchdogMs: 20_000 });
  const health = new ProxyHealth({ clock, healthTimeoutMs: 60_000 });
  const metrics = createMetrics({ processMetrics: false, mode: 'nftables', groups: MODES.nftables.metrics.groups });
  const requests: { full: boolean; reason: string; at: number }[] = [];
  const t0 = clock.now();
  let releaseSources!: () => void;
  const sourcesSynced = new Promise<void>((resolve) => (releaseSources = resolve));
  const loop = new SyncLoop({
    mode: 'nftables',
    syncPeriodMs: 30_000,
    minSyncPeriodMs: 1_000,
    retryIntervalMs: 2_000,
    ...(opts.fullSyncPeriodMs !== undefined ? { fullSyncPeriodMs: opts.fullSyncPeriodMs } : {}),
    ...(opts.periodicFull !== undefined ? { periodicFull: opts.periodicFull } : {}),
    families: ['IPv4'],
    clock,
    health,
    notifier,
    metrics,
    logger,
    sync: (req) => {
      requests.push({ full: req.full, reason: req.reason, at: clock.now() - t0 });
      if (typeof opts.hang === 'function' ? opts.hang() : opts.hang) return new Promise(() => {});
      if (opts.fail?.(req)) return Promise.reject(new Error('nft batch: EINVAL'));
      return Promise.resolve({ services: 12, endpoints: 30, planMs: 3.4, kernelMs: 5.6 });
    },
  });
  const advance = async (ms: number) => {
    await flush();
    for (let i = 0; i < ms; i += 10) {
      clock.advance(10);
      await flush();
    }
  };
  return { clock, logger, notifier, health, metrics, requests, loop, releaseSources, sourcesSynced, advance };
}

const value = async (
  m: ReturnType<typeof createMetrics>,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> => {
  const json = await m.registry.getSingleMetric(name)?.get();
  return json?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
};

test('no sync before the sources have listed everything; then a full one, READY and STATUS', async (t) => {
  const s = setup();
  s.loop.start(s.sourcesSynced);
  s.loop.changed();
  await s.advance(60_000);
  t.deepEqual(s.requests, []);
  t.deepEqual(s.notifier.messages, ['STATUS=nftables: waiting for Services and EndpointSlices to be listed']);

  s.releaseSources();
  await s.advance(10);
  await s.loop.ready;
  t.deepEqual(s.requests, [{ full: true, reason: 'kick', at: 60_000 }]);
  t.deepEqual(s.notifier.messages.slice(2), ['READY=1', 'WATCHDOG=1']);
  t.regex(
    s.notifier.messages[1]!,
    /^STATUS=nftables: 12 services, 30 endpoints, last sync 2026-11-23T03:01:00\.\d+Z \(full\)$/,
  );
  const fullCount = (await s.metrics.syncFullProxyRulesDuration.get()).values.find(
    (v) => v.metricName === 'kubeproxy_sync_full_proxy_rules_duration_seconds_count',
  );
  t.is(fullCount?.value, 1);
  const partialCount = (await s.metrics.syncPartialProxyRulesDuration.get()).values.find(
    (v) => v.metricName === 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count',
  );
  t.is(partialCount?.value ?? 0, 0);
  const last = await value(s.metrics, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', { ip_family: 'IPv4' });
  t.true(last !== undefined && Math.abs(last - Date.UTC(2026, 10, 23, 3, 1, 0) / 1000) < 0.1);
});

test('changes after start give partial syncs, bounded by minSyncPeriod (burst 2); the periodic one is partial too', async (t) => {
  const s = setup();
  s.loop.start(Promise.resolve());
  await s.advance(10);
  for (let i = 0; i < 5; i++) {
    s.loop.changed();
    await s.advance(100);
  }
  await s.advance(35_000);
  t.deepEqual(
    s.requests.map((r) => [r.full, r.reason]),
    [
      [true, 'kick'],
      [false, 'kick'],
      [false, 'kick'],
      [false, 'periodic'],
    ],
  );
  // Upstream's burstSyncs: the first change runs at once, the rest wait for a token.
  t.true(s.requests[1]!.at < s.requests[0]!.at + 1_000);
  t.true(s.requests[2]!.at >= s.requests[0]!.at + 1_000);
  // The sync log says where the time went and how long the oldest change waited.
  const synced = s.logger.records.filter((r) => r.msg === 'Synced proxy rules').map((r) => r.fields);
  t.like(synced[2], { full: false, reason: 'kick', planMs: 3, kernelMs: 6 });
  t.true(
    (synced[2]!.waitedMs as number) >= 590,
    `waited ${String(synced[2]!.waitedMs)} ms (from the change at ~110 ms)`,
  );
  t.true(s.notifier.messages.some((m) => m.endsWith('(partial)')));
  t.is(
    (await value(s.metrics, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', { ip_family: 'IPv4' })) !==
      undefined,
    true,
  );
});

test('a full sync once the full-sync period has passed since the last one, periodic or kicked', async (t) => {
  const s = setup({ fullSyncPeriodMs: 100_000 });
  s.loop.start(Promise.resolve());
  await s.advance(10);
  await s.advance(95_000); // periodic runs at 30, 60 and 90 s: partial
  s.loop.changed();
  await s.advance(1_000); // a kick at 95 s: partial
  await s.advance(40_000); // the periodic run at 125.x s is the first past 100 s: full
  s.loop.changed();
  await s.advance(1_500); // and the clock starts again from it
  t.deepEqual(
    s.requests.map((r) => [r.full, r.reason]),
    [
      [true, 'kick'],
      [false, 'periodic'],
      [false, 'periodic'],
      [false, 'periodic'],
      [false, 'kick'],
      [true, 'periodic'],
      [false, 'kick'],
    ],
  );
});

test('the full sync the period asks for, in a run a change kicked: that change goes in first, partially', async (t) => {
  const s = setup({ fullSyncPeriodMs: 100_000 });
  s.loop.start(Promise.resolve());
  await s.advance(10);
  await s.advance(95_000); // periodic runs at 30, 60 and 90 s: partial
  await s.advance(10_000);
  s.loop.changed(); // at 105 s, past the period: kicked
  await s.advance(1_000);
  s.loop.repair('a foreign change'); // a repair's full sync takes what is pending with it
  await s.advance(1_500);
  t.deepEqual(
    s.requests.map((r) => [r.full, r.reason]),
    [
      [true, 'kick'],
      [false, 'periodic'],
      [false, 'periodic'],
      [false, 'periodic'],
      [false, 'kick'],
      [true, 'kick'],
      [true, 'kick'],
    ],
  );
});

test('periodicFull: every periodic run is full (modes whose kernel state is never announced)', async (t) => {
  const s = setup({ periodicFull: true });
  s.loop.start(Promise.resolve());
  await s.advance(10);
  s.loop.changed();
  await s.advance(35_000);
  t.deepEqual(
    s.requests.map((r) => [r.full, r.reason]),
    [
      [true, 'kick'],
      [false, 'kick'],
      [true, 'periodic'],
    ],
  );
});

test('a failed sync is retried in full, counted, and READY waits for a success', async (t) => {
  let failures = 2;
  const s = setup({ fail: () => failures-- > 0 });
  s.loop.start(Promise.resolve());
  await s.advance(10_000);
  // Retries at +2 s, then +4 s (backoff), measured from the end of the failed run; the
  // harness moves the clock in 10 ms steps, so a run "takes" up to 10 ms.
  t.deepEqual(
    s.requests.map((r) => [r.full, r.reason, Math.floor(r.at / 100) * 100]),
    [
      [true, 'kick', 0],
      [true, 'retry', 2_000],
      [true, 'retry', 6_000],
    ],
  );
  t.is(s.notifier.messages.filter((m) => m === 'READY=1').length, 1);
  t.is(await value(s.metrics, 'kubeproxyts_sync_failures_total', { mode: 'nftables' }), 2);
  t.is(await value(s.metrics, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total', { ip_family: 'IPv4' }), 2);
  t.true(s.logger.records.some((r) => r.level === 'error' && (r.fields.err as Error).message === 'nft batch: EINVAL'));
});

test('the watchdog pings while healthy and stops while a change waits too long in a stuck sync', async (t) => {
  let hang = false;
  const s = setup({ hang: () => hang });
  s.loop.start(Promise.resolve());
  await s.advance(10);
  await s.loop.ready;
  const pings = () => s.notifier.messages.filter((m) => m === 'WATCHDOG=1').length;
  await s.advance(20_000);
  t.is(pings(), 3, 'at 0, 10 s and 20 s');
  t.true(s.loop.healthy());

  hang = true;
  s.loop.changed(); // the sync for it never finishes
  await s.advance(30_000);
  const before = pings();
  t.true(before >= 5, 'still healthy within the health timeout');
  await s.advance(40_000);
  t.false(s.loop.healthy());
  t.false(s.health.isHealthy(), 'the queued change is older than 2 x syncPeriod');
  const after = pings();
  t.true(after - before <= 3, 'pings stop once unhealthy');
  await s.advance(60_000);
  t.is(pings(), after, 'no pings while wedged');
});

test('a long full sync with no change waiting behind it stays healthy (upstream: 2 x syncPeriod since the oldest queued change)', async (t) => {
  let hang = false;
  let finish: (() => void) | undefined;
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 3, 0, 0));
  const health = new ProxyHealth({ clock, healthTimeoutMs: 60_000 });
  const notifier = new RecordingNotifier({ clock, watchdogMs: 20_000 });
  const loop = new SyncLoop({
    mode: 'nftables',
    syncPeriodMs: 30_000,
    minSyncPeriodMs: 1_000,
    fullSyncPeriodMs: 100_000,
    families: ['IPv4'],
    clock,
    health,
    notifier,
    sync: () => {
      if (!hang) return Promise.resolve({ services: 1, endpoints: 1 });
      return new Promise((resolve) => (finish = () => resolve({ services: 1, endpoints: 1 })));
    },
  });
  const advance = async (ms: number) => {
    await flush();
    for (let i = 0; i < ms; i += 100) {
      clock.advance(100);
      await flush();
    }
  };
  loop.start(Promise.resolve());
  await advance(100);
  await loop.ready;
  hang = true;
  // The hourly full sync (here every 100 s) starts and runs for 5 x syncPeriod, still progressing.
  await advance(110_000);
  t.true(loop.isSyncing());
  await advance(150_000);
  t.true(loop.isSyncing());
  t.true(loop.healthy(), 'a long sync alone is not unhealthy');
  const pings = notifier.messages.filter((m) => m === 'WATCHDOG=1').length;
  // A change arrives behind it: unhealthy once that change has waited 2 x syncPeriod.
  loop.changed();
  await advance(59_000);
  t.true(loop.healthy());
  await advance(2_000);
  t.false(loop.healthy());
  t.true(notifier.messages.filter((m) => m === 'WATCHDOG=1').length > pings, 'pinged throughout the long sync');
  hang = false;
  finish!();
  await advance(1_100);
  t.true(loop.healthy(), 'healthy again once a sync ran');
  await loop.stop();
});

test('stop(): STOPPING=1, the sync signal aborts, no more syncs', async (t) => {
  const s = setup();
  s.loop.start(Promise.resolve());
  await s.advance(10);
  await s.loop.stop();
  s.loop.changed();
  await s.advance(100_000);
  t.is(s.requests.length, 1);
  t.is(s.notifier.messages.at(-1), 'STOPPING=1');
});

test('SIGTERM runs the shutdown and exits 0; a second signal exits 1; a crash exits 1 with its stack logged', async (t) => {
  const proc = new EventEmitter();
  const logger = memoryLogger();
  const exits: number[] = [];
  let release!: () => void;
  const remove = installProcessHandlers({
    proc,
    logger,
    exit: (c) => exits.push(c),
    shutdown: () => new Promise<void>((resolve) => (release = resolve)),
    setTimer: () => ({ cancel() {} }),
  });
  proc.emit('SIGTERM', 'SIGTERM');
  t.deepEqual(exits, []);
  release();
  await flush();
  t.deepEqual(exits, [0]);
  proc.emit('SIGINT', 'SIGINT');
  t.deepEqual(exits, [0, 1]);
  const boom = new Error('boom');
  proc.emit('uncaughtException', boom);
  t.deepEqual(exits, [0, 1, 1]);
  t.is(logger.records.at(-1)?.fields.err, boom);
  remove();
  t.is(proc.listenerCount('SIGTERM'), 0);
});

test('a shutdown that hangs is cut off by the bound with exit 1', async (t) => {
  const proc = new EventEmitter();
  const exits: number[] = [];
  let fire!: () => void;
  installProcessHandlers({
    proc,
    logger: memoryLogger(),
    exit: (c) => exits.push(c),
    shutdown: () => new Promise<void>(() => {}),
    setTimer: (_ms, fn) => {
      fire = fn;
      return { cancel() {} };
    },
  });
  proc.emit('SIGTERM', 'SIGTERM');
  fire();
  t.deepEqual(exits, [1]);
});

test('afterNextSync runs once a sync started after the call has succeeded; a failed one passes it on', async (t) => {
  let fail = false;
  const s = setup({ fail: () => fail });
  s.loop.start(Promise.resolve());
  await s.advance(100);
  t.is(s.requests.length, 1);
  const ran: number[] = [];
  s.loop.afterNextSync(() => ran.push(s.requests.length));
  await s.advance(100);
  t.deepEqual(ran, [], 'not for the sync that ran before the call');
  fail = true;
  s.loop.changed();
  await s.advance(1_500);
  t.is(s.requests.length, 2);
  t.deepEqual(ran, [], 'not after a failed sync');
  fail = false;
  await s.advance(3_000);
  t.is(s.requests.length, 3);
  t.deepEqual(ran, [3], 'after the retry succeeded, once');
  s.loop.changed();
  await s.advance(1_500);
  t.deepEqual(ran, [3]);
});
