// Per-Service load balancing in nftables mode, traced through FakeNft (the kernel tests send
// real packets): the port's own chains reach every endpoint, an endpoint change rewrites
// only the buckets that move, an unsupported value keeps the pickers and is reported.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { checkLoadBalancing } from '../../../../src/daemon/load-balancing-notices.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import type { NftTransaction } from '../../../../src/netlink/nftables/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { NftTracer } from '../../../helpers/nft-tracer.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;

const reach = (nft: FakeNft, vip: string): string[] => {
  const r = new NftTracer(nft, { localAddresses: ['192.168.1.10'] }).trace({
    protocol: 'tcp',
    saddr: '10.244.200.1',
    daddr: vip,
    dport: 80,
  });
  return r.verdict === 'accept' ? [...r.endpoints].sort() : [r.verdict];
};

function annotated(name: string, clusterIP: string, how: string) {
  const s = svc(name, { clusterIP });
  s.metadata!.annotations = { 'kube-proxy-ts.io/load-balancing': how };
  return s;
}

const eps = (n: number, skip = -1) =>
  Array.from({ length: n }, (_, i) => i)
    .filter((i) => i !== skip)
    .map((i) => ep(`10.244.1.${i + 1}`));

/** Elements the transaction adds or deletes in balancing maps. */
function bucketOps(tx: NftTransaction | undefined): number {
  return (tx?.toString() ?? '').split('\n').filter((l) => /element .* balance-/.test(l)).length;
}

test('round-robin and consistent-hash ports reach every endpoint through their own chains', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tr.onService(undefined, annotated('rr', '10.96.0.20', 'round-robin'));
  tr.onEndpointSlice(slice('rr-1', 'rr', eps(3)), false);
  tr.onService(undefined, annotated('ch', '10.96.0.30', 'consistent-hash'));
  tr.onEndpointSlice(slice('ch-1', 'ch', eps(3)), false);
  const c = tr.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const all = ['10.244.1.1:8080', '10.244.1.2:8080', '10.244.1.3:8080'];
  t.deepEqual(reach(nft, '10.96.0.20'), all);
  t.deepEqual(reach(nft, '10.96.0.30'), all);
  const text = nft.dump();
  t.regex(text, /numgen inc mod 3 map @balance-cluster-/);
  t.regex(text, /jhash ip saddr mod 401 seed 0x00000000 map @balance-cluster-/);
  t.notRegex(text, /chain pick-internal-3/, 'no shared picker for ports that balance on their own');
});

test('consistent-hash: removing 1 of 10 endpoints rewrites only the buckets that move', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tr.onService(undefined, annotated('ch', '10.96.0.30', 'consistent-hash'));
  tr.onEndpointSlice(slice('ch-1', 'ch', eps(10)), false);
  let c = tr.checkout();
  await proxier.sync(c.desired, c.change, signal);
  t.is(bucketOps(nft.lastTransaction) > 0, true);
  tr.onEndpointSlice(slice('ch-1', 'ch', eps(10, 9)), false);
  c = tr.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.false(r.full);
  const ops = bucketOps(nft.lastTransaction);
  // 1,601 buckets: the removed endpoint's ~160, and a few of the others, each deleted and re-added.
  t.true(ops > 0 && ops <= 2 * 260, `bucket operations: ${ops}`);
  t.false(nft.dump().includes('10.244.1.10 . 8080'), 'no bucket holds the removed endpoint');
});

test("an unsupported value keeps the shared pickers and is reported with the reason (the sync's check)", async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const told: string[] = [];
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tr.onService(undefined, annotated('lc', '10.96.0.40', 'least-connection'));
  tr.onEndpointSlice(slice('lc-1', 'lc', eps(2)), false);
  const c = tr.checkout();
  checkLoadBalancing('nftables', undefined, c.desired, c.change, (s, asked, why) =>
    told.push(`${s.namespace}/${s.name} ${asked}: ${why}`),
  );
  await proxier.sync(c.desired, c.change, signal);
  t.deepEqual(told, [
    'default/lc least-connection: least-connection is not supported in nftables mode (supported: random, round-robin, consistent-hash)',
  ]);
  t.regex(nft.dump(), /goto pick-internal-2/);
  t.deepEqual(reach(nft, '10.96.0.40'), ['10.244.1.1:8080', '10.244.1.2:8080']);
});

test('the node default applies to Services without the annotation; affinity wins', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), loadBalancing: 'round-robin' });
  tr.onService(undefined, svc('plain', { clusterIP: '10.96.0.50' }));
  tr.onEndpointSlice(slice('plain-1', 'plain', eps(2)), false);
  tr.onService(undefined, svc('sticky', { clusterIP: '10.96.0.51', affinity: 'ClientIP', timeout: 60 }));
  tr.onEndpointSlice(slice('sticky-1', 'sticky', eps(2)), false);
  const c = tr.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const text = nft.dump();
  t.is((text.match(/numgen inc mod 2/g) ?? []).length, 1, 'only the Service without affinity balances round-robin');
  t.regex(text, /affinity-/);
});

test('a restarted proxier reads the balancing maps back and keeps every slot', async (t) => {
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const dumps: string[] = [];
  for (let k = 0; k < 2; k++) {
    const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
    const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
    tr.onService(undefined, annotated('rr', '10.96.0.20', 'round-robin'));
    tr.onEndpointSlice(slice('rr-1', 'rr', eps(2)), false);
    const c = tr.checkout();
    t.deepEqual((await proxier.sync(c.desired, c.change, signal)).errors, []);
    dumps.push(nft.dump());
  }
  t.is(dumps[1], dumps[0]);
  t.deepEqual(reach(nft, '10.96.0.20'), ['10.244.1.1:8080', '10.244.1.2:8080']);
});

test('explain: a balancing port is in sync, its map and buckets read back from the kernel', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tr.onService(undefined, annotated('ch', '10.96.0.30', 'consistent-hash'));
  tr.onEndpointSlice(slice('ch-1', 'ch', eps(2)), false);
  const c = tr.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const d = await proxier.describe(c.desired.services.values().next().value!);
  const key = (e: { where: string; key: string; value: string }) => `${e.where}|${e.key}|${e.value}`;
  t.deepEqual(d.kernel.map(key).sort(), d.expected.map(key).sort());
  t.is(d.kernel.filter((e) => e.where.startsWith('balance-')).length, 211, 'one entry per bucket');
});

test('switching round-robin -> consistent-hash -> none leaves nothing of the port behind', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tr.onEndpointSlice(slice('s-1', 's', eps(3)), false);
  const all = ['10.244.1.1:8080', '10.244.1.2:8080', '10.244.1.3:8080'];
  for (const how of ['round-robin', 'consistent-hash', undefined]) {
    tr.onService(undefined, how ? annotated('s', '10.96.0.60', how) : svc('s', { clusterIP: '10.96.0.60' }));
    const c = tr.checkout();
    const r = await proxier.sync(c.desired, c.change, signal);
    t.deepEqual(r.errors, []);
    t.deepEqual(reach(nft, '10.96.0.60'), all, String(how));
  }
  t.notRegex(nft.dump(), /balance-|service-[A-Z0-9]{8}-/);
});
