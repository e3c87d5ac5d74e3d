// The nftables proxier over FakeNft (all-or-nothing, like the kernel): what a sync writes, and
// (traced through the rules, test/helpers/nft-tracer.ts) where packets end after it. Per-kind
// behaviour is in trace.test.ts; with real packets in test/kernel/nft-proxier.test.ts.
import test from 'ava';
import { memoryLogger, type LogRecord } from '../../../../src/base/logger.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { NftTracer } from '../../../helpers/nft-tracer.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;
const POD = '10.244.200.1';

/** Where a new TCP connection from a local pod to vip:port can end (DNAT destinations). */
const reach = (nft: FakeNft, vip: string, port = 80, saddr = POD): string[] => {
  const r = new NftTracer(nft, { localAddresses: ['192.168.1.10'] }).trace({
    protocol: 'tcp',
    saddr,
    daddr: vip,
    dport: port,
  });
  return r.verdict === 'accept' ? r.endpoints : [r.verdict];
};

function setup(services: number) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  for (let i = 0; i < services; i++) {
    const ip = `10.96.${i >> 8}.${i & 255}`;
    t.onService(undefined, svc(`s${i}`, { clusterIP: ip }));
    t.onEndpointSlice(
      slice(`s${i}-1`, `s${i}`, [ep(`10.244.${i >> 8}.${(i & 255) + 1}`), ep(`10.245.${i >> 8}.${(i & 255) + 1}`)]),
      false,
    );
  }
  return { t, nft, proxier };
}

test('a full sync writes everything; an unchanged state writes nothing', async (t) => {
  const { t: tracker, nft, proxier } = setup(50);
  const first = tracker.checkout();
  const r = await proxier.sync(first.desired, first.change, signal);
  t.true(r.full);
  t.is(r.servicesChanged, 50);
  t.deepEqual(reach(nft, '10.96.0.7'), ['10.244.0.8:8080', '10.245.0.8:8080']);
  t.deepEqual(reach(nft, '10.96.0.49'), ['10.244.0.50:8080', '10.245.0.50:8080']);
  const again = tracker.checkout();
  const r2 = await proxier.sync(again.desired, again.change, signal);
  t.false(r2.full);
  t.is(r2.servicesChanged, 0);
});

test('one endpoint added to one Service touches only that Service', async (t) => {
  const { t: tracker, nft, proxier } = setup(300);
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  tracker.onEndpointSlice(slice('s7-1', 's7', [ep('10.244.0.8'), ep('10.245.0.8'), ep('10.246.0.8')]), false);
  const c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.false(r.full);
  t.is(r.servicesChanged, 1);
  const describe = (): string[] =>
    nft.lastTransaction!.operations.map(
      (o) =>
        `${o.verb} ${o.obj.kind} ${'set' in o.obj ? o.obj.set : 'chain' in o.obj ? o.obj.chain : 'name' in o.obj ? String(o.obj.name) : ''}`,
    );
  // 2 -> 3 endpoints: the first Service with 3 endpoints brings the picker for 3 (its map and
  // chain: the masquerade rule and one DNAT rule per protocol); the Service's frontend moves
  // from endpoints-2 to endpoints-3 and to that picker; one more hairpin element.
  t.deepEqual(describe(), [
    'add map endpoints-3',
    'add chain pick-internal-3',
    ...Array<string>(4).fill('add rule pick-internal-3'),
    'delete element endpoints-2',
    'delete element endpoints-2',
    'delete element service-ips',
    'add element service-ips',
    'add element endpoints-3',
    'add element endpoints-3',
    'add element endpoints-3',
    'add element hairpin',
  ]);
  t.deepEqual(reach(nft, '10.96.0.7'), ['10.244.0.8:8080', '10.245.0.8:8080', '10.246.0.8:8080']);
  t.deepEqual(reach(nft, '10.96.0.8'), ['10.244.0.9:8080', '10.245.0.9:8080'], 'its neighbour is unchanged');
  t.true(
    nft.lastTransaction!.operations.every((o) => !JSON.stringify(o.obj).includes('10.96.0.8')),
    'no other Service is touched',
  );

  // A second Service grows to 3: the picker exists, only its elements move.
  tracker.onEndpointSlice(slice('s8-1', 's8', [ep('10.244.0.9'), ep('10.245.0.9'), ep('10.246.0.9')]), false);
  const c2 = tracker.checkout();
  await proxier.sync(c2.desired, c2.change, signal);
  t.true(
    describe().every((d) => d.includes(' element ')),
    describe().join('; '),
  );
  t.is(describe().length, 8);

  // An endpoint replaced by another: the same picker, its slot rewritten, nothing else.
  tracker.onEndpointSlice(slice('s8-1', 's8', [ep('10.244.0.9'), ep('10.245.0.9'), ep('10.246.0.99')]), false);
  const c3 = tracker.checkout();
  await proxier.sync(c3.desired, c3.change, signal);
  t.deepEqual(describe(), [
    'delete element hairpin',
    'delete element endpoints-3',
    'add element endpoints-3',
    'add element hairpin',
  ]);
  t.deepEqual(reach(nft, '10.96.0.8'), ['10.244.0.9:8080', '10.245.0.9:8080', '10.246.0.99:8080']);
  t.deepEqual(reach(nft, '10.96.0.7'), ['10.244.0.8:8080', '10.245.0.8:8080', '10.246.0.8:8080']);
});

test('a Service deleted leaves no element and no chain behind', async (t) => {
  const { t: tracker, nft, proxier } = setup(3);
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  t.deepEqual(reach(nft, '10.96.0.1'), ['10.244.0.2:8080', '10.245.0.2:8080']);
  tracker.onService(svc('s1', { clusterIP: '10.96.0.1' }), undefined);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  t.deepEqual(reach(nft, '10.96.0.1'), ['drop'], 'an unused address of the service CIDR');
  t.deepEqual(reach(nft, '10.96.0.2'), ['10.244.0.3:8080', '10.245.0.3:8080'], 'others stay');
  const after = nft.dump();
  t.false(after.includes('10.96.0.1 '), after);
  t.false(after.includes('10.244.0.2'), 'its endpoints are gone from the maps');
  t.false(after.includes('s1'), 'and no chain of its own is left');
});

test('a failed transaction leaves the previous state and forces a full sync next', async (t) => {
  const { t: tracker, nft, proxier } = setup(3);
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  const before = nft.dump();
  const realRun = nft.run.bind(nft);
  nft.run = async () => {
    throw new Error('kernel said no');
  };
  tracker.onEndpointSlice(slice('s0-1', 's0', [ep('10.244.0.1')]), false);
  const c = tracker.checkout();
  await t.throwsAsync(proxier.sync(c.desired, c.change, signal), { message: 'kernel said no' });
  t.is(nft.dump(), before);
  t.deepEqual(reach(nft, '10.96.0.0'), ['10.244.0.1:8080', '10.245.0.1:8080'], 'still the old endpoints');
  nft.run = realRun;
  const again = tracker.checkout();
  const r = await proxier.sync(again.desired, again.change, signal);
  t.true(r.full, 'after a failure the next sync is full');
  t.deepEqual(reach(nft, '10.96.0.0'), ['10.244.0.1:8080'], 'and it converges to the desired state');
});

test('a full sync larger than the batch budget is cut into batches and ends in the same state', async (t) => {
  const big = setup(120);
  const one = big.t.checkout();
  await big.proxier.sync(one.desired, one.change, signal);
  const whole = big.nft.dump();

  const { t: tracker } = setup(120);
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const chunked = new NftablesProxier({ nft, logger: memoryLogger(), maxBatchBytes: 16_384 });
  const c = tracker.checkout();
  const r = await chunked.sync(c.desired, c.change, signal);
  t.true((r.batches ?? 0) > 5, `batches: ${r.batches}`);
  t.is(nft.dump(), whole);
});

test('a full sync over a kernel that already holds the state changes no element', async (t) => {
  const { t: tracker, nft, proxier } = setup(40);
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  const before = nft.set('endpoints-2')!.elements.length;
  // A new process: fresh proxier, same kernel.
  const restarted = new NftablesProxier({ nft, logger: memoryLogger() });
  tracker.requestFullSync();
  const c = tracker.checkout();
  await restarted.sync(c.desired, c.change, signal);
  const ops = nft.lastTransaction!.operations;
  t.is(
    ops.filter(
      (o) =>
        o.obj.kind === 'element' &&
        o.obj.set !== 'nodeport-ips' &&
        o.obj.set !== 'pod-cidrs' &&
        o.obj.set !== 'service-cidrs',
    ).length,
    0,
    'only the node-dependent sets are refilled',
  );
  t.is(nft.set('endpoints-2')!.elements.length, before);
});

/** The elements of a FakeNft set as nft text, e.g. "10.244.0.5 . 10.244.0.5". */
const elementsOf = (nft: FakeNft, set: string): string[] =>
  nft
    .dump()
    .split('\n')
    .filter((l) => l.startsWith(`add element ip ${TABLE} ${set} `))
    .map((l) => l.slice(l.indexOf('{ ') + 2, l.lastIndexOf(' }')));

test('an address listed twice by one service port keeps its hairpin element through later changes', async (t) => {
  // Two slices give the same pod under two target ports: one address, two endpoints.
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tracker.onService(undefined, svc('web', { clusterIP: '10.96.0.10' }));
  tracker.onEndpointSlice(
    slice('web-1', 'web', [ep('10.244.0.5')], { ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }),
    false,
  );
  tracker.onEndpointSlice(
    slice('web-2', 'web', [ep('10.244.0.5')], { ports: [{ name: 'p', protocol: 'TCP', port: 9090 }] }),
    false,
  );
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  t.true(elementsOf(nft, 'hairpin').includes('10.244.0.5 . 10.244.0.5'));
  const hairpin = (pod: string): boolean => {
    const toItself = new NftTracer(nft, { localAddresses: [] })
      .paths({ protocol: 'tcp', saddr: pod, daddr: '10.96.0.10', dport: 80 })
      .filter((p) => p.dnat?.startsWith(`${pod}:`));
    return toItself.length > 0 && toItself.every((p) => p.masquerade);
  };
  t.true(hairpin('10.244.0.5'), 'the pod reaching itself is masqueraded');
  // A partial sync of the same port (one more endpoint) must not drop it.
  tracker.onEndpointSlice(
    slice('web-1', 'web', [ep('10.244.0.5'), ep('10.244.0.6')], {
      ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
    }),
    false,
  );
  const c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.false(r.full);
  t.deepEqual(elementsOf(nft, 'hairpin').sort(), ['10.244.0.5 . 10.244.0.5', '10.244.0.6 . 10.244.0.6']);
  t.true(hairpin('10.244.0.5'));
  t.true(hairpin('10.244.0.6'));
  t.deepEqual(reach(nft, '10.96.0.10'), ['10.244.0.5:8080', '10.244.0.5:9090', '10.244.0.6:8080']);
});

test('an external IP that is also the load-balancer IP keeps its frontend through later changes', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  const lb = svc('lb', {
    clusterIP: '10.96.0.20',
    type: 'LoadBalancer',
    externalIPs: ['192.0.2.7'],
    ingress: [{ ip: '192.0.2.7' }],
    ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
  });
  tracker.onService(undefined, lb);
  tracker.onEndpointSlice(slice('lb-1', 'lb', [ep('10.244.0.7')]), false);
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  const frontend = (): string[] => elementsOf(nft, 'service-ips').filter((e) => e.startsWith('192.0.2.7 '));
  t.is(frontend().length, 1);
  // The endpoint replaced by another: the frontend's element itself does not change.
  tracker.onEndpointSlice(slice('lb-1', 'lb', [ep('10.244.0.8')]), false);
  const c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.false(r.full);
  t.deepEqual(frontend(), ['192.0.2.7 . tcp . 80 : goto pick-external-1']);
  const traced = new NftTracer(nft, { localAddresses: [] }).trace({
    protocol: 'tcp',
    saddr: '203.0.113.9',
    daddr: '192.0.2.7',
    dport: 80,
  });
  t.deepEqual([traced.endpoints, traced.masquerade], [['10.244.0.8:8080'], true]);
});

test('nodePortAddresses covering localhost: said once (as upstream logs it), loopback left out of the node-port addresses', async (t) => {
  const { t: tracker } = newTracker({ nodePortAddresses: ['127.0.0.0/8', '192.168.1.0/24'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const records: LogRecord[] = [];
  const proxier = new NftablesProxier({
    nft,
    logger: memoryLogger(records),
    localAddresses: () => Promise.resolve(['192.168.1.10', '10.0.0.5']),
  });
  tracker.onService(
    undefined,
    svc('web', { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  );
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  tracker.requestFullSync();
  const again = tracker.checkout();
  await proxier.sync(again.desired, again.change, signal);
  const warned = records.filter((r) => r.msg.includes('localhost NodePorts are not supported'));
  t.is(warned.length, 1, 'once, not on every full sync');
  t.deepEqual(warned[0]!.fields['cidrs'], ['127.0.0.0/8']);
  t.deepEqual(
    (await nft.listElements('nodeport-ips')).map((e) => e.key.join()),
    ['192.168.1.10'],
  );
  tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.244.0.7')]), false);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const tracer = new NftTracer(nft, { localAddresses: ['192.168.1.10', '10.0.0.5'] });
  const to = (daddr: string) =>
    tracer.trace({ protocol: 'tcp', saddr: daddr, daddr, dport: 30080, from: 'local' }).endpoints;
  t.deepEqual(to('192.168.1.10'), ['10.244.0.7:8080']);
  t.deepEqual(to('10.0.0.5'), [], 'outside nodePortAddresses');
  t.deepEqual(to('127.0.0.1'), [], 'loopback left out');
});

test('a node address moving into nodePortAddresses is picked up by the next partial sync (a full one then)', async (t) => {
  const { t: tracker } = newTracker({ nodePortAddresses: ['192.168.1.0/24'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  let addrs = ['192.168.1.10', '10.0.0.5'];
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), localAddresses: () => Promise.resolve(addrs) });
  tracker.onService(
    undefined,
    svc('web', { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  );
  const sync = async () => {
    const c = tracker.checkout();
    return (await proxier.sync(c.desired, c.change, signal)).full;
  };
  const ips = async () => (await nft.listElements('nodeport-ips')).map((e) => e.key.join()).sort();
  t.true(await sync());
  t.false(await sync(), 'the periodic run, nothing moved: partial');
  addrs = ['192.168.1.10', '192.168.1.11', '10.0.0.5'];
  t.true(await sync(), 'an address came: full');
  t.deepEqual(await ips(), ['192.168.1.10', '192.168.1.11']);
  t.false(await sync());
});

test('full syncs, and only they, are reported to onFullSync around them, also when one fails', async (t) => {
  const { t: tracker, nft } = setup(3);
  const events: boolean[] = [];
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), onFullSync: (running) => events.push(running) });
  const first = tracker.checkout();
  await proxier.sync(first.desired, first.change, signal);
  t.deepEqual(events, [true, false], 'the first sync is a full one');

  tracker.onEndpointSlice(slice('s0-2', 's0', [ep('10.244.9.9')]), false);
  const partial = tracker.checkout();
  await proxier.sync(partial.desired, partial.change, signal);
  t.deepEqual(events, [true, false], 'a partial sync keeps the drift watch listening');

  tracker.requestFullSync();
  const failing = tracker.checkout();
  nft.run = () => Promise.reject(new Error('the kernel said no'));
  await t.throwsAsync(proxier.sync(failing.desired, failing.change, signal), { message: /the kernel said no/ });
  t.deepEqual(events, [true, false, true, false], 'a failed full sync ends its pause too');
});

test('a partial sync larger than the batch budget goes out in several batches, stays partial, and ends in the same state', async (t) => {
  // The same history through an unbounded proxier and one with small batches.
  const whole = setup(200);
  const { t: tracker } = setup(200);
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const chunked = new NftablesProxier({ nft, logger: memoryLogger(), maxBatchBytes: 16_384 });
  const step = async (change: (tr: typeof tracker) => void) => {
    change(whole.t);
    change(tracker);
    const a = whole.t.checkout();
    await whole.proxier.sync(a.desired, a.change, signal);
    const b = tracker.checkout();
    return chunked.sync(b.desired, b.change, signal);
  };
  await step(() => {});
  // A mass change: 150 Services get a third endpoint (a new picker, needed before them), 30
  // go, 30 appear.
  const r = await step((tr) => {
    for (let i = 0; i < 150; i++)
      tr.onEndpointSlice(
        slice(`s${i}-1`, `s${i}`, [ep(`10.244.0.${i + 1}`), ep(`10.245.0.${i + 1}`), ep(`10.246.0.${i + 1}`)]),
        false,
      );
    for (let i = 170; i < 200; i++) tr.onService(svc(`s${i}`, { clusterIP: `10.96.0.${i}` }), undefined);
    for (let i = 0; i < 30; i++) {
      tr.onService(undefined, svc(`n${i}`, { clusterIP: `10.96.3.${i + 1}` }));
      tr.onEndpointSlice(slice(`n${i}-1`, `n${i}`, [ep(`10.247.0.${i + 1}`)]), false);
    }
  });
  t.false(r.full);
  t.true((r.batches ?? 0) > 2, `batches: ${r.batches}`);
  t.is(nft.dump(), whole.nft.dump());
  t.deepEqual(reach(nft, '10.96.0.7'), ['10.244.0.8:8080', '10.245.0.8:8080', '10.246.0.8:8080']);
  t.deepEqual(reach(nft, '10.96.3.5'), ['10.247.0.5:8080']);
  // And back: the three-endpoint picker is used by no one after the last port's batch, and goes last.
  const back = await step((tr) => {
    for (let i = 0; i < 150; i++)
      tr.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.244.0.${i + 1}`), ep(`10.245.0.${i + 1}`)]), false);
  });
  t.false(back.full);
  t.true((back.batches ?? 0) > 2, `batches: ${back.batches}`);
  t.is(nft.dump(), whole.nft.dump());
  t.false(nft.dump().includes('pick-internal-3'));
});
