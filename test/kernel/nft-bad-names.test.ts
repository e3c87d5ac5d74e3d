// One bad name never blocks the rest (issue 18): a Service whose name holds a NUL byte or
// 200 × "é", with ClientIP affinity (a set per endpoint, named after the Service), once made
// the kernel cut the derived name, so every later full sync failed with ENFILE and nothing
// new was programmed. Proven with real packets in namespaces of the test's own.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
type Report = { errors: string[]; full: boolean };

const tcp = (c: Cluster, ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
const answeredBy = async (c: Cluster, ip: string): Promise<string> => (await tcp(c, ip, 80)).split(' ')[0]!;

async function badNameSurvives(t: ExecutionContext, label: string, bad: string): Promise<void> {
  const c = await makeCluster(t, label, 2);
  await c.nodeAgent.call(P, 'start', MODEL);
  const sticky = svc('odd', { clusterIP: '10.96.0.11', affinity: 'ClientIP' });
  const first = await c.nodeAgent.call<Report>(
    P,
    'applyRenamed',
    {
      services: [svc('web', { clusterIP: '10.96.0.10' }), sticky],
      slices: [slice('web-1', 'web', [ep(podIP(0))]), slice('odd-1', 'odd', [ep(podIP(1))])],
    },
    { odd: bad },
  );
  t.deepEqual(first.errors, []);
  t.is(await answeredBy(c, '10.96.0.10'), 'pod1');
  t.is(await answeredBy(c, '10.96.0.11'), 'pod2', 'the oddly named Service itself is programmed, under a safe name');

  // Later full syncs (periodic, or after any failure) recognise their own objects.
  for (let i = 0; i < 2; i++) {
    const again = await c.nodeAgent.call<Report>(P, 'applyRenamed', {}, { odd: bad }, true);
    t.deepEqual(again.errors, []);
  }
  const later = await c.nodeAgent.call<Report>(
    P,
    'applyRenamed',
    {
      services: [svc('later', { clusterIP: '10.96.0.12' })],
      slices: [slice('later-1', 'later', [ep(podIP(1))])],
    },
    { odd: bad },
    true,
  );
  t.deepEqual(later.errors, []);
  t.is(await answeredBy(c, '10.96.0.12'), 'pod2', 'a new Service still gets programmed and answers');
  t.is(await answeredBy(c, '10.96.0.11'), 'pod2');

  // Through the model (the daemon's path), the same name is refused by name and harms nothing.
  const viaModel = await c.nodeAgent.call<Report>(P, 'apply', {
    services: [svc(bad, { clusterIP: '10.96.0.13', affinity: 'ClientIP' }), svc('last', { clusterIP: '10.96.0.14' })],
    slices: [slice('last-1', 'last', [ep(podIP(0))])],
  });
  t.deepEqual(viaModel.errors, []);
  const warnings = await c.nodeAgent.call<string[]>(P, 'warnings');
  t.true(
    warnings.some((w) => w.includes('invalid-name')),
    warnings.join('\n'),
  );
  t.is(await answeredBy(c, '10.96.0.14'), 'pod1');
  t.is(await tcp(c, '10.96.0.13', 80), 'ETIMEDOUT', 'the refused Service is not programmed');
}

test.serial('a Service name with a NUL byte', (t) => badNameSurvives(t, 'nul', 'web\0x'));
test.serial('a Service name of 200 × é', (t) => badNameSurvives(t, 'eacute', 'é'.repeat(200)));

// Port names as the API server leaves them: a slice port without a name (absent, or null with a
// null protocol) is the unnamed port "" over TCP and carries the single unnamed Service port; a
// Service's unnamed port beside a named one is refused (the API requires names then).
test.serial('ports without a name', async (t) => {
  const c = await makeCluster(t, 'noname', 2);
  await c.nodeAgent.call(P, 'start', MODEL);
  const r = await c.nodeAgent.call<Report>(P, 'apply', {
    services: [
      svc('solo', { clusterIP: '10.96.0.20', ports: [{ port: 80 }] }),
      svc('pair', { clusterIP: '10.96.0.21', ports: [{ name: 'p', port: 80 }, { port: 81 }] }),
    ],
    slices: [
      slice('solo-1', 'solo', [ep(podIP(0))], { ports: [{ name: null, protocol: null, port: 8080 } as never] }),
      slice('pair-1', 'pair', [ep(podIP(1))], {
        ports: [
          { name: 'p', port: 8080 },
          { name: '', port: 8080 },
        ],
      }),
    ],
  });
  t.deepEqual(r.errors, []);
  t.is(await answeredBy(c, '10.96.0.20'), 'pod1');
  t.is(await answeredBy(c, '10.96.0.21'), 'pod2');
  t.false((await tcp(c, '10.96.0.21', 81)).startsWith('pod'), 'the unnamed port beside a named one is not programmed');
  const warnings = await c.nodeAgent.call<string[]>(P, 'warnings');
  t.true(
    warnings.some((w) => w.includes('a name is required')),
    warnings.join('\n'),
  );
});
