// The nftables proxier's rules, traced packet by packet through FakeNft (test/helpers/nft-tracer.ts):
// where a connection's first packet ends for each kind of Service, before the kernel tests
// (test/kernel/nft-proxier*.test.ts) send real ones.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import type { ModelOptions } from '../../../../src/model/types.ts';
import type { EndpointSlice, Service } from '../../../../src/model/k8s.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { NftTracer, type TracePacket } from '../../../helpers/nft-tracer.ts';
import { ep, newTracker, NODE, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;
const NODE_IP = '192.168.1.10';
const POD = '10.244.0.50'; // a pod on this node (inside the cluster CIDR)
const REMOTE = '203.0.113.9'; // a client outside the cluster

/** Syncs the Services and slices into a FakeNft and returns a tracer over it. */
async function cluster(services: Service[], slices: EndpointSlice[], o: Partial<ModelOptions> = {}) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'], ...o });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({
    nft,
    logger: memoryLogger(),
    localAddresses: () => Promise.resolve([NODE_IP]),
  });
  for (const s of services) t.onService(undefined, s);
  for (const s of slices) t.onEndpointSlice(s, false);
  const sync = async () => {
    const c = t.checkout();
    await proxier.sync(c.desired, c.change, signal);
  };
  await sync();
  return { t, nft, sync, tracer: new NftTracer(nft, { localAddresses: [NODE_IP] }) };
}

const tcp = (saddr: string, daddr: string, dport: number, o: Partial<TracePacket> = {}): TracePacket => ({
  protocol: 'tcp',
  saddr,
  daddr,
  dport,
  ...o,
});

test('ClusterIP: from a pod, one of the endpoints, not masqueraded; from elsewhere, masqueraded', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5'), ep('10.244.1.5')])],
  );
  const fromPod = tracer.trace(tcp(POD, '10.96.0.10', 80));
  t.is(fromPod.verdict, 'accept');
  t.deepEqual(fromPod.endpoints, ['10.244.0.5:8080', '10.244.1.5:8080']);
  t.false(fromPod.masquerade);
  t.is(fromPod.route, 'forward');
  const fromOutside = tracer.trace(tcp(REMOTE, '10.96.0.10', 80));
  t.deepEqual(fromOutside.endpoints, ['10.244.0.5:8080', '10.244.1.5:8080']);
  t.true(fromOutside.masquerade);
  const fromNode = tracer.trace(tcp(NODE_IP, '10.96.0.10', 80, { from: 'local' }));
  t.deepEqual(fromNode.endpoints, ['10.244.0.5:8080', '10.244.1.5:8080']);
  t.true(fromNode.masquerade, 'the node is not a pod');
  t.is(fromNode.route, 'output');
});

test('ClusterIP: a port the Service does not expose is rejected; another address in the service CIDR dropped', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
  );
  t.is(tracer.trace(tcp(POD, '10.96.0.10', 81)).verdict, 'reject');
  t.is(tracer.trace(tcp(POD, '10.96.0.99', 80)).verdict, 'drop');
  t.is(tracer.trace(tcp(POD, '10.96.0.10', 81, { from: 'local', saddr: NODE_IP })).verdict, 'reject');
  const unrelated = tracer.trace(tcp(POD, '198.51.100.1', 80));
  t.deepEqual([unrelated.verdict, unrelated.endpoints, unrelated.masquerade], ['accept', [], false]);
});

test('a packet of an established connection is not NATed again', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
  );
  const r = tracer.trace(tcp(POD, '10.96.0.10', 81, { ct: 'established' }));
  t.deepEqual([r.verdict, r.endpoints], ['accept', []]);
});

test('a pod reaching itself through its Service is masqueraded (hairpin)', async (t) => {
  const { tracer } = await cluster([svc('web', { clusterIP: '10.96.0.10' })], [slice('web-1', 'web', [ep(POD)])]);
  const r = tracer.trace(tcp(POD, '10.96.0.10', 80));
  t.deepEqual(r.endpoints, [`${POD}:8080`]);
  t.true(r.masquerade);
});

test('no endpoints: the cluster IP, node port and external IP reject', async (t) => {
  const { tracer } = await cluster(
    [
      svc('empty', {
        clusterIP: '10.96.0.30',
        type: 'NodePort',
        externalIPs: ['198.51.100.30'],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30030 }],
      }),
    ],
    [],
  );
  t.is(tracer.trace(tcp(POD, '10.96.0.30', 80)).verdict, 'reject');
  t.is(tracer.trace(tcp(REMOTE, NODE_IP, 30030)).verdict, 'reject');
  t.is(tracer.trace(tcp(NODE_IP, NODE_IP, 30030, { from: 'local' })).verdict, 'reject');
  t.is(tracer.trace(tcp(REMOTE, '198.51.100.30', 80)).verdict, 'reject');
});

test('NodePort: on a node address, to any endpoint, masqueraded; not on loopback', async (t) => {
  const { tracer } = await cluster(
    [
      svc('np', {
        clusterIP: '10.96.0.40',
        type: 'NodePort',
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30040 }],
      }),
    ],
    [slice('np-1', 'np', [ep('10.244.0.5'), ep('10.244.1.5')])],
  );
  const r = tracer.trace(tcp(REMOTE, NODE_IP, 30040));
  t.deepEqual(r.endpoints, ['10.244.0.5:8080', '10.244.1.5:8080']);
  t.true(r.masquerade);
  t.is(r.route, 'forward');
  t.deepEqual(tracer.trace(tcp(REMOTE, '192.168.1.99', 30040)).endpoints, [], 'not an address of this node');
  t.deepEqual(
    tracer.trace(tcp('127.0.0.1', '127.0.0.1', 30040, { from: 'local' })).endpoints,
    [],
    'no localhost node ports',
  );
  t.deepEqual(tracer.trace(tcp(REMOTE, NODE_IP, 30041)).endpoints, [], 'another port');
});

test('NodePort with nodePortAddresses: only the addresses inside them answer', async (t) => {
  const { tracer } = await cluster(
    [
      svc('np', {
        clusterIP: '10.96.0.40',
        type: 'NodePort',
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30040 }],
      }),
    ],
    [slice('np-1', 'np', [ep('10.244.0.5')])],
    { nodePortAddresses: ['127.0.0.0/8', '192.168.1.0/24'] },
  );
  t.deepEqual(tracer.trace(tcp(REMOTE, NODE_IP, 30040)).endpoints, ['10.244.0.5:8080']);
  const lo = tracer.trace(tcp('127.0.0.1', '127.0.0.1', 30040, { from: 'local' }));
  t.deepEqual([lo.verdict, lo.endpoints], ['accept', []], 'loopback is left out');
});

test('externalIPs: to any endpoint, masqueraded; UDP to a TCP port does not match', async (t) => {
  const { tracer } = await cluster(
    [svc('ext', { clusterIP: '10.96.0.50', externalIPs: ['198.51.100.5'] })],
    [slice('ext-1', 'ext', [ep('10.244.0.5')])],
  );
  const r = tracer.trace(tcp(REMOTE, '198.51.100.5', 80));
  t.deepEqual([r.verdict, r.endpoints, r.masquerade], ['accept', ['10.244.0.5:8080'], true]);
  const fromPod = tracer.trace(tcp(POD, '198.51.100.5', 80));
  t.true(fromPod.masquerade, 'external traffic is masqueraded even from a pod');
  t.deepEqual(tracer.trace({ ...tcp(REMOTE, '198.51.100.5', 80), protocol: 'udp' }).endpoints, []);
});

test('LoadBalancer with source ranges: sources inside reach the endpoints, others are dropped', async (t) => {
  const { tracer } = await cluster(
    [
      svc('lb', {
        clusterIP: '10.96.0.60',
        type: 'LoadBalancer',
        ingress: [{ ip: '198.51.100.60' }],
        sourceRanges: ['203.0.113.0/24'],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30060 }],
      }),
    ],
    [slice('lb-1', 'lb', [ep('10.244.0.5')])],
  );
  const allowed = tracer.trace(tcp('203.0.113.77', '198.51.100.60', 80));
  t.deepEqual([allowed.verdict, allowed.endpoints, allowed.masquerade], ['accept', ['10.244.0.5:8080'], true]);
  t.is(tracer.trace(tcp('198.18.0.1', '198.51.100.60', 80)).verdict, 'drop');
  t.is(tracer.trace(tcp('198.18.0.1', '198.51.100.60', 80, { from: 'local' })).verdict, 'drop');
  t.deepEqual(
    tracer.trace(tcp('198.18.0.1', '10.96.0.60', 80)).endpoints,
    ['10.244.0.5:8080'],
    'the cluster IP is not firewalled',
  );
  t.deepEqual(tracer.trace(tcp('198.18.0.1', NODE_IP, 30060)).endpoints, ['10.244.0.5:8080'], 'nor the node port');
});

test('externalTrafficPolicy=Local: from outside only local endpoints, client address kept; from a pod or the node, any', async (t) => {
  const { tracer } = await cluster(
    [
      svc('lb', {
        clusterIP: '10.96.0.70',
        type: 'LoadBalancer',
        eTP: 'Local',
        ingress: [{ ip: '198.51.100.70' }],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30070 }],
      }),
    ],
    [slice('lb-1', 'lb', [ep('10.244.0.7', { node: NODE }), ep('10.244.1.7', { node: 'node-b' })])],
  );
  for (const [daddr, dport] of [
    ['198.51.100.70', 80],
    [NODE_IP, 30070],
  ] as const) {
    const outside = tracer.trace(tcp(REMOTE, daddr, dport));
    t.deepEqual(
      [outside.endpoints, outside.masquerade],
      [['10.244.0.7:8080'], false],
      `${daddr}:${dport} from outside`,
    );
    const pod = tracer.trace(tcp(POD, daddr, dport));
    t.deepEqual(
      [pod.endpoints, pod.masquerade],
      [['10.244.0.7:8080', '10.244.1.7:8080'], false],
      `${daddr} from a pod`,
    );
    const node = tracer.trace(tcp(NODE_IP, daddr, dport, { from: 'local' }));
    t.deepEqual(
      [node.endpoints, node.masquerade],
      [['10.244.0.7:8080', '10.244.1.7:8080'], true],
      `${daddr} from the node`,
    );
  }
  const cluster_ = tracer.trace(tcp(REMOTE, '10.96.0.70', 80));
  t.deepEqual(cluster_.endpoints, ['10.244.0.7:8080', '10.244.1.7:8080'], 'the cluster IP keeps every endpoint');
});

test('externalTrafficPolicy=Local without a local endpoint: external traffic is dropped, the cluster IP works', async (t) => {
  const { tracer } = await cluster(
    [
      svc('lb', {
        clusterIP: '10.96.0.71',
        type: 'LoadBalancer',
        eTP: 'Local',
        ingress: [{ ip: '198.51.100.71' }],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30071 }],
      }),
    ],
    [slice('lb-1', 'lb', [ep('10.244.1.7', { node: 'node-b' })])],
  );
  t.is(tracer.trace(tcp(REMOTE, '198.51.100.71', 80)).verdict, 'drop');
  t.is(tracer.trace(tcp(REMOTE, NODE_IP, 30071)).verdict, 'drop');
  t.deepEqual(tracer.trace(tcp(POD, '198.51.100.71', 80)).endpoints, ['10.244.1.7:8080'], 'short-circuit for pods');
  t.deepEqual(tracer.trace(tcp(POD, '10.96.0.71', 80)).endpoints, ['10.244.1.7:8080']);
});

test('internalTrafficPolicy=Local: the cluster IP reaches only local endpoints; without one it is dropped', async (t) => {
  const { tracer } = await cluster(
    [svc('a', { clusterIP: '10.96.0.80', iTP: 'Local' }), svc('b', { clusterIP: '10.96.0.81', iTP: 'Local' })],
    [
      slice('a-1', 'a', [ep('10.244.0.8', { node: NODE }), ep('10.244.1.8', { node: 'node-b' })]),
      slice('b-1', 'b', [ep('10.244.1.9', { node: 'node-b' })]),
    ],
  );
  t.deepEqual(tracer.trace(tcp(POD, '10.96.0.80', 80)).endpoints, ['10.244.0.8:8080']);
  t.is(tracer.trace(tcp(POD, '10.96.0.81', 80)).verdict, 'drop');
});

test('masquerade-all: traffic from a pod to a cluster IP is masqueraded too', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
    {
      masqueradeAll: true,
    },
  );
  const r = tracer.trace(tcp(POD, '10.96.0.10', 80));
  t.deepEqual([r.endpoints, r.masquerade], [['10.244.0.5:8080'], true]);
});

test('detect-local by interface: pods are what arrives on the bridge', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
    {
      detectLocalMode: 'BridgeInterface',
      bridgeInterface: 'br0',
    },
  );
  t.false(tracer.trace(tcp(POD, '10.96.0.10', 80, { iif: 'br0' })).masquerade);
  t.true(tracer.trace(tcp(POD, '10.96.0.10', 80, { iif: 'eth0' })).masquerade);
});

test('detect-local without a cluster CIDR: nothing is known local, so nothing to a cluster IP is masqueraded', async (t) => {
  // Upstream: with no local-traffic detector, cluster IP traffic is not masqueraded (masquerade-all aside).
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
    {
      clusterCIDRs: [],
    },
  );
  t.false(tracer.trace(tcp(REMOTE, '10.96.0.10', 80)).masquerade);
});

test('session affinity: a client sent to one endpoint keeps going there', async (t) => {
  const { tracer } = await cluster(
    [svc('a', { clusterIP: '10.96.0.90', affinity: 'ClientIP', timeout: 100 })],
    [slice('a-1', 'a', [ep('10.244.0.5'), ep('10.244.1.5')])],
  );
  const first = tracer.trace(tcp(POD, '10.96.0.90', 80));
  t.deepEqual(first.endpoints, ['10.244.0.5:8080', '10.244.1.5:8080']);
  const toSecond = first.paths.find((p) => p.dnat === '10.244.1.5:8080')!;
  tracer.learn(toSecond);
  t.deepEqual(tracer.trace(tcp(POD, '10.96.0.90', 80)).endpoints, ['10.244.1.5:8080']);
  t.deepEqual(tracer.trace(tcp('10.244.0.51', '10.96.0.90', 80)).endpoints.length, 2, 'another client is free');
});

test('terminating endpoints: used only when no endpoint is ready (for local traffic policies)', async (t) => {
  const terminating = ep('10.244.0.6', { ready: false, serving: true, terminating: true, node: NODE });
  const { tracer } = await cluster(
    [
      svc('a', {
        clusterIP: '10.96.0.100',
        type: 'LoadBalancer',
        eTP: 'Local',
        ingress: [{ ip: '198.51.100.100' }],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30100 }],
      }),
      svc('b', { clusterIP: '10.96.0.101' }),
    ],
    [
      slice('a-1', 'a', [terminating]),
      slice('b-1', 'b', [
        ep('10.244.0.5', { node: NODE }),
        ep('10.244.0.9', { ready: false, serving: true, terminating: true, node: NODE }),
      ]),
    ],
  );
  t.deepEqual(
    tracer.trace(tcp(REMOTE, '198.51.100.100', 80)).endpoints,
    ['10.244.0.6:8080'],
    'only terminating: fall back',
  );
  t.deepEqual(tracer.trace(tcp(POD, '10.96.0.101', 80)).endpoints, ['10.244.0.5:8080'], 'a ready one wins');
});

test("topology: zone hints keep traffic in this node's zone", async (t) => {
  const {
    t: tracker,
    tracer,
    sync,
  } = await cluster(
    [svc('z', { clusterIP: '10.96.0.110' })],
    [
      slice('z-1', 'z', [
        ep('10.244.0.11', { zone: 'a', zones: ['a'] }),
        ep('10.244.1.11', { zone: 'b', zones: ['b'] }),
      ]),
    ],
  );
  t.deepEqual(
    tracer.trace(tcp(POD, '10.96.0.110', 80)).endpoints,
    ['10.244.0.11:8080', '10.244.1.11:8080'],
    'zone not known yet',
  );
  tracker.onNode({
    metadata: { name: NODE, labels: { 'topology.kubernetes.io/zone': 'a' } },
    status: { addresses: [] },
  });
  await sync();
  t.deepEqual(tracer.trace(tcp(POD, '10.96.0.110', 80)).endpoints, ['10.244.0.11:8080']);
});

test('an unknown expression makes the trace fail naming it', async (t) => {
  const { nft, tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
  );
  const tx = nft.newTransaction();
  tx.add({
    kind: 'rule',
    chain: 'services',
    exprs: [{ type: 'limit', rate: 1n, unit: 1n, burst: 0, kind: 'packets' }],
  });
  await nft.run(tx);
  t.throws(() => tracer.trace(tcp(POD, '198.51.100.1', 80)), { message: /expression limit is not modelled/ });
});

test('IPv6: the ip6 table sends a cluster IP and a node port to the endpoints, masqueraded from outside', async (t) => {
  const { t: tracker } = newTracker({ family: 'IPv6', clusterCIDRs: ['fd44::/16'], serviceCIDRs: ['fd96::/112'] });
  const nft = new FakeNft({ family: 'ip6', table: TABLE });
  const proxier = new NftablesProxier({
    nft,
    logger: memoryLogger(),
    localAddresses: () => Promise.resolve(['fd00::10']),
  });
  const s = svc('web6', {
    clusterIPs: ['fd96::10'],
    type: 'NodePort',
    ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30600 }],
  });
  tracker.onService(undefined, { ...s, spec: { ...s.spec, ipFamilies: ['IPv6'] } });
  tracker.onEndpointSlice(slice('web6-1', 'web6', [ep('fd44:1::1'), ep('fd44:2::1')], { addressType: 'IPv6' }), false);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const tracer = new NftTracer(nft, { localAddresses: ['fd00::10'] });
  const fromPod = tracer.trace(tcp('fd44:1::9', 'fd96::10', 80));
  t.deepEqual([fromPod.endpoints, fromPod.masquerade], [['[fd44:1::1]:8080', '[fd44:2::1]:8080'], false]);
  const nodePort = tracer.trace(tcp('2001:db8::9', 'fd00::10', 30600));
  t.deepEqual([nodePort.endpoints, nodePort.masquerade], [['[fd44:1::1]:8080', '[fd44:2::1]:8080'], true]);
  t.is(tracer.trace(tcp('fd44:1::9', 'fd96::10', 81)).verdict, 'reject');
});

test('detect-local ClusterCIDR takes the first cluster CIDR of the family only (as upstream)', async (t) => {
  const { tracer } = await cluster(
    [svc('web', { clusterIP: '10.96.0.10' })],
    [slice('web-1', 'web', [ep('10.244.0.5')])],
    { clusterCIDRs: ['10.244.0.0/16', '10.245.0.0/16'] },
  );
  t.false(tracer.trace(tcp(POD, '10.96.0.10', 80)).masquerade);
  t.true(tracer.trace(tcp('10.245.0.50', '10.96.0.10', 80)).masquerade, 'the second CIDR is not local');
});
