// The collection after the first full sync: only with gc() exposed (--expose-gc, the package's
// V8 options), and with options that make V8 give the free pages back.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { HeapRelease, RELEASE_GC, releaseStartupHeap } from '../../../src/daemon/heap.ts';

test('without gc() exposed nothing runs', (t) => {
  t.false(releaseStartupHeap(undefined));
});

test('with gc() exposed it runs one last-resort major collection, synchronously', (t) => {
  const calls: unknown[] = [];
  t.true(releaseStartupHeap((o: unknown) => void calls.push(o)));
  t.deepEqual(calls, [{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
  t.is(calls[0], RELEASE_GC);
});

// gc() accepts any options silently, so only the heap shows whether V8 honoured them: the heap
// a plain gc() keeps (most of its size) is what this one must give back.
test('in a Node process with --expose-gc, the heap V8 grew into for garbage is given back', async (t) => {
  const heap = new URL('../../../src/daemon/heap.ts', import.meta.url).href;
  const script = `
    import { releaseStartupHeap } from ${JSON.stringify(heap)};
    let keep = [], junk = [];
    for (let i = 0; i < 1e6; i++) { const o = { a: 'x' + i, b: [i, i + 1] }; (i % 4 ? junk : keep).push(o); }
    junk = null;
    const before = process.memoryUsage().heapTotal;
    const ran = releaseStartupHeap();
    console.log(JSON.stringify({ ran, before, after: process.memoryUsage().heapTotal, kept: keep.length }));`;
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--expose-gc',
    '--max-semi-space-size=8',
    '--input-type=module',
    '-e',
    script,
  ]);
  const r = JSON.parse(stdout) as { ran: boolean; before: number; after: number; kept: number };
  t.true(r.ran);
  t.is(r.kept, 250_000);
  t.true(r.after < r.before * 0.6, `heap ${r.before} → ${r.after} bytes`);
});

test('mallocTrim (the addon): callable, and true or false', async (t) => {
  const { mallocTrim } = await import('netlink-socket');
  t.is(typeof mallocTrim(), 'boolean');
});

test('HeapRelease.request (a large input): at most once per interval, a request within it runs when it ends; logs RSS before and after', (t) => {
  const clock = new FakeClock(0);
  const logger = memoryLogger();
  const calls: number[] = [];
  let rss = 500 << 20;
  const heap = new HeapRelease({
    clock,
    logger,
    minIntervalMs: 60_000,
    rss: () => rss,
    gc: () => {
      calls.push(clock.now());
      rss = 200 << 20;
    },
  });
  heap.request();
  clock.advance(0);
  t.deepEqual(calls, [0]);
  t.is(logger.records.at(-1)?.msg, 'Gave memory back after a large input change');
  t.deepEqual(logger.records.at(-1)?.fields, { rssMiBBefore: 500, rssMiBAfter: 200, ms: 0 });
  clock.advance(10_000);
  heap.request();
  heap.synced({ full: false }); // a sync meanwhile does not push the pending release back
  heap.request();
  t.deepEqual(calls, [0], 'throttled');
  clock.advance(50_000);
  t.deepEqual(calls, [0, 60_000], 'one run when the interval ends');
  heap.request();
  heap.close();
  clock.advance(120_000);
  t.deepEqual(calls, [0, 60_000], 'close() cancels what is pending');
});
