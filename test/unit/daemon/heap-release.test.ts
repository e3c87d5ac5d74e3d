// HeapRelease: the compacting collection after the first full sync, and after a burst once
// the daemon has been quiet, only when RSS grew over what the last release left.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { HeapRelease } from '../../../src/daemon/heap.ts';
import { fullSyncPeriodFrom } from '../../../src/daemon/build.ts';

const MiB = 2 ** 20;

function setup() {
  const clock = new FakeClock(0);
  let rss = 200 * MiB;
  const gcs: number[] = [];
  const heap = new HeapRelease({
    clock,
    logger: memoryLogger(),
    rss: () => rss,
    // The collection gives back what is over 200 MiB.
    gc: () => {
      gcs.push(clock.now());
      rss = Math.min(rss, 200 * MiB);
    },
    idleMs: 10_000,
    growth: 1.15,
  });
  return { clock, heap, gcs, setRss: (m: number) => (rss = m * MiB) };
}

test('the first full sync is released at once; partial syncs before it are not', (t) => {
  const s = setup();
  s.heap.synced({ full: false });
  s.clock.advance(20_000);
  t.deepEqual(s.gcs, []);
  s.heap.synced({ full: true });
  s.clock.advance(0);
  t.deepEqual(s.gcs, [20_000]);
});

test('after a burst: released once the daemon is quiet, never while syncs keep coming', (t) => {
  const s = setup();
  s.heap.synced({ full: true });
  s.clock.advance(0);
  s.setRss(400);
  // Churn: a sync every second for a minute; no collection in between.
  for (let i = 0; i < 60; i++) {
    s.heap.synced({ full: false });
    s.clock.advance(1_000);
  }
  t.is(s.gcs.length, 1);
  s.clock.advance(10_000);
  t.is(s.gcs.length, 2, 'quiet for idleMs after the last sync');
  t.is(s.gcs[1], 60_000 + 9_000);
});

test('a later full sync under churn: released soon after it, between syncs, if RSS grew', (t) => {
  const s = setup();
  s.heap.synced({ full: true });
  s.clock.advance(0);
  t.is(s.gcs.length, 1);
  s.clock.advance(60_000);
  // Churn: a sync every second; the hourly full sync at 65 s reads the table and RSS grows.
  for (let i = 0; i < 10; i++) {
    s.clock.advance(1_000);
    if (i === 5) {
      s.setRss(600);
      s.heap.synced({ full: true });
    } else s.heap.synced({ full: false });
  }
  t.is(s.gcs.length, 2, 'not waiting for a quiet spell churn never gives');
  t.is(s.gcs[1], 66_000, 'right after that full sync ended');
  // A full sync that left RSS within the growth factor: none.
  s.heap.synced({ full: true });
  s.clock.advance(40_000);
  t.is(s.gcs.length, 2);
});

test('no collection when RSS stays within the growth factor of the last release', (t) => {
  const s = setup();
  s.heap.synced({ full: true });
  s.clock.advance(0);
  s.setRss(225); // 1.125 x
  s.heap.synced({ full: false });
  s.clock.advance(30_000);
  t.is(s.gcs.length, 1);
  s.heap.close();
  s.setRss(400);
  s.heap.synced({ full: false });
  s.clock.advance(30_000);
  t.is(s.gcs.length, 1, 'closed: nothing more');
});

test('malloc_trim right after each collection, never without one', (t) => {
  const clock = new FakeClock(0);
  const order: string[] = [];
  let rss = 200 * MiB;
  const logger = memoryLogger();
  const heap = new HeapRelease({
    clock,
    logger,
    rss: () => rss,
    gc: () => order.push('gc'),
    trim: () => {
      order.push('trim');
      rss = 150 * MiB;
      return true;
    },
    idleMs: 10_000,
  });
  heap.synced({ full: true });
  clock.advance(0);
  t.deepEqual(order, ['gc', 'trim']);
  t.like(logger.records.at(-1)?.fields, { rssMiBBefore: 200, rssMiBAfter: 150, mallocTrimmed: true });
  rss = 160 * MiB; // within the growth factor: no collection, so no trim either
  heap.synced({ full: false });
  clock.advance(30_000);
  t.deepEqual(order, ['gc', 'trim']);
  rss = 400 * MiB;
  heap.synced({ full: false });
  clock.advance(10_000);
  t.deepEqual(order, ['gc', 'trim', 'gc', 'trim']);
});

test('never while a sync runs: a long sync with no end for idleMs waits, released once it is over', (t) => {
  const clock = new FakeClock(0);
  let rss = 200 * MiB;
  let syncing = false;
  const gcs: number[] = [];
  const heap = new HeapRelease({
    clock,
    logger: memoryLogger(),
    rss: () => rss,
    gc: () => gcs.push(clock.now()),
    busy: () => syncing,
    idleMs: 10_000,
  });
  heap.synced({ full: true });
  clock.advance(0);
  t.deepEqual(gcs, [0]);
  rss = 400 * MiB;
  heap.synced({ full: false });
  syncing = true; // the next sync starts at once and runs for 36 s
  clock.advance(36_000);
  t.deepEqual(gcs, [0], 'not during the sync');
  syncing = false;
  heap.synced({ full: false });
  clock.advance(10_000);
  t.deepEqual(gcs, [0, 46_000]);
});

test('KUBE_PROXY_TS_FULL_SYNC_PERIOD: a Go duration; anything else is said once and ignored', (t) => {
  const log = memoryLogger();
  t.is(fullSyncPeriodFrom({ KUBE_PROXY_TS_FULL_SYNC_PERIOD: '3s' }, log), 3_000);
  t.is(fullSyncPeriodFrom({}, log), undefined);
  t.is(fullSyncPeriodFrom({ KUBE_PROXY_TS_FULL_SYNC_PERIOD: 'soon' }, log), undefined);
  t.is(fullSyncPeriodFrom({ KUBE_PROXY_TS_FULL_SYNC_PERIOD: '0s' }, log), undefined);
  t.is(log.records.filter((r) => r.level === 'warn').length, 2);
});
