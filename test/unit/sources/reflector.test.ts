// The list/watch loop: backoff, broken streams, and convergence under random interleavings
// of changes, cuts, outages and compactions.

import test from 'ava';
import fc from 'fast-check';
import { memoryLogger } from '../../../src/base/logger.ts';
import { selectedByProxy } from '../../../src/sources/convert.ts';
import { ClientNodeApi, loadKubeConfig } from '../../../src/sources/kube-api.ts';
import { KubernetesSource } from '../../../src/sources/kubernetes.ts';
import { backoffDelay, DEFAULT_BACKOFF } from '../../../src/sources/reflector.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { Recorder, waitFor } from './recorder.ts';
import { slice, svc } from './objects.ts';

test('backoffDelay: exponential, jittered, bounded', (t) => {
  const o = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.5 };
  t.deepEqual(
    [0, 1, 2, 3, 4, 5].map((a) => backoffDelay(a, o, () => 0)),
    [100, 200, 400, 800, 1000, 1000],
  );
  t.deepEqual(
    [0, 1, 2, 3].map((a) => backoffDelay(a, o, () => 1)),
    [150, 300, 600, 1000],
  );
  t.is(
    backoffDelay(10_000, DEFAULT_BACKOFF, () => 0.99),
    DEFAULT_BACKOFF.maxMs,
  );
  for (let a = 0; a < 100; a++) t.true(backoffDelay(a, DEFAULT_BACKOFF) <= DEFAULT_BACKOFF.maxMs);
});

test('consecutive failures back off exponentially, and success resets the backoff', async (t) => {
  const server = await FakeApiServer.start();
  t.teardown(() => server.close());
  server.failNext(6, 500, '/api/v1/services');
  const logger = memoryLogger();
  const source = new KubernetesSource({
    api: new ClientNodeApi(loadKubeConfig({ master: server.url })),
    nodeName: 'n',
    logger,
    backoff: { initialMs: 5, maxMs: 80, factor: 2, jitter: 0 },
    watchServiceCIDRs: false,
  });
  t.teardown(() => source.stop());
  await source.start(new Recorder());
  await source.waitForSync(AbortSignal.timeout(10_000));
  const delays = () =>
    logger.records
      .filter((r) => r.msg === 'list/watch failed; retrying' && r.fields['kind'] === 'Service')
      .map((r) => r.fields['retryInMs']);
  t.deepEqual(delays(), [5, 10, 20, 40, 80, 80]);
  // After a healthy watch, the next failure starts over at the first step.
  await waitFor(() => server.watchCount('Service') === 1, 'watch open');
  server.create(svc('default', 'a'));
  await waitFor(() => source.resourceVersions().Service === server.resourceVersion, 'event seen');
  server.dropWatches();
  await waitFor(() => delays().length === 7, 'one more failure');
  t.is(delays()[6], 5);
});

test('an undecodable watch line restarts the watch from the last resourceVersion, without a relist', async (t) => {
  const server = await FakeApiServer.start();
  t.teardown(() => server.close());
  const logger = memoryLogger();
  const source = new KubernetesSource({
    api: new ClientNodeApi(loadKubeConfig({ master: server.url })),
    nodeName: 'n',
    logger,
    backoff: { initialMs: 5, maxMs: 50 },
  });
  const rec = new Recorder();
  t.teardown(() => source.stop());
  await source.start(rec);
  await source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => server.watchCount('Service') === 1, 'watch open');
  server.create(svc('default', 'a'));
  await waitFor(() => rec.services.has('default/a'), 'a');
  server.writeRaw('Service', '{"type":"ADDED","object":{"kind":"Serv\n');
  server.create(svc('default', 'b'));
  await waitFor(() => rec.services.has('default/b'), 'b after the garbage');
  t.true(logger.records.some((r) => String(r.fields['error']).includes('undecodable event')));
  t.is(server.requests.filter((r) => r.path === '/api/v1/services' && !r.watch).length, 1);
  t.deepEqual(rec.violations, []);
});

type Op =
  | { op: 'put'; kind: 'svc' | 'slice'; i: number; port: number; foreign: boolean }
  | { op: 'del'; kind: 'svc' | 'slice'; i: number }
  | { op: 'cut' | 'down' | 'up' | 'compact' | 'bookmark' | 'pause' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('put' as const),
      kind: fc.constantFrom('svc' as const, 'slice' as const),
      i: fc.nat(5),
      port: fc.integer({ min: 1, max: 3 }),
      foreign: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('del' as const),
      kind: fc.constantFrom('svc' as const, 'slice' as const),
      i: fc.nat(5),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom(
        'cut' as const,
        'down' as const,
        'up' as const,
        'compact' as const,
        'bookmark' as const,
        'pause' as const,
      ),
    }),
  },
);

test('random changes, cuts, outages and compactions: the handler converges to exactly the server', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
      const server = await FakeApiServer.start();
      const source = new KubernetesSource({
        api: new ClientNodeApi(loadKubeConfig({ master: server.url })),
        nodeName: 'n',
        logger: memoryLogger(),
        backoff: { initialMs: 2, maxMs: 20 },
        minHealthyWatchMs: 20,
      });
      const rec = new Recorder();
      try {
        await source.start(rec);
        for (const o of ops) {
          switch (o.op) {
            case 'put': {
              const labels = o.foreign ? { 'service.kubernetes.io/service-proxy-name': 'x' } : {};
              server.upsert(
                o.kind === 'svc'
                  ? svc('ns', `s${o.i}`, labels, o.port)
                  : slice('ns', `e${o.i}`, `s${o.i}`, [`10.0.0.${o.port}`], labels),
              );
              break;
            }
            case 'del': {
              const kind = o.kind === 'svc' ? 'Service' : 'EndpointSlice';
              const key = o.kind === 'svc' ? `ns/s${o.i}` : `ns/e${o.i}`;
              if (server.get(kind, key)) server.remove(kind, key);
              break;
            }
            case 'cut':
              server.dropWatches();
              break;
            case 'down':
              server.down = true;
              server.dropWatches();
              break;
            case 'up':
              server.down = false;
              break;
            case 'compact':
              server.compact();
              break;
            case 'bookmark':
              server.bookmark();
              break;
            case 'pause':
              await new Promise((r) => setTimeout(r, 3));
              break;
          }
        }
        server.down = false;
        const want = (kind: 'Service' | 'EndpointSlice') =>
          new Map(
            [...server.list(kind)]
              .filter(([, o]) => selectedByProxy(o['metadata'].labels))
              .map(([k, o]) => [k, o['metadata'].resourceVersion as string]),
          );
        const have = (m: Map<string, { metadata?: { resourceVersion?: string } }>) =>
          new Map([...m].map(([k, o]) => [k, o.metadata?.resourceVersion ?? '']));
        const same = (a: Map<string, string>, b: Map<string, string>) =>
          a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
        await waitFor(
          () =>
            source.hasSynced() &&
            same(have(rec.services), want('Service')) &&
            same(have(rec.slices), want('EndpointSlice')),
          `convergence after ${JSON.stringify(ops)}`,
        );
        if (rec.violations.length > 0) throw new Error(rec.violations.join('; '));
      } finally {
        await source.stop();
        await server.close();
      }
    }),
    { numRuns: 25 },
  );
  t.pass();
});
