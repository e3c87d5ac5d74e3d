// --kube-api-qps / --kube-api-burst as client-go's token bucket, and the observations behind
// rest_client_requests_total / rest_client_request_duration_seconds.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { ApiError, limitedApi, TokenBucket } from '../../../src/sources/index.ts';
import type { KubeApi, RequestObservation } from '../../../src/sources/index.ts';

const signal = new AbortController().signal;

test('the bucket starts full (burst), then lets one request through every 1/qps seconds', async (t) => {
  const clock = new FakeClock();
  const b = new TokenBucket({ qps: 2, burst: 3, clock });
  const granted: number[] = [];
  const waits = Array.from({ length: 5 }, (_, i) => b.acquire(signal).then(() => granted.push(i)));
  await Promise.resolve();
  await Promise.resolve();
  t.deepEqual(granted, [0, 1, 2], 'burst of 3 at once');
  clock.advance(499);
  await Promise.resolve();
  t.deepEqual(granted, [0, 1, 2]);
  clock.advance(1);
  await Promise.resolve();
  t.deepEqual(granted, [0, 1, 2, 3], 'the fourth after 500 ms (2 qps)');
  clock.advance(500);
  await Promise.all(waits);
  t.deepEqual(granted, [0, 1, 2, 3, 4]);
});

test('an aborted wait rejects and gives its token back; qps <= 0 is no limit', async (t) => {
  const clock = new FakeClock();
  const b = new TokenBucket({ qps: 1, burst: 1, clock });
  await b.acquire(signal);
  const ac = new AbortController();
  const waiting = b.acquire(ac.signal);
  ac.abort(new Error('stop'));
  await t.throwsAsync(waiting, { message: 'stop' });
  clock.advance(1000);
  t.is(await b.acquire(signal), 0, 'the refilled token is there');
  const none = new TokenBucket({ qps: -1, burst: 1, clock });
  for (let i = 0; i < 100; i++) t.is(await none.acquire(signal), 0);
});

test('every request is rate-limited and observed with its status code and host', async (t) => {
  const clock = new FakeClock();
  let fail = false;
  const api: KubeApi = {
    server: 'https://10.0.0.1:6443',
    get: () => {
      clock.advance(30);
      return fail
        ? Promise.reject(new ApiError('/api/v1/nodes', 403, 'Forbidden', 'no'))
        : Promise.resolve({ items: [] });
    },
    watch: () => Promise.reject(new Error('ECONNRESET')),
  };
  const seen: RequestObservation[] = [];
  const limited = limitedApi(api, {
    limiter: new TokenBucket({ qps: 10, burst: 5, clock }),
    clock,
    observe: (o) => seen.push(o),
  });
  t.is(limited.server, api.server);
  t.deepEqual(await limited.get('/api/v1/nodes', {}, signal), { items: [] });
  fail = true;
  await t.throwsAsync(limited.get('/api/v1/nodes', {}, signal));
  await t.throwsAsync(limited.watch('/api/v1/nodes', {}, signal, () => {}));
  t.deepEqual(
    seen.map((o) => [o.method, o.host, o.code, o.watch]),
    [
      ['GET', '10.0.0.1:6443', '200', false],
      ['GET', '10.0.0.1:6443', '403', false],
      ['GET', '10.0.0.1:6443', '<error>', true],
    ],
  );
  t.is(seen[0]!.durationMs, 30);
});

test("a list's continuation pages take no token: the list was admitted with its first page", async (t) => {
  const clock = new FakeClock();
  const api: KubeApi = {
    server: 'https://10.0.0.1:6443',
    get: () => Promise.resolve({ items: [] }),
    watch: () => Promise.reject(new Error('unused')),
  };
  const seen: RequestObservation[] = [];
  const limited = limitedApi(api, {
    limiter: new TokenBucket({ qps: 1, burst: 1, clock }),
    clock,
    observe: (o) => seen.push(o),
  });
  await limited.get('/api/v1/services', { limit: '500' }, signal);
  // The bucket is empty now, and the fake clock never advances: a page that waited would hang.
  for (let page = 1; page < 40; page++)
    await limited.get('/api/v1/services', { limit: '500', continue: `token-${page}` }, signal);
  t.is(seen.length, 40);
  t.true(seen.every((o) => o.waitedMs === 0));
  // A new list waits for its token again.
  const next = limited.get('/api/v1/services', { limit: '500' }, signal);
  const settled = await Promise.race([next.then(() => 'done'), new Promise((r) => setTimeout(() => r('waiting'), 50))]);
  t.is(settled, 'waiting');
  clock.advance(1000);
  await next;
});
