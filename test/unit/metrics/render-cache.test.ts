// The paced /metrics render cache: concurrent requests share a render, requests over the rate
// wait in line and then reuse a recent render, an unhurried request always gets a fresh one.
import test from 'ava';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { PacedRenderCache } from '../../../src/metrics/render-cache.ts';
import { startMetricsServer } from '../../../src/metrics/server.ts';

test('over the rate, requests wait their turn and share renders; within it, each gets a fresh render', async (t) => {
  let now = 0;
  let renders = 0;
  const cache = new PacedRenderCache({
    render: async () => `render ${++renders}`,
    maxAgeMs: 1000,
    perSecond: 2,
    now: () => now,
  });
  t.teardown(() => cache.close());
  t.is(await cache.get(), 'render 1');
  t.is(await cache.get(), 'render 2', 'within the burst, a fresh render');
  // The burst is spent: the next ones wait in line.
  const late = [cache.get(), cache.get(), cache.get()];
  t.is(cache.queued(), 3);
  now += 600; // time passes: one token
  const first = await late[0]!;
  t.is(first, 'render 2', 'a request that waited reuses the recent render');
  t.is(renders, 2);
  cache.close(); // releases the rest
  await Promise.all(late);
  t.is(cache.queued(), 0);
});

test('concurrent requests within the burst share one render; a failed render is not cached', async (t) => {
  let renders = 0;
  let fail = true;
  const cache = new PacedRenderCache({
    render: async () => {
      renders++;
      await new Promise((r) => setTimeout(r, 10));
      if (fail) throw new Error('collector failed');
      return 'ok';
    },
    maxAgeMs: 1000,
    perSecond: 100,
  });
  t.teardown(() => cache.close());
  const results = await Promise.allSettled([cache.get(), cache.get(), cache.get()]);
  t.true(results.every((r) => r.status === 'rejected'));
  t.is(renders, 1);
  fail = false;
  t.is(await cache.get(), 'ok');
  t.is(renders, 2);
});

test('the metrics server under 50 concurrent /metrics requests: all answered, renders bounded', async (t) => {
  const m = createMetrics();
  let renders = 0;
  const render = m.registry.metrics.bind(m.registry);
  m.registry.metrics = () => {
    renders++;
    return render();
  };
  const server = await startMetricsServer({ address: '127.0.0.1:0', metrics: m, proxyMode: 'nftables' });
  t.teardown(() => server.close());
  const url = `http://127.0.0.1:${server.port}`;
  const res = await Promise.all(Array.from({ length: 50 }, () => fetch(`${url}/metrics`).then((r) => r.status)));
  t.true(res.every((s) => s === 200));
  t.true(renders < 50, `${renders} renders for 50 requests`);
  t.is((await fetch(`${url}/healthz`)).status, 200);
});

test('a request whose client went away leaves the line at once; the others keep their turn', async (t) => {
  let now = 0;
  const cache = new PacedRenderCache({ render: async () => 'r', maxAgeMs: 1000, perSecond: 1, now: () => now });
  t.teardown(() => cache.close());
  t.is(await cache.get(), 'r');
  const gone = new AbortController();
  const left = cache.get(gone.signal);
  const stays = cache.get();
  t.is(cache.queued(), 2);
  gone.abort();
  t.is(await left, undefined);
  t.is(cache.queued(), 1, 'the line holds only the client that is still there');
  now += 1000;
  t.is(await stays, 'r', 'and it is served at the next token');
});
