import { createServer, type Server } from 'node:net';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { ServiceHealthServers, type ServiceHealthEntry } from '../../../src/health/service-health.ts';

/** A port that was free a moment ago (bind 127.0.0.1:0, close). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function occupy(port: number): Promise<Server> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', resolve);
  });
  return s;
}

async function probe(port: number): Promise<{ status: number; body: string; weight: string | null } | 'refused'> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    return { status: res.status, body: await res.text(), weight: res.headers.get('x-load-balancing-endpoint-weight') };
  } catch {
    return 'refused';
  }
}

function setup(healthy = true) {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const state = { healthy };
  const errors: string[] = [];
  const servers = new ServiceHealthServers({
    addresses: ['127.0.0.1'],
    proxyHealthy: () => state.healthy,
    clock,
    logger,
    retryIntervalMs: 5000,
    onListenError: (svc, port) => errors.push(`${svc}:${port}`),
  });
  return { clock, logger, state, servers, errors };
}

const svcs = (entries: [string, ServiceHealthEntry][]) => new Map(entries);

test("200 with local endpoints, 503 without, with upstream's JSON body and weight header", async (t) => {
  const { servers } = setup();
  t.teardown(() => servers.close());
  const [p1, p2] = [await freePort(), await freePort()];
  await servers.sync(
    svcs([
      ['default/web', { port: p1, localEndpoints: 2 }],
      ['kube-system/dns', { port: p2, localEndpoints: 0 }],
    ]),
  );

  const web = await probe(p1);
  t.not(web, 'refused');
  if (web === 'refused') return;
  t.is(web.status, 200);
  t.is(
    web.body,
    '{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
  );
  t.deepEqual(JSON.parse(web.body), {
    service: { namespace: 'default', name: 'web' },
    localEndpoints: 2,
    serviceProxyHealthy: true,
  });
  t.is(web.weight, '2', 'X-Load-Balancing-Endpoint-Weight carries the local endpoint count');

  const dns = await probe(p2);
  t.true(dns !== 'refused' && dns.status === 503);
  if (dns !== 'refused')
    t.deepEqual(JSON.parse(dns.body), {
      service: { namespace: 'kube-system', name: 'dns' },
      localEndpoints: 0,
      serviceProxyHealthy: true,
    });
  if (dns !== 'refused') t.is(dns.weight, '0');
});

test('an unhealthy proxy answers 503 even with local endpoints', async (t) => {
  const { servers, state } = setup();
  t.teardown(() => servers.close());
  const p = await freePort();
  await servers.sync(svcs([['ns/a', { port: p, localEndpoints: 3 }]]));
  state.healthy = false;
  const r = await probe(p);
  t.true(r !== 'refused' && r.status === 503);
  if (r !== 'refused') t.is((JSON.parse(r.body) as { serviceProxyHealthy: boolean }).serviceProxyHealthy, false);
});

test('endpoint counts update without reopening; listeners move and close with the Services', async (t) => {
  const { servers } = setup();
  t.teardown(() => servers.close());
  const [p1, p2] = [await freePort(), await freePort()];
  await servers.sync(svcs([['ns/a', { port: p1, localEndpoints: 0 }]]));
  t.is(((await probe(p1)) as { status: number }).status, 503);

  await servers.sync(svcs([['ns/a', { port: p1, localEndpoints: 1 }]]));
  t.is(((await probe(p1)) as { status: number }).status, 200);

  await servers.sync(svcs([['ns/a', { port: p2, localEndpoints: 1 }]]));
  t.is(await probe(p1), 'refused', 'old port closed');
  t.is(((await probe(p2)) as { status: number }).status, 200, 'new port open');

  await servers.sync(new Map());
  t.is(await probe(p2), 'refused');
  t.deepEqual([...servers.status()], []);
});

test('a port conflict is logged and retried, never fatal; other Services still open', async (t) => {
  const { servers, clock, logger, errors } = setup();
  t.teardown(() => servers.close());
  const [busy, free] = [await freePort(), await freePort()];
  const blocker = await occupy(busy);

  await t.notThrowsAsync(
    servers.sync(
      svcs([
        ['ns/blocked', { port: busy, localEndpoints: 1 }],
        ['ns/fine', { port: free, localEndpoints: 1 }],
      ]),
    ),
  );
  t.is(((await probe(free)) as { status: number }).status, 200);
  const st = servers.status().get('ns/blocked');
  t.false(st?.listening);
  t.regex(st?.error ?? '', /EADDRINUSE/);
  const logged = logger.records.find((r) => r.level === 'error');
  t.is(logged?.fields.service, 'ns/blocked');
  t.is(logged?.fields.port, busy);
  t.deepEqual(errors, [`ns/blocked:${busy}`]);

  // Still taken at the first retry: logged at debug only, retried again later.
  clock.advance(5000);
  await servers.retryFailed();
  t.false(servers.status().get('ns/blocked')?.listening);
  t.is(logger.records.filter((r) => r.level === 'error').length, 1);

  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  clock.advance(5000); // the retry timer fires
  await servers.retryFailed(); // and waits for it (queued behind)
  t.true(servers.status().get('ns/blocked')?.listening);
  t.is(((await probe(busy)) as { status: number }).status, 200);
});

test('close() closes every listener', async (t) => {
  const { servers } = setup();
  const p = await freePort();
  await servers.sync(svcs([['ns/a', { port: p, localEndpoints: 1 }]]));
  await servers.close();
  t.is(await probe(p), 'refused');
});
