// SyncLoop.repair(): drift heard from the kernel asks for a full sync at once (after the
// minimum interval), coalesced; before the first sync there is nothing to repair.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import { SyncLoop } from '../../../src/daemon/sync-loop.ts';
import { ProxyHealth } from '../../../src/health/proxy-health.ts';

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup() {
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 3, 0, 0));
  const requests: { full: boolean; reason: string }[] = [];
  const loop = new SyncLoop({
    mode: 'nftables',
    syncPeriodMs: 600_000,
    minSyncPeriodMs: 1_000,
    families: ['IPv4'],
    clock,
    health: new ProxyHealth({ clock, healthTimeoutMs: 60_000 }),
    notifier: new RecordingNotifier({ clock, watchdogMs: 20_000 }),
    logger: memoryLogger(),
    sync: (req) => {
      requests.push({ full: req.full, reason: req.reason });
      return Promise.resolve({ services: 1, endpoints: 1 });
    },
  });
  const advance = async (ms: number) => {
    await flush();
    for (let i = 0; i < ms; i += 10) {
      clock.advance(10);
      await flush();
    }
  };
  return { loop, requests, advance };
}

test('a repair is a full sync, within the minimum interval, and many requests make one', async (t) => {
  const s = setup();
  s.loop.repair('too early'); // before the first sync: ignored
  s.loop.start(Promise.resolve());
  await s.advance(100);
  await s.loop.ready;
  t.is(s.requests.length, 1);
  s.loop.changed();
  await s.advance(1_100);
  t.deepEqual(s.requests[1], { full: false, reason: 'kick' }, 'an ordinary change is partial');
  for (let i = 0; i < 50; i++) s.loop.repair('removed table ip kube-proxy-ts');
  await s.advance(1_100);
  t.is(s.requests.length, 3);
  t.deepEqual(s.requests[2], { full: true, reason: 'kick' });
  s.loop.changed();
  await s.advance(1_100);
  t.false(s.requests[3]!.full, 'the repair request is used up');
  await s.loop.stop();
});
