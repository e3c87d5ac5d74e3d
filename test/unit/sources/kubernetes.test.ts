// The Kubernetes source against a real (test) API server, through the real client library.

import test from 'ava';
import type { ExecutionContext } from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { selectedByProxy } from '../../../src/sources/convert.ts';
import { ClientNodeApi, loadKubeConfig } from '../../../src/sources/kube-api.ts';
import type { KubernetesSourceOptions } from '../../../src/sources/kubernetes.ts';
import { KubernetesSource } from '../../../src/sources/kubernetes.ts';
import type { Reject } from '../../../src/sources/types.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { NODE, node, slice, svc } from './objects.ts';
import { Recorder, waitFor } from './recorder.ts';

interface Harness {
  server: FakeApiServer;
  source: KubernetesSource;
  rec: Recorder;
  logger: ReturnType<typeof memoryLogger>;
  rejects: Reject[];
}

async function harness(
  t: ExecutionContext,
  seed: (s: FakeApiServer) => void = () => {},
  opts: Partial<KubernetesSourceOptions> = {},
  server?: FakeApiServer,
): Promise<Harness> {
  const srv = server ?? (await FakeApiServer.start());
  seed(srv);
  const logger = memoryLogger();
  const rejects: Reject[] = [];
  const source = new KubernetesSource({
    api: new ClientNodeApi(loadKubeConfig({ master: srv.url })),
    nodeName: NODE,
    logger,
    onReject: (r) => rejects.push(r),
    backoff: { initialMs: 10, maxMs: 100, jitter: 0.1 },
    minHealthyWatchMs: 50,
    ...opts,
  });
  const rec = new Recorder();
  t.teardown(async () => {
    await source.stop();
    await srv.close();
  });
  await source.start(rec);
  return { server: srv, source, rec, logger, rejects };
}

/** key -> resourceVersion of what the proxy should see of a kind on the server. */
function expected(server: FakeApiServer, kind: 'Service' | 'EndpointSlice'): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, o] of server.list(kind))
    if (selectedByProxy(o['metadata'].labels)) out.set(k, o['metadata'].resourceVersion);
  return out;
}

function seen(view: Map<string, { metadata?: { resourceVersion?: string } }>): Map<string, string> {
  return new Map([...view].map(([k, o]) => [k, o.metadata?.resourceVersion ?? '']));
}

function sameMap(a: Map<string, string>, b: Map<string, string>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

function converged(h: Harness): boolean {
  return (
    sameMap(seen(h.rec.services), expected(h.server, 'Service')) &&
    sameMap(seen(h.rec.slices), expected(h.server, 'EndpointSlice'))
  );
}

function listCount(server: FakeApiServer, path: string): number {
  return server.requests.filter((r) => r.path === path && !r.watch).length;
}

test('lists, then watches: adds, updates and deletes arrive as prev/cur pairs', async (t) => {
  const h = await harness(t, (s) => {
    s.create(svc('default', 'web'));
    s.create(slice('default', 'web-abc', 'web', ['10.0.0.1']));
    s.create(node(NODE));
    s.create(node('node-b'));
    s.create({ kind: 'ServiceCIDR', metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.0/16'] } });
  });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.true(h.source.hasSynced());
  await waitFor(() => h.source.hasSyncedAll(), 'all kinds synced');
  t.deepEqual([...h.rec.synced].sort(), ['EndpointSlice', 'Node', 'Service', 'ServiceCIDR']);
  t.true(converged(h));
  const web = h.rec.services.get('default/web')!;
  t.is(web.spec?.ports?.[0]?.port, 80);
  t.is(web.kind, 'Service');
  t.is(h.rec.node?.metadata?.name, NODE, 'only this node, by field selector');
  t.deepEqual(
    h.rec.node?.status,
    { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }] },
    'unneeded status dropped',
  );
  t.deepEqual(
    h.rec.cidrs.map((c) => c.spec?.cidrs),
    [['10.96.0.0/16']],
  );
  t.is(h.server.requests.find((r) => r.path === '/api/v1/nodes')?.query['fieldSelector'], `metadata.name=${NODE}`);

  // Live changes through the watch.
  h.server.update(svc('default', 'web', {}, 8080));
  h.server.create(svc('kube-system', 'dns'));
  h.server.remove('EndpointSlice', 'default/web-abc');
  h.server.update({ ...node(NODE, 'z2') });
  await waitFor(
    () => converged(h) && h.rec.node?.metadata?.labels?.['topology.kubernetes.io/zone'] === 'z2',
    'watch delivery',
  );
  t.is(h.rec.services.get('default/web')?.spec?.ports?.[0]?.port, 8080);
  t.is(h.rec.count('Service', 'update'), 1);
  t.is(h.rec.count('EndpointSlice', 'delete'), 1);
  h.server.remove('Node', NODE);
  await waitFor(() => h.rec.node === undefined, 'node deletion');
  t.deepEqual(h.rec.violations, []);
  t.deepEqual(h.rejects, []);
});

test('label selectors: objects of another proxy and headless slices are never delivered', async (t) => {
  const h = await harness(t, (s) => {
    s.create(svc('default', 'mine'));
    s.create(svc('default', 'theirs', { 'service.kubernetes.io/service-proxy-name': 'other' }));
    s.create(slice('default', 'mine-1', 'mine', ['10.0.0.1']));
    s.create(slice('default', 'hl-1', 'hl', ['10.0.0.2'], { 'service.kubernetes.io/headless': '' }));
  });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.deepEqual([...h.rec.services.keys()], ['default/mine']);
  t.deepEqual([...h.rec.slices.keys()], ['default/mine-1']);
  await waitFor(
    () => h.server.watchCount('Service') === 1 && h.server.watchCount('EndpointSlice') === 1,
    'watches open',
  );
  const sel = '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless';
  for (const path of ['/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']) {
    const reqs = h.server.requests.filter((r) => r.path === path);
    t.true(reqs.some((r) => r.watch) && reqs.some((r) => !r.watch));
    t.true(
      reqs.every((r) => r.query['labelSelector'] === sel),
      `${path} carries kube-proxy's selector`,
    );
  }
  // Gaining the label makes it leave the selection (the server sends DELETED); losing it, join.
  h.server.update(svc('default', 'mine', { 'service.kubernetes.io/service-proxy-name': 'other' }));
  await waitFor(() => h.rec.services.size === 0, 'service left the selection');
  h.server.update(svc('default', 'theirs'));
  await waitFor(() => h.rec.services.has('default/theirs'), 'service joined the selection');
  t.deepEqual(h.rec.violations, []);
});

test('410 Gone on resume: relists and reconciles, deletes included', async (t) => {
  for (const goneAsHttpStatus of [false, true]) {
    const server = await FakeApiServer.start({ goneAsHttpStatus });
    const h = await harness(
      t,
      (s) => {
        for (const n of ['a', 'b', 'c']) s.create(svc('default', n));
      },
      {},
      server,
    );
    await h.source.waitForSync(AbortSignal.timeout(10_000));
    const listsBefore = listCount(h.server, '/api/v1/services');
    h.server.down = true;
    h.server.dropWatches();
    h.server.remove('Service', 'default/a');
    h.server.update(svc('default', 'b', {}, 81));
    h.server.create(svc('default', 'd'));
    h.server.compact();
    h.server.down = false;
    await waitFor(() => converged(h), `converged after 410 (goneAsHttpStatus=${goneAsHttpStatus})`);
    t.true(listCount(h.server, '/api/v1/services') > listsBefore, 'relisted');
    t.deepEqual([...h.rec.services.keys()].sort(), ['default/b', 'default/c', 'default/d']);
    t.is(h.rec.services.get('default/b')?.spec?.ports?.[0]?.port, 81);
    t.true(h.logger.records.some((r) => r.msg === 'resourceVersion too old, relisting'));
    t.deepEqual(h.rec.violations, []);
  }
});

test('bookmarks advance the resourceVersion, so a resume after compaction needs no relist', async (t) => {
  const h = await harness(t, (s) => s.create(svc('default', 'web')));
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  // Changes the proxy does not see (another proxy's Service) move the server's resourceVersion.
  for (let i = 0; i < 5; i++)
    h.server.create(svc('default', `other-${i}`, { 'service.kubernetes.io/service-proxy-name': 'x' }));
  t.not(h.source.resourceVersions().Service, h.server.resourceVersion);
  await waitFor(() => h.server.watchCount('Service') === 1, 'watch open');
  h.server.bookmark();
  await waitFor(() => h.source.resourceVersions().Service === h.server.resourceVersion, 'bookmark seen');
  const listsBefore = listCount(h.server, '/api/v1/services');
  h.server.compact();
  h.server.dropWatches();
  h.server.create(svc('default', 'new'));
  await waitFor(() => h.rec.services.has('default/new'), 'resumed watch');
  t.is(listCount(h.server, '/api/v1/services'), listsBefore, 'no relist');
  t.deepEqual(h.rec.violations, []);
});

test('connection cut mid-stream; changes while disconnected (deletions too) converge exactly', async (t) => {
  const h = await harness(t, (s) => {
    for (let i = 0; i < 20; i++) {
      s.create(svc('ns1', `s${i}`));
      s.create(slice('ns1', `s${i}-x`, `s${i}`, [`10.0.0.${i + 1}`]));
    }
    s.create(node(NODE));
  });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.source.hasSyncedAll(), 'all kinds synced');
  t.true(converged(h));
  t.is(h.rec.node?.metadata?.name, NODE);
  // Some live traffic, then the cut.
  h.server.update(svc('ns1', 's0', {}, 1000));
  await waitFor(() => converged(h), 'before the cut');
  h.server.down = true;
  h.server.dropWatches();
  for (let i = 0; i < 20; i += 3) h.server.remove('Service', `ns1/s${i}`);
  for (let i = 1; i < 20; i += 3) h.server.remove('EndpointSlice', `ns1/s${i}-x`);
  for (let i = 2; i < 20; i += 3) h.server.update(slice('ns1', `s${i}-x`, `s${i}`, ['10.1.0.1', '10.1.0.2']));
  h.server.create(svc('ns2', 'late'));
  h.server.update(svc('ns1', 's1', { 'service.kubernetes.io/service-proxy-name': 'other' }));
  h.server.remove('Node', NODE);
  // Let the source fail a few times against the dead server before it comes back.
  await waitFor(() => h.logger.records.filter((r) => r.msg === 'list/watch failed; retrying').length >= 3, 'retries');
  h.server.down = false;
  await waitFor(() => converged(h) && h.rec.node === undefined, 'converged after reconnect');
  t.deepEqual(h.rec.violations, []);
  t.false(h.rec.services.has('ns1/s0'));
  t.false(h.rec.services.has('ns1/s1'), 'left the selection while away');
  t.deepEqual(
    h.rec.slices.get('ns1/s2-x')?.endpoints?.map((e) => e.addresses?.[0]),
    ['10.1.0.1', '10.1.0.2'],
  );
  // And the stream keeps working afterwards.
  h.server.remove('Service', 'ns2/late');
  await waitFor(() => converged(h), 'after reconnect');
});

test('server errors are retried with bounded backoff until the source syncs', async (t) => {
  const server = await FakeApiServer.start();
  server.create(svc('default', 'web'));
  server.failNext(3, 500, '/api/v1/services');
  const h = await harness(t, () => {}, {}, server);
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.true(h.rec.services.has('default/web'));
  const warns = h.logger.records.filter(
    (r) => r.msg === 'list/watch failed; retrying' && r.fields['kind'] === 'Service',
  );
  t.is(warns.length, 3);
  t.true(
    warns.every((r) => String(r.fields['error']).includes('500')),
    'the 500s were logged',
  );
  for (const w of warns) t.true((w.fields['retryInMs'] as number) <= 100, 'backoff is bounded');
});

test('a slow answer times out and is retried; the source syncs once the server is quick again', async (t) => {
  const server = await FakeApiServer.start();
  server.create(svc('default', 'web'));
  server.responseDelayMs = 2000;
  const h = await harness(t, () => {}, { listTimeoutMs: 700 }, server);
  await waitFor(
    () => h.logger.records.some((r) => String(r.fields['error']).includes('timed out')),
    'a list timed out',
  );
  t.false(h.source.hasSynced());
  server.responseDelayMs = 0;
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.true(h.rec.services.has('default/web'));
});

test('paged lists follow continue tokens', async (t) => {
  const h = await harness(
    t,
    (s) => {
      for (let i = 0; i < 7; i++) s.create(svc('default', `s${i}`));
    },
    { listPageSize: 2 },
  );
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.is(h.rec.services.size, 7);
  t.is(h.server.requests.filter((r) => r.path === '/api/v1/services' && r.query['continue']).length, 3);
});

test('ServiceCIDRs not served (404): synced without them', async (t) => {
  const server = await FakeApiServer.start();
  server.disableResource('ServiceCIDR');
  const h = await harness(t, () => {}, {}, server);
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.source.hasSyncedAll(), 'all kinds synced');
  t.deepEqual(h.rec.cidrs, []);
  t.true(h.logger.records.some((r) => r.msg.includes('API not served')));
  t.false(h.logger.records.some((r) => r.level === 'warn'));
});

test('structurally bad objects are counted and skipped; a bad update keeps the last good one', async (t) => {
  const h = await harness(t, (s) => {
    s.create(svc('default', 'good'));
    s.create({ kind: 'Service', metadata: { name: 'bad', namespace: 'default' }, spec: 'not-an-object' });
  });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.deepEqual([...h.rec.services.keys()], ['default/good']);
  t.is(h.rejects.length, 1);
  t.like(h.rejects[0], { kind: 'Service', key: 'default/bad', reason: 'spec is not an object' });
  h.server.update({ kind: 'Service', metadata: { name: 'good', namespace: 'default' }, spec: { ports: 'x' } });
  await waitFor(() => h.rejects.length === 2, 'second reject');
  t.is(h.rec.services.get('default/good')?.spec?.ports?.[0]?.port, 80);
  t.true(h.logger.records.some((r) => r.level === 'warn' && r.fields['object'] === 'default/good'));
});

test('resync re-delivers every object with prev === cur on the configSyncPeriod', async (t) => {
  const clock = new FakeClock();
  const h = await harness(
    t,
    (s) => {
      s.create(svc('default', 'a'));
      s.create(svc('default', 'b'));
      s.create(slice('default', 'a-1', 'a', ['10.0.0.1']));
    },
    { clock, resyncPeriodMs: 60_000 },
  );
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.is(h.rec.count('Service', 'resync'), 0);
  clock.advance(60_000);
  t.is(h.rec.count('Service', 'resync'), 2);
  t.is(h.rec.count('EndpointSlice', 'resync'), 1);
  clock.advance(60_000);
  t.is(h.rec.count('Service', 'resync'), 4);
  t.deepEqual(h.rec.violations, []);
});

test('stop() ends promptly even while a request hangs', async (t) => {
  const server = await FakeApiServer.start();
  server.responseDelayMs = 60_000;
  const h = await harness(t, () => {}, {}, server);
  await waitFor(() => server.requests.length >= 3, 'requests in flight');
  const started = Date.now();
  await h.source.stop();
  t.true(Date.now() - started < 3000, 'not the 60 s the server would take');
  await t.throwsAsync(h.source.waitForSync());
});

test('a watch that stays idle past its deadline is reopened', async (t) => {
  const h = await harness(t, (s) => s.create(svc('default', 'web')), { watchIdleTimeoutMs: 150 });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  const watches = () => h.server.requests.filter((r) => r.path === '/api/v1/services' && r.watch).length;
  await waitFor(() => watches() >= 3, 'reopened watches');
  t.true(h.logger.records.some((r) => r.msg === 'watch idle; reopening'));
  h.server.create(svc('default', 'after'));
  await waitFor(() => h.rec.services.has('default/after'), 'still watching');
});

test('a watch that hangs mid-stream (open, silent) is detected by its idle deadline and re-established', async (t) => {
  const h = await harness(t, (s) => s.create(svc('default', 'web')), { watchIdleTimeoutMs: 300 });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.server.watchCount('Service') === 1, 'watch open');
  const watches = () => h.server.requests.filter((r) => r.path === '/api/v1/services' && r.watch).length;
  const lists = () => h.server.requests.filter((r) => r.path === '/api/v1/services' && !r.watch).length;
  const before = watches();
  const listsBefore = lists();
  h.server.stallWatches();
  // A change the hung stream never delivers: it arrives through the re-established watch.
  h.server.create(svc('default', 'during'));
  await waitFor(() => h.rec.services.has('default/during'), 'the change seen after the watch was re-established');
  t.true(watches() > before, 'a new watch was opened');
  t.true(h.logger.records.some((r) => r.msg === 'watch idle; reopening'));
  t.is(lists(), listsBefore, 'resumed from its resourceVersion, no relist');
});

test('watches ask for bookmarks and a bounded server-side timeout', async (t) => {
  const h = await harness(t, () => {}, { minWatchTimeoutSeconds: 300 });
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.server.watchCount('Service') === 1, 'watch open');
  const w = h.server.requests.find((r) => r.path === '/api/v1/services' && r.watch)!;
  t.is(w.query['allowWatchBookmarks'], 'true');
  const timeout = Number(w.query['timeoutSeconds']);
  t.true(timeout >= 300 && timeout < 600);
  t.not(w.query['resourceVersion'], '', 'resumes from the list, never from "any"');
});

test('a watch the server ends cleanly (timeoutSeconds) resumes without a relist', async (t) => {
  const h = await harness(t, (s) => s.create(svc('default', 'web')));
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.server.watchCount('Service') === 1, 'watch open');
  h.server.create(svc('default', 'x'));
  await waitFor(() => h.rec.services.has('default/x'), 'x');
  h.server.closeWatches();
  h.server.create(svc('default', 'y'));
  await waitFor(() => h.rec.services.has('default/y'), 'y after the clean end');
  t.is(listCount(h.server, '/api/v1/services'), 1);
});

test('a server that answers 410 to everything is retried with backoff, not in a hot loop', async (t) => {
  const server = await FakeApiServer.start();
  server.failNext(1_000_000, 410, '/api/v1/services');
  const h = await harness(t, () => {}, { backoff: { initialMs: 10, maxMs: 80, jitter: 0 } }, server);
  const warns = () =>
    h.logger.records.filter((r) => r.msg === 'list/watch failed; retrying' && r.fields['kind'] === 'Service');
  await waitFor(() => warns().length >= 5, 'five retries');
  await h.source.stop();
  // Only the first 410 relists at once; every later one waits its backoff step.
  t.deepEqual(
    warns()
      .slice(0, 5)
      .map((r) => r.fields['retryInMs']),
    [10, 20, 40, 80, 80],
  );
  const requests = server.requests.filter((r) => r.path === '/api/v1/services').length;
  t.true(requests <= warns().length + 2, `${requests} requests for ${warns().length} backoffs`);
  t.false(h.source.hasSynced());
});

test('ServiceCIDRs: changes deliver the whole set; an API that goes away takes its objects with it', async (t) => {
  const h = await harness(t, (s) =>
    s.create({ kind: 'ServiceCIDR', metadata: { name: 'a' }, spec: { cidrs: ['10.96.0.0/16'] } }),
  );
  await waitFor(() => h.source.hasSyncedAll() && h.rec.cidrs.length === 1, 'first cidr');
  await waitFor(() => h.server.watchCount('ServiceCIDR') === 1, 'watch open');
  h.server.create({ kind: 'ServiceCIDR', metadata: { name: 'b' }, spec: { cidrs: ['fd00::/108'] } });
  await waitFor(() => h.rec.cidrs.length === 2, 'second cidr');
  t.deepEqual(h.rec.cidrs.map((c) => c.metadata?.name).sort(), ['a', 'b']);
  h.server.disableResource('ServiceCIDR');
  h.server.dropWatches();
  await waitFor(() => h.rec.cidrs.length === 0, 'cidrs withdrawn');
});

test('a handler that throws is logged; the stream goes on', async (t) => {
  const server = await FakeApiServer.start();
  t.teardown(() => server.close());
  server.create(svc('default', 'boom'));
  server.create(svc('default', 'fine'));
  const logger = memoryLogger();
  const source = new KubernetesSource({
    api: new ClientNodeApi(loadKubeConfig({ master: server.url })),
    nodeName: NODE,
    logger,
  });
  t.teardown(() => source.stop());
  class Throwing extends Recorder {
    override onService(prev: Parameters<Recorder['onService']>[0], cur: Parameters<Recorder['onService']>[1]): void {
      if ((cur ?? prev)?.metadata?.name === 'boom') throw new Error('handler bug');
      super.onService(prev, cur);
    }
  }
  const rec = new Throwing();
  await source.start(rec);
  await source.waitForSync(AbortSignal.timeout(10_000));
  t.true(rec.services.has('default/fine'));
  await waitFor(() => server.watchCount('Service') === 1, 'watch open');
  server.update(svc('default', 'boom', {}, 81));
  server.create(svc('default', 'later'));
  await waitFor(() => rec.services.has('default/later'), 'later');
  t.is(logger.records.filter((r) => r.level === 'error' && r.msg === 'event handler failed').length, 2);
});

test('"Too large resource version" on a watch: back off, then relist', async (t) => {
  const h = await harness(t, (s) => s.create(svc('default', 'web')));
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => h.server.watchCount('Service') === 1, 'watch open');
  const lists = listCount(h.server, '/api/v1/services');
  h.server.failNext(1, 504, '/api/v1/services', ['ResourceVersionTooLarge']);
  h.server.dropWatches();
  h.server.create(svc('default', 'after'));
  await waitFor(() => h.rec.services.has('default/after'), 'after');
  t.is(listCount(h.server, '/api/v1/services'), lists + 1, 'relisted');
});

test('a hung server (accepts, never answers) is detected by the headers deadline; convergence follows its recovery', async (t) => {
  const server = await FakeApiServer.start();
  server.create(svc('default', 'web'));
  server.hung = true;
  // client-go's backoff (800 ms doubling to 30 s): a deadline does not make it grow.
  const h = await harness(
    t,
    () => {},
    {
      api: new ClientNodeApi(loadKubeConfig({ master: server.url }), { headersTimeoutMs: 300 }),
      backoff: { initialMs: 800, maxMs: 30_000, factor: 2, jitter: 0.5 },
      random: () => 0.5,
    },
    server,
  );
  const deadlines = () =>
    h.logger.records.filter(
      (r) =>
        r.msg === 'list/watch failed; retrying' &&
        r.fields['kind'] === 'Service' &&
        String(r.fields['error']).includes('no response within 300 ms'),
    );
  // Hung from the start: every list hits its deadline.
  await waitFor(() => deadlines().length >= 4, 'four lists hit their deadline', 20_000);
  t.false(h.source.hasSynced());
  server.hung = false;
  await h.source.waitForSync(AbortSignal.timeout(10_000));
  t.true(h.rec.services.has('default/web'));
  // Hung in the middle (its watches cut): the watches that follow hit their deadline too.
  server.hung = true;
  server.create(svc('default', 'during'));
  await waitFor(() => deadlines().length >= 6, 'watches hit their deadline', 20_000);
  t.false(h.rec.services.has('default/during'));
  server.hung = false;
  await waitFor(() => h.rec.services.has('default/during'), 'converged after the server answers again');
  t.deepEqual(
    deadlines().map((r) => r.fields['retryInMs']),
    deadlines().map(() => 1000),
    'retried at the first backoff step, not 30 s later',
  );
  t.deepEqual(h.rec.violations, []);
});
