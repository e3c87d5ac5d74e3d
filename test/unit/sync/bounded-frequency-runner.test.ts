import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { BoundedFrequencyRunner, type RunInfo } from '../../../src/sync/bounded-frequency-runner.ts';

/** Lets promise callbacks (the end of a run) happen; no time passes on the fake clock. */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Harness {
  clock: FakeClock;
  runner: BoundedFrequencyRunner;
  /** Fake-clock times (ms since start) at which runs started, with their reason. */
  starts: { at: number; reason: RunInfo['reason']; failures: number; waited: number }[];
  /** Advances the fake clock in steps, letting runs finish between steps. */
  advance(ms: number, step?: number): Promise<void>;
  t0: number;
}

function harness(opts: {
  min: number;
  max: number;
  retry?: number;
  maxRetry?: number;
  burst?: number;
  fn?: (info: RunInfo) => Promise<void> | void;
}): Harness {
  const clock = new FakeClock();
  const t0 = clock.now();
  const starts: Harness['starts'] = [];
  const runner = new BoundedFrequencyRunner(
    (info) => {
      starts.push({
        at: clock.now() - t0,
        reason: info.reason,
        failures: info.consecutiveFailures,
        waited: info.waitedMs,
      });
      return opts.fn?.(info);
    },
    {
      name: 'test',
      minIntervalMs: opts.min,
      maxIntervalMs: opts.max,
      ...(opts.retry !== undefined ? { retryIntervalMs: opts.retry } : {}),
      ...(opts.maxRetry !== undefined ? { maxRetryIntervalMs: opts.maxRetry } : {}),
      ...(opts.burst !== undefined ? { burstRuns: opts.burst } : {}),
      clock,
      logger: memoryLogger(),
    },
  );
  return {
    clock,
    runner,
    starts,
    t0,
    // 1 ms steps with a flush before each, so a run that finishes "instantly" ends at the
    // fake time it started (the clock cannot move while its promise settles).
    async advance(ms, step = 1) {
      await flush();
      for (let done = 0; done < ms; done += step) {
        clock.advance(Math.min(step, ms - done));
        await flush();
      }
    },
  };
}

test('a bad configuration throws at construction, not later', (t) => {
  const clock = new FakeClock();
  const fn = () => {};
  t.throws(() => new BoundedFrequencyRunner(fn, { name: 'sync', minIntervalMs: 10_000, maxIntervalMs: 1000, clock }), {
    message: /sync: maxInterval \(1000ms\) must be >= minInterval \(10000ms\)/,
  });
  t.throws(() => new BoundedFrequencyRunner(fn, { name: 'sync', minIntervalMs: -1, maxIntervalMs: 1000, clock }), {
    message: /minIntervalMs/,
  });
  t.throws(() => new BoundedFrequencyRunner(fn, { name: 'sync', minIntervalMs: 0, maxIntervalMs: 0, clock }), {
    message: /maxInterval/,
  });
  t.throws(() => new BoundedFrequencyRunner(fn, { name: 'sync', minIntervalMs: 0, maxIntervalMs: Number.NaN, clock }));
});

test('burstRuns must be a whole number of runs, at least 1', (t) => {
  const clock = new FakeClock();
  for (const burstRuns of [0, 1.5, -1]) {
    t.throws(
      () => new BoundedFrequencyRunner(() => {}, { name: 'x', minIntervalMs: 1, maxIntervalMs: 2, burstRuns, clock }),
      {
        message: /burstRuns/,
      },
    );
  }
});

test('nothing runs before start(), and a kick before start() runs right at start', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.run();
  await h.advance(5000);
  t.deepEqual(h.starts, []);
  h.runner.start();
  await h.advance(100);
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason]),
    [[5000, 'kick']],
  );
});

test('the first kick runs at once', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.start();
  await h.advance(300);
  t.deepEqual(h.starts, []);
  h.runner.run();
  await h.advance(100);
  t.deepEqual(
    h.starts.map((s) => s.at),
    [300],
  );
});

test('kicks within minInterval coalesce into one run at lastStart + minInterval', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.start();
  h.runner.run();
  await h.advance(100); // run 1 at 0
  for (let i = 0; i < 20; i++) {
    h.runner.run();
    await h.advance(20);
  }
  await h.advance(2000);
  t.deepEqual(
    h.starts.map((s) => s.at),
    [0, 1000],
  );
  t.is(h.runner.runCount, 2);
});

test('minInterval is measured from the start of a run (a token bucket), and runs never overlap', async (t) => {
  let release: (() => void) | undefined;
  const h = harness({
    min: 1000,
    max: 30_000,
    fn: () => new Promise<void>((resolve) => (release = resolve)),
  });
  h.runner.start();
  h.runner.run();
  await h.advance(100); // starts at 0, takes a while
  h.runner.run();
  await h.advance(400); // t = 500
  release!();
  await flush(); // run 1 ends at 500
  await h.advance(1400);
  t.deepEqual(
    h.starts.map((s) => s.at),
    [0, 1000],
  );
  // A run longer than minInterval: the next (kicked meanwhile) starts as it ends.
  h.runner.run();
  await h.advance(1800); // t = 3700; run 2 (from 1000) still running
  release!();
  await flush();
  await h.advance(10);
  t.deepEqual(
    h.starts.map((s) => s.at),
    [0, 1000, 3700],
  );
  release!();
});

/** Kicks once a second as the churn bench's batches arrive, the fourth 300 ms late; run starts. */
async function lateArrival(burst: number): Promise<number[]> {
  const h = harness({ min: 1000, max: 30_000, burst });
  h.runner.start();
  let now = 0;
  for (const at of [0, 1000, 2000, 3300, 4000, 5000, 6000]) {
    await h.advance(at - now);
    now = at;
    h.runner.run();
  }
  await h.advance(2000);
  return h.starts.map((s) => s.at);
}

test('burst 1: a kick that arrives late once delays every later run by as much', async (t) => {
  // What upstream's burstSyncs = 2 avoids: with one kick per minInterval the lag never shrinks.
  t.deepEqual(await lateArrival(1), [0, 1000, 2000, 3300, 4300, 5300, 6300]);
});

test('burst 2: a late kick delays only its own run; the next ones start as they arrive', async (t) => {
  t.deepEqual(await lateArrival(2), [0, 1000, 2000, 3300, 4000, 5000, 6000]);
});

test('burst 2: after a quiet gap two runs may start at once, then one per minInterval', async (t) => {
  const h = harness({ min: 1000, max: 30_000, burst: 2 });
  h.runner.start();
  h.runner.run();
  await h.advance(100); // run at 0: one token left
  h.runner.run();
  await h.advance(100); // run at 100: 0.1 token left
  for (let i = 0; i < 10; i++) {
    h.runner.run(); // these coalesce until a whole token is back, at 1000
    await h.advance(50);
  }
  await h.advance(5000); // quiet: the bucket fills to 2 again, no more
  for (let i = 0; i < 3; i++) {
    h.runner.run();
    await h.advance(10);
  }
  await h.advance(3000);
  t.deepEqual(
    h.starts.map((s) => s.at),
    [0, 100, 1000, 5700, 5710, 6700],
  );
});

test('a run reports how long its oldest kick waited for it', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.start();
  h.runner.run();
  await h.advance(100);
  h.runner.run(); // at 100; the run can start at 1000
  await h.advance(500);
  h.runner.run(); // at 600, coalesced
  await h.advance(1000);
  await h.advance(30_000); // a periodic run: no kick waited
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason, s.waited]),
    [
      [0, 'kick', 0],
      [1000, 'kick', 900],
      [31_000, 'periodic', 0],
    ],
  );
});

test('without kicks, a periodic run happens every maxInterval', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.start();
  await h.advance(95_000);
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason]),
    [
      [30_000, 'periodic'],
      [60_000, 'periodic'],
      [90_000, 'periodic'],
    ],
  );
});

test('a kick resets the periodic timer', async (t) => {
  const h = harness({ min: 1000, max: 30_000 });
  h.runner.start();
  await h.advance(20_000);
  h.runner.run();
  await h.advance(45_000);
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason]),
    [
      [20_000, 'kick'],
      [50_000, 'periodic'],
    ],
  );
});

test('a failed run is retried after retryInterval, backing off and capped, and a success resets it', async (t) => {
  let fail = 4;
  const h = harness({
    min: 1000,
    max: 60_000,
    retry: 2000,
    maxRetry: 10_000,
    fn: () => {
      if (fail-- > 0) throw new Error('EPERM: nft batch rejected');
    },
  });
  h.runner.start();
  h.runner.run();
  await h.advance(40_000);
  // run at 0 fails -> retry +2s; fails -> +4s; fails -> +8s; fails -> +10s (cap); then succeeds.
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason, s.failures]),
    [
      [0, 'kick', 0],
      [2000, 'retry', 1],
      [6000, 'retry', 2],
      [14_000, 'retry', 3],
      [24_000, 'retry', 4],
    ],
  );
  t.is(h.runner.consecutiveFailures, 0);
  // After the success the next run is the periodic one.
  await h.advance(60_000);
  t.deepEqual(
    h.starts.slice(5).map((s) => [s.at, s.reason]),
    [[84_000, 'periodic']],
  );
});

test('a kick during a failing streak runs sooner than the retry, minInterval permitting', async (t) => {
  let fail = true;
  const h = harness({
    min: 500,
    max: 60_000,
    retry: 10_000,
    fn: () => {
      if (fail) throw new Error('boom');
    },
  });
  h.runner.start();
  h.runner.run();
  await h.advance(100);
  fail = false;
  h.runner.run();
  await h.advance(2000);
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason]),
    [
      [0, 'kick'],
      [500, 'kick'],
    ],
  );
});

test('a failure is logged with the runner name and the error', async (t) => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const runner = new BoundedFrequencyRunner(
    () => {
      throw new Error('ENOBUFS');
    },
    { name: 'nftables-sync', minIntervalMs: 0, maxIntervalMs: 1000, clock, logger },
  );
  runner.start();
  runner.run();
  clock.advance(0);
  await flush();
  t.is(logger.records.length, 1);
  t.is(logger.records[0]!.level, 'error');
  t.is(logger.records[0]!.fields.runner, 'nftables-sync');
  t.is((logger.records[0]!.fields.err as Error).message, 'ENOBUFS');
});

test('runs never overlap: kicks during a slow run queue exactly one more', async (t) => {
  let active = 0;
  let maxActive = 0;
  const releases: (() => void)[] = [];
  const h = harness({
    min: 0,
    max: 30_000,
    fn: async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise<void>((resolve) => releases.push(resolve));
      active--;
    },
  });
  h.runner.start();
  h.runner.run();
  await h.advance(100);
  t.true(h.runner.isRunning);
  for (let i = 0; i < 10; i++) {
    h.runner.run();
    await h.advance(100);
  }
  t.is(h.starts.length, 1);
  releases.shift()!();
  await h.advance(100);
  t.is(h.starts.length, 2);
  releases.shift()!();
  await h.advance(1000);
  t.is(h.starts.length, 2);
  t.is(maxActive, 1);
});

test('kicks a run answered while it ran (answered()) queue no run, and a later kick waits from itself', async (t) => {
  const releases: (() => void)[] = [];
  const h = harness({ min: 0, max: 30_000, fn: () => new Promise<void>((resolve) => releases.push(resolve)) });
  h.runner.start();
  h.runner.run();
  await h.advance(100);
  // A long (full) sync: kicks arrive at 200 and 300, it takes their changes at 400.
  await h.advance(100);
  h.runner.run();
  await h.advance(100);
  h.runner.run();
  await h.advance(100);
  h.runner.answered();
  await h.advance(600); // a kick at 1,000, while the run still goes on
  h.runner.run();
  await h.advance(500);
  releases.shift()!();
  await h.advance(100);
  t.deepEqual(
    h.starts.map((s) => [s.at, s.reason, s.waited]),
    [
      [0, 'kick', 0],
      [1500, 'kick', 500],
    ],
    'one run for the kick after the answer, its wait from that kick (not 1,300 ms from the first)',
  );
  releases.shift()!();
  await h.advance(100);
  h.runner.answered(); // nothing kicked: nothing changes
  await h.advance(1000);
  t.is(h.starts.length, 2);
});

test('stop() waits for the run in progress and prevents further runs', async (t) => {
  let release: (() => void) | undefined;
  let finished = false;
  const h = harness({
    min: 0,
    max: 1000,
    fn: async () => {
      await new Promise<void>((resolve) => (release = resolve));
      finished = true;
    },
  });
  h.runner.start();
  h.runner.run();
  await h.advance(10);
  const stopped = h.runner.stop();
  h.runner.run();
  release!();
  await stopped;
  t.true(finished);
  await h.advance(10_000);
  t.is(h.starts.length, 1);
  t.is(h.clock.pending, 0);
});

test('minInterval 0: every kick runs, one at a time', async (t) => {
  const h = harness({ min: 0, max: 30_000 });
  h.runner.start();
  for (let i = 0; i < 3; i++) {
    h.runner.run();
    await h.advance(1);
  }
  t.is(h.starts.length, 3);
});
