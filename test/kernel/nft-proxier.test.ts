// The nftables proxier against the machine's kernel, proven with real packets: a node
// namespace runs the model and the proxier, pods answer with their name and the source
// they saw, an external client connects. `nft -j list ruleset` checks what is left behind.
// What every mode does alike (ClusterIP, NodePort, no endpoints, external IPs and load balancers,
// eTP=Local, affinity, IPv6) is proxier-semantics.ts, run here with this mode's own checks.
import test from 'ava';
import { ECHO, NODE_IP, podGateway, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import type { NftJsonObject } from '../helpers/netns.ts';
import { NFT_BINARIES, roundTrip } from './nft-binaries.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';
import { driver, MODEL, pods, proxierSemantics, tcpPort } from './proxier-semantics.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const { cluster, apply, tcp, tcpMany } = driver(P);

/** Everything of ours in the ruleset, as text, to look for leftovers. */
async function ours(c: Cluster): Promise<string> {
  const objs: NftJsonObject[] = await c.node.nftJson();
  return JSON.stringify(objs.filter((o) => JSON.stringify(o).includes('kube-proxy-ts')));
}

proxierSemantics({
  label: '',
  scenario: P,
  inspect: {
    async noEndpoints(t, c) {
      t.is(await tcp(c, 'client', '10.96.0.10', 81), 'ECONNREFUSED', 'a port the Service does not expose is rejected');
      t.is(
        await tcp(c, 'client', '10.96.0.99', 80),
        'ETIMEDOUT',
        'an unallocated address in the service CIDR is dropped',
      );
    },
    async affinity(t, c) {
      // Affinity turned off: the per-endpoint sets and chains are gone, traffic spreads again.
      await apply(c, {
        services: [svc('sticky', { clusterIP: '10.96.0.70', type: 'NodePort', ports: tcpPort(80, 30070) })],
      });
      const text = JSON.stringify(await c.node.nftJson());
      t.false(/affinity-[A-Z0-9]{8}-/.test(text), 'no affinity set left');
      t.false(/(service|external)-[A-Z0-9]{8}-/.test(text), 'no chain of its own left');
      t.is(pods(await tcpMany(c, 'client', '10.96.0.70', 80, 16)).size, 2);
    },
    async ipv6(t, c) {
      t.regex(
        await c.node.run('nft', 'list', 'table', 'ip6', 'kube-proxy-ts'),
        /dnat ip6 to ip6 daddr \. meta l4proto \. tcp dport \. numgen random mod 2 map @endpoints-2/,
      );
    },
  },
});

test.serial('changes: endpoint removed, Service type changed, Service deleted leave nothing stale', async (t) => {
  const c = await cluster(t, 'chg');
  const web = (type: string) =>
    svc('web', { clusterIP: '10.96.0.10', type, ports: tcpPort(80, type === 'NodePort' ? 30080 : undefined) });
  await apply(c, {
    services: [web('NodePort')],
    slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
  });
  t.true(pods(await tcpMany(c, 'client', '10.96.0.10', 80, 12)).size >= 2);

  await apply(c, { slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(2))])] });
  const after = await tcpMany(c, 'client', '10.96.0.10', 80, 12);
  t.false(pods(after).has('pod2'), `pod2 was removed: ${after.join(', ')}`);
  t.false((await ours(c)).includes(podIP(1)), 'no element mentions the removed endpoint');

  await apply(c, { services: [web('ClusterIP')] });
  t.is(await tcp(c, 'client', NODE_IP, 30080), 'ECONNREFUSED', 'the node port is gone (nothing listens on the node)');
  t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod[13] /);

  await apply(c, { services: ['default/web'], slices: ['default/web-1'] });
  const left = await ours(c);
  t.false(left.includes('10.96.0.10'), 'no element mentions the deleted Service');
  t.false(left.includes('default/web'), 'no chain of the deleted Service remains');
  t.is(await tcp(c, 'client', '10.96.0.10', 80), 'ETIMEDOUT', 'its address is now just unallocated');
});

test.serial('internalTrafficPolicy=Local: pods reach only endpoints on this node', async (t) => {
  const c = await cluster(t, 'itp', 3);
  await apply(c, {
    node: node('node-a', { internal: [NODE_IP] }),
    services: [svc('in', { clusterIP: '10.96.0.40', iTP: 'Local' })],
    slices: [
      slice('in-1', 'in', [
        ep(podIP(0), { node: 'node-a' }),
        ep(podIP(1), { node: 'node-a' }),
        ep(podIP(2), { node: 'node-b' }),
      ]),
    ],
  });
  const got = await tcpMany(c, 0, '10.96.0.40', 80, 15);
  t.false(pods(got).has('pod3'), `never the remote endpoint: ${got.join(', ')}`);
});

test.serial('UDP ClusterIP reaches an endpoint', async (t) => {
  const c = await cluster(t, 'udp', 1);
  await apply(c, {
    services: [svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'p', protocol: 'UDP', port: 53 }] })],
    slices: [slice('dns-1', 'dns', [ep(podIP(0))], { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] })],
  });
  t.is(await c.clientAgent.call(ECHO, 'udp', '10.96.0.53', 53), `pod1 ${podGateway(0)}`);
});

test.serial('cleanup removes our table and nothing else; a second cleanup is harmless', async (t) => {
  const c = await cluster(t, 'clean', 1);
  await c.node.run('nft', 'add', 'table', 'ip', 'someone-else');
  await c.node.run('nft', 'add', 'chain', 'ip', 'someone-else', 'keep');
  await apply(c, {
    services: [svc('web', { clusterIP: '10.96.0.10' })],
    slices: [slice('web-1', 'web', [ep(podIP(0))])],
  });
  t.not(await ours(c), '[]');
  await c.nodeAgent.call(P, 'cleanup');
  await c.nodeAgent.call(P, 'cleanup');
  const left = await c.node.nftJson();
  t.deepEqual(
    left.map((o) => Object.keys(o)[0] + ':' + String(Object.values(o)[0]!.name)),
    ['table:someone-else', 'chain:keep'],
  );
});

test.serial('nft prints the whole ruleset cleanly and its printout loads back to the same ruleset', async (t) => {
  const c = await cluster(t, 'rt', 2);
  await apply(c, {
    node: node('node-a', { internal: [NODE_IP] }),
    services: [
      svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) }),
      svc('lb', {
        clusterIP: '10.96.0.20',
        type: 'LoadBalancer',
        ports: tcpPort(443, 30443),
        externalIPs: ['10.50.0.1'],
        ingress: [{ ip: '10.60.0.1' }],
        sourceRanges: ['10.1.0.0/24', '192.0.2.0/25'],
        eTP: 'Local',
      }),
      svc('dns', {
        clusterIP: '10.96.0.53',
        ports: [
          { name: 'p', protocol: 'UDP', port: 53 },
          { name: 's', protocol: 'SCTP', port: 99 },
        ],
      }),
      svc('empty', { clusterIP: '10.96.0.11' }),
      svc('sticky', { clusterIP: '10.96.0.70', affinity: 'ClientIP', timeout: 600 }),
    ],
    slices: [
      slice('sticky-1', 'sticky', [ep(podIP(0)), ep(podIP(1))]),
      slice('web-1', 'web', [ep(podIP(0), { node: 'node-a' }), ep(podIP(1), { node: 'node-b' })]),
      slice('lb-1', 'lb', [ep(podIP(0), { node: 'node-a' }), ep(podIP(1), { node: 'node-b' })]),
      slice('dns-1', 'dns', [ep(podIP(1))], {
        ports: [
          { name: 'p', protocol: 'UDP', port: 8080 },
          { name: 's', protocol: 'SCTP', port: 9999 },
        ],
      }),
    ],
  });
  // Every nft binary prints it cleanly, and its printouts load back to the same ruleset.
  for (const [i, nft] of NFT_BINARIES.entries()) {
    const { printout } = await roundTrip(t, nft, c.node, `rt-${i}`);
    t.regex(
      printout.text,
      /typeof ip daddr \. meta l4proto \. th dport \. numgen random mod 1 : ip daddr \. th dport/,
      nft.name,
    );
    t.regex(
      printout.text,
      /chain pick-external-local-1-2 \{/,
      `${nft.name}: the eTP=Local load balancer has its picker`,
    );
  }
});

test.serial(
  'a restarted proxier converges in several batches without breaking an established connection',
  async (t) => {
    const c = await cluster(t, 'rst', 2);
    await Promise.all(c.podAgents.map((a, i) => a.call(ECHO, 'serveStream', `pod${i + 1}`, 8081)));
    const objs = {
      services: Array.from({ length: 30 }, (_, i) =>
        svc(`s${i}`, {
          clusterIP: `10.96.1.${i + 1}`,
          ports: [
            { name: 'p', protocol: 'TCP', port: 80 },
            { name: 'st', protocol: 'TCP', port: 81 },
          ],
        }),
      ),
      slices: Array.from({ length: 30 }, (_, i) =>
        slice(`s${i}-1`, `s${i}`, [ep(podIP(0)), ep(podIP(1))], {
          ports: [
            { name: 'p', protocol: 'TCP', port: 8080 },
            { name: 'st', protocol: 'TCP', port: 8081 },
          ],
        }),
      ),
    };
    await apply(c, objs);
    const stream = await c.clientAgent.call<number>(ECHO, 'openStream', '10.96.1.7', 81);
    t.regex(await c.clientAgent.call<string>(ECHO, 'streamRoundTrip', stream, 'before'), /^pod[12] before$/);

    // Restart: a fresh process state, while 30 more Services appeared; small batches to force a split.
    await c.nodeAgent.call(P, 'start', { ...MODEL, maxBatchBytes: 16_384 });
    const more = {
      services: [
        ...objs.services,
        ...Array.from({ length: 30 }, (_, i) =>
          svc(`n${i}`, { clusterIP: `10.96.2.${i + 1}`, ports: [{ name: 'p', protocol: 'TCP', port: 80 }] }),
        ),
      ],
      slices: [
        ...objs.slices,
        ...Array.from({ length: 30 }, (_, i) =>
          slice(`n${i}-1`, `n${i}`, [ep(podIP(0)), ep(podIP(1))], {
            ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
          }),
        ),
      ],
    };
    const r = await c.nodeAgent.call<{ batches: number; errors: string[] }>(P, 'apply', more);
    t.true(r.batches > 2, `batches: ${r.batches}`);
    t.regex(
      await c.clientAgent.call<string>(ECHO, 'streamRoundTrip', stream, 'after'),
      /^pod[12] after$/,
      'the established connection still works',
    );
    t.regex(await tcp(c, 'client', '10.96.1.30', 80), /^pod[12] /, 'new connections work');
    t.regex(await tcp(c, 'client', '10.96.2.30', 80), /^pod[12] /, 'and reach the Services that appeared');
    const json = await c.node.nftJson();
    const endpointsMap = json.find((o) => o.map?.name === 'endpoints-2')?.map as { elem?: unknown[] } | undefined;
    t.is(endpointsMap?.elem?.length, 180, '90 service ports x 2 endpoints, none duplicated or left over');
    const chains = json.filter((o) => o.chain && /^pick-/.test(String(o.chain.name))).map((o) => String(o.chain!.name));
    t.deepEqual(chains, ['pick-internal-2'], 'one picker for every two-endpoint Service');
  },
);

test.serial(
  'a partial sync too large for one batch goes out in several, stays partial, and packets follow it',
  async (t) => {
    const c = await cluster(t, 'spl', 2);
    await c.nodeAgent.call(P, 'start', { ...MODEL, maxBatchBytes: 16_384 });
    const N = 40;
    const services = Array.from({ length: N }, (_, i) => svc(`s${i}`, { clusterIP: `10.96.1.${i + 1}` }));
    const slices = (ips: string[]) =>
      Array.from({ length: N }, (_, i) =>
        slice(
          `s${i}-1`,
          `s${i}`,
          ips.map((ip) => ep(ip)),
        ),
      );
    await apply(c, { services, slices: slices([podIP(0)]) });
    t.deepEqual([...pods(await tcpMany(c, 'client', `10.96.1.${N}`, 80, 8))], ['pod1']);
    // Every Service gains an endpoint at once: the two-endpoint picker must be in the kernel
    // before the first port that uses it, the one-endpoint picker goes after the last.
    const grow = await c.nodeAgent.call<{ full: boolean; batches: number; errors: string[] }>(P, 'apply', {
      services,
      slices: slices([podIP(0), podIP(1)]),
    });
    t.false(grow.full, 'partial');
    t.true(grow.batches > 2, `batches: ${grow.batches}`);
    t.deepEqual(grow.errors, []);
    for (const i of [1, N]) t.is(pods(await tcpMany(c, 'client', `10.96.1.${i}`, 80, 16)).size, 2);
    const shrink = await c.nodeAgent.call<{ full: boolean; batches: number }>(P, 'apply', {
      services,
      slices: slices([podIP(1)]),
    });
    t.false(shrink.full, 'partial');
    t.true(shrink.batches > 2, `batches: ${shrink.batches}`);
    for (const i of [1, N]) t.deepEqual([...pods(await tcpMany(c, 'client', `10.96.1.${i}`, 80, 8))], ['pod2']);
    const chains = (await c.node.nftJson()).filter((o) => o.chain && /^pick-/.test(String(o.chain.name)));
    t.deepEqual(
      chains.map((o) => String(o.chain!.name)),
      ['pick-internal-1'],
      'only the picker in use is left',
    );
  },
);

test.serial(
  'a restarted proxier writes into maps the kernel holds from before it (their types read back)',
  async (t) => {
    const c = await cluster(t, 'rst', 2);
    const a = svc('a', { clusterIP: '10.96.1.1' });
    const b = svc('b', { clusterIP: '10.96.1.2' });
    await apply(c, { services: [a], slices: [slice('a-1', 'a', [ep(podIP(0))])] });
    // A new process over the same kernel, with a reader socket as the daemon has: its writing
    // client made none of the sets, and endpoints-1 gains an element for b.
    await c.nodeAgent.call(P, 'start', { ...MODEL, readerRecvBytes: 65536 });
    const r = await apply(c, {
      services: [a, b],
      slices: [slice('a-1', 'a', [ep(podIP(0))]), slice('b-1', 'b', [ep(podIP(1))])],
    });
    t.true(r.full);
    t.deepEqual(r.errors, []);
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.2', 80, 4))], ['pod2']);
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.1', 80, 4))], ['pod1']);
  },
);

test.serial(
  'a change arriving while the kernel dumps a large map to the reader socket is in the kernel before the dump ends',
  async (t) => {
    const c = await cluster(t, 'dmp', 2);
    // The full sync's reads on a socket of their own, as the daemon wires them, but in 4 KiB
    // datagrams: the kernel then takes a few hundred ms to dump 50,000 elements (it walks the
    // map from its start for each one), long enough for a change to come in meanwhile.
    await c.nodeAgent.call(P, 'start', { ...MODEL, readerRecvBytes: 0 });
    const N = 5000;
    const clusterIP = (i: number) => `10.96.${10 + (i >> 8)}.${i & 255}`;
    const addr = (i: number, e: number) => `10.245.${((i * 10 + e) >> 8) & 255}.${(i * 10 + e) & 255}`;
    const fake = (i: number, e: number) => ep(addr(i, e));
    const ten = (i: number, from = 0) => Array.from({ length: 10 }, (_, e) => fake(i + from, e));
    const services = Array.from({ length: N }, (_, i) => svc(`s${i}`, { clusterIP: clusterIP(i) }));
    const cold = await apply(c, {
      services,
      slices: Array.from({ length: N }, (_, i) => slice(`s${i}-1`, `s${i}`, i === 3 ? [ep(podIP(0))] : ten(i))),
    });
    t.deepEqual(cold.errors, []);
    t.deepEqual([...pods(await tcpMany(c, 'client', clusterIP(3), 80, 4))], ['pod1']);
    // s3 moves to the other pod; s5 changes its ten endpoints: elements of the map being dumped.
    const { dumpRunning, runs } = await c.nodeAgent.call<{ dumpRunning: boolean; runs: number }>(
      P,
      'fullSyncWithArrivalDuringDump',
      { slices: [slice('s3-1', 's3', [ep(podIP(1))]), slice('s5-1', 's5', ten(5, N))] },
      'endpoints-10',
    );
    t.is(runs, 1, 'the change went in on its own, before the full sync wrote anything');
    t.true(dumpRunning, 'the change went in while the kernel was still dumping the map');
    t.deepEqual([...pods(await tcpMany(c, 'client', clusterIP(3), 80, 8))], ['pod2'], 'moved while the full sync runs');
    const r = await c.nodeAgent.call<{ full: boolean; errors: string[] }>(P, 'finishFullSync');
    t.true(r.full);
    t.deepEqual(r.errors, []);
    t.log(`dumps the kernel marked interrupted: ${await c.nodeAgent.call<number>(P, 'dumpsInterrupted')}`);
    // What the dump read while the change went in was corrected: nothing is left to repair.
    t.deepEqual(await c.nodeAgent.call(P, 'repairsLeft'), { elements: 0, errors: [] });
    t.deepEqual([...pods(await tcpMany(c, 'client', clusterIP(3), 80, 8))], ['pod2'], 'and the full sync kept it');
    const map = await c.node.run('nft', 'list', 'map', 'ip', 'kube-proxy-ts', 'endpoints-10');
    t.true(map.includes(`${addr(5 + N, 9)} `), "s5's new endpoints are in the map");
    t.false(map.includes(`${addr(5, 9)} `), 'and its old ones gone');
  },
);

test.serial(
  'a change arriving while a full sync reads the kernel is answered by packets before that sync ends',
  async (t) => {
    const c = await cluster(t, 'arv', 2);
    const N = 20;
    const services = Array.from({ length: N }, (_, i) => svc(`s${i}`, { clusterIP: `10.96.1.${i + 1}` }));
    await apply(c, {
      services,
      slices: Array.from({ length: N }, (_, i) => slice(`s${i}-1`, `s${i}`, [ep(podIP(0))])),
    });
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.4', 80, 4))], ['pod1']);
    // The full sync is held before its first write once the change is in.
    const runs = await c.nodeAgent.call<number>(P, 'fullSyncWithArrival', {
      slices: [slice('s3-1', 's3', [ep(podIP(1))])],
    });
    t.is(runs, 1, 'the change went in on its own, before the full sync wrote anything');
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.4', 80, 8))], ['pod2'], 'moved while the full sync runs');
    const r = await c.nodeAgent.call<{ full: boolean; errors: string[] }>(P, 'finishFullSync');
    t.true(r.full);
    t.deepEqual(r.errors, []);
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.4', 80, 8))], ['pod2'], 'and the full sync kept it');
    t.deepEqual([...pods(await tcpMany(c, 'client', '10.96.1.6', 80, 4))], ['pod1'], 'the others untouched');
  },
);
