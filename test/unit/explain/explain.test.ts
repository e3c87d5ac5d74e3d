// explain over the model and the nftables proxier on FakeNft: frontends, policies, why each
// endpoint was or was not chosen, what the kernel holds, and drift after a change made
// behind the proxier's back.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { explainPort, matchPorts } from '../../../src/explain/explain.ts';
import { formatExplain } from '../../../src/explain/format.ts';
import { FakeNft } from '../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';
import { ep, newTracker, node, slice, svc } from '../model/helpers.ts';

const signal = new AbortController().signal;
const SYNC = { mode: 'nftables', lastSync: {}, lastChange: {}, pending: false };

async function synced(setup: (t: ReturnType<typeof newTracker>['t']) => void) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  setup(t);
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  const c = t.checkout();
  await proxier.sync(c.desired, c.change, signal);
  return { state: c.desired, nft, proxier };
}

test('a NodePort Service: frontends, policies, endpoints used and the reasons for the others', async (t) => {
  const { state, proxier } = await synced((tr) => {
    tr.onService(
      undefined,
      svc('web', {
        type: 'NodePort',
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
        externalIPs: ['192.0.2.7'],
      }),
    );
    tr.onEndpointSlice(
      slice('web-1', 'web', [
        ep('10.244.1.1', { node: 'node-a' }),
        ep('10.244.2.1', { node: 'node-b' }),
        ep('10.244.3.1', { ready: false, serving: false, node: 'node-b' }),
        ep('10.244.4.1', { ready: false, serving: true, terminating: true, node: 'node-b' }),
        ep('10.244.5.1', { ready: false, serving: false, terminating: true, node: 'node-b' }),
      ]),
      false,
    );
  });
  const [info] = matchPorts(state, 'default/web:p');
  t.truthy(info);
  const x = explainPort(state, info!, await proxier.describe(info!));
  t.deepEqual(
    x.frontends.map((f) => `${f.kind} ${f.address}:${f.port}`),
    ['cluster-ip 10.96.0.10:80', 'external-ip 192.0.2.7:80', 'node-port *:30080'],
  );
  t.is(x.policies.externalTrafficPolicy, 'Cluster');
  t.deepEqual(
    x.endpoints.map((e) => `${e.endpoint} ${e.usedFor.join('+') || e.notUsedBecause}`),
    [
      '10.244.1.1:8080 cluster',
      '10.244.2.1:8080 cluster',
      '10.244.3.1:8080 not ready (not serving)',
      '10.244.4.1:8080 terminating (ready endpoints exist, so it only drains)',
      '10.244.5.1:8080 terminating and not serving',
    ],
  );
  t.true(x.kernel!.agrees, JSON.stringify(x.kernel!.drift));
  const keys = x.kernel!.kernel.map((e) => `${e.where} ${e.key} : ${e.value}`);
  t.true(keys.includes('service-ips 10.96.0.10 . tcp . 80 : goto pick-internal-2'), keys.join('\n'));
  t.true(keys.includes('service-nodeports tcp . 30080 : goto pick-nodeport-2'), keys.join('\n'));
  t.true(keys.includes('endpoints-2 10.96.0.10 . tcp . 80 . 1 : 10.244.2.1 . 8080'), keys.join('\n'));
  t.regex(formatExplain({ sync: SYNC, ports: [x] }, true), /Kernel \(nftables\): in sync/);
});

test('drift: an element deleted behind the proxier is missing; one added is unexpected', async (t) => {
  const { state, nft, proxier } = await synced((tr) => {
    tr.onService(undefined, svc('web'));
    tr.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.1', { node: 'node-a' })]), false);
  });
  const info = matchPorts(state, 'web')[0]!;
  const tx = nft.newTransaction();
  tx.delete({ kind: 'element', set: 'endpoints-1', key: ['10.96.0.10', 'tcp', 80, 0] });
  tx.add({ kind: 'element', set: 'no-endpoint-services', key: ['10.96.0.10', 'tcp', 80], value: { verdict: 'drop' } });
  tx.add({ kind: 'element', set: 'service-nodeports', key: ['tcp', 80], value: { verdict: 'drop' } });
  await nft.run(tx);
  const x = explainPort(state, info, await proxier.describe(info));
  t.false(x.kernel!.agrees);
  t.deepEqual(
    x.kernel!.drift.missing.map((e) => `${e.where} ${e.key} : ${e.value}`),
    ['endpoints-1 10.96.0.10 . tcp . 80 . 0 : 10.244.1.1 . 8080'],
  );
  // tcp . 80 in service-nodeports is no frontend of this port (a node port would be).
  t.deepEqual(
    x.kernel!.drift.unexpected.map((e) => `${e.where} ${e.key} : ${e.value}`),
    ['no-endpoint-services 10.96.0.10 . tcp . 80 : drop'],
  );
  t.regex(formatExplain({ sync: SYNC, ports: [x] }, false), /DRIFT \(1 missing, 1 unexpected\)/);
});

test('Local policies and topology: not on this node, another zone', async (t) => {
  const { state } = await synced((tr) => {
    tr.onNode(node('node-a', { zone: 'z1' }));
    tr.onService(undefined, svc('loc', { clusterIP: '10.96.0.20', iTP: 'Local' }));
    tr.onEndpointSlice(
      slice('loc-1', 'loc', [ep('10.244.1.1', { node: 'node-a' }), ep('10.244.2.1', { node: 'node-b' })]),
      false,
    );
    tr.onService(undefined, svc('zoned', { clusterIP: '10.96.0.30' }));
    tr.onEndpointSlice(
      slice('zoned-1', 'zoned', [
        ep('10.244.1.2', { node: 'node-a', zones: ['z1'] }),
        ep('10.244.2.2', { node: 'node-b', zones: ['z2'] }),
      ]),
      false,
    );
  });
  const loc = explainPort(state, matchPorts(state, 'default/loc')[0]!);
  t.deepEqual(
    loc.endpoints.map((e) => e.usedFor.join('+') || e.notUsedBecause),
    ['local', 'not on this node (internalTrafficPolicy=Local)'],
  );
  const zoned = explainPort(state, matchPorts(state, 'default/zoned:80')[0]!);
  t.is(zoned.policies.topology, 'PreferSameZone');
  t.deepEqual(
    zoned.endpoints.map((e) => e.usedFor.join('+') || e.notUsedBecause),
    ['cluster', 'in another zone (zone hints z2; topology PreferSameZone)'],
  );
  t.is(loc.kernel, undefined);
});

test('matchPorts: by name, namespace default, port name or number; unknown gives none', async (t) => {
  const { state } = await synced((tr) => {
    tr.onService(
      undefined,
      svc('two', {
        ports: [
          { name: 'http', protocol: 'TCP', port: 80 },
          { name: 'dns', protocol: 'UDP', port: 53 },
        ],
      }),
    );
  });
  t.deepEqual(
    matchPorts(state, 'two').map((p) => p.id),
    ['default/two:dns/UDP', 'default/two:http/TCP'],
  );
  t.deepEqual(
    matchPorts(state, 'default/two:53').map((p) => p.id),
    ['default/two:dns/UDP'],
  );
  t.deepEqual(matchPorts(state, 'other/two'), []);
  t.is(matchPorts(state, undefined).length, 2);
});

test('explaining every port reads each map once per query (a shared session), not once per port', async (t) => {
  const { state, nft, proxier } = await synced((tr) => {
    for (let i = 0; i < 40; i++) {
      tr.onService(undefined, svc(`s${i}`, { clusterIP: `10.96.1.${i}` }));
      tr.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.244.1.${i + 1}`)]), false);
    }
  });
  const reads: string[] = [];
  const listElements = nft.listElements.bind(nft);
  nft.listElements = (set: string) => {
    reads.push(set);
    return listElements(set);
  };
  const session = new Map<string, unknown>();
  const all = await Promise.all(
    matchPorts(state, undefined).map(async (p) => explainPort(state, p, await proxier.describe(p, { session }))),
  );
  t.is(all.length, 40);
  t.true(all.every((x) => x.kernel!.agrees));
  t.is(reads.length, new Set(reads).size, `each set read once: ${reads.join(', ')}`);
});
