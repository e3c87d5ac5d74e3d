// --service-traffic-metrics in the nftables proxier over FakeNft: which objects a sync writes
// and removes. The counts themselves, with real packets: test/kernel/nft-service-traffic.test.ts.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;

function setup(serviceTraffic: boolean) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), serviceTraffic });
  const sync = async () => {
    const c = t.checkout();
    return proxier.sync(c.desired, c.change, signal);
  };
  return { t, nft, proxier, sync };
}

const np = svc('np', {
  clusterIP: '10.96.0.10',
  type: 'NodePort',
  ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
});

test('without the flag: no counting map, chain or counter', async (t) => {
  const { t: tracker, nft, proxier, sync } = setup(false);
  tracker.onService(undefined, np);
  tracker.onEndpointSlice(slice('np-1', 'np', [ep('10.244.1.2')]), false);
  await sync();
  t.false(/traffic|connections-|count-|counter/.test(nft.dump()));
  t.deepEqual(await proxier.trafficCounters(), []);
});

test('with the flag: a chain per frontend kind and counter; partial syncs keep and remove them', async (t) => {
  const { t: tracker, nft, proxier, sync } = setup(true);
  tracker.onService(undefined, np);
  tracker.onEndpointSlice(slice('np-1', 'np', [ep('10.244.1.2')]), false);
  await sync();
  const dump = nft.dump();
  t.regex(dump, /add rule ip kube-proxy-ts services jump count-connections/);
  const services = nft.chain('services')!.rules.map((r) => r.text);
  t.is(services[0], 'jump count-connections', 'counted before the frontend dispatch ends the chain');
  for (const kind of ['cluster-ip', 'node-port'])
    for (const what of ['traffic', 'connections'])
      t.regex(dump, new RegExp(`add chain ip kube-proxy-ts ${what}-${kind}-[A-Z0-9]{8}-default/np/tcp/p\\n`));
  t.notRegex(dump, /traffic-external-/, 'no external IP, no external counter');
  t.truthy(nft.lookupVerdict('traffic-nodeports', ['tcp', 30080]));
  t.truthy(nft.lookupVerdict('connections-services', ['10.96.0.10', 'tcp', 80]));

  // explain reads the counting objects back too: the kernel agrees with the plan (no false drift).
  const info = [...tracker.checkout().desired.services.values()][0]!;
  const d = await proxier.describe(info);
  const text = (es: typeof d.kernel) => es.map((e) => `${e.where} ${e.key} ${e.value}`).sort();
  t.deepEqual(text(d.kernel), text(d.expected));
  t.true(text(d.kernel).some((e) => /^chain traffic-node-port-\S+ 1 rules$/.test(e)));
  t.true(text(d.kernel).some((e) => /^connections-nodeports tcp \. 30080 goto connections-node-port-/.test(e)));

  // An endpoint change leaves the counting chains alone (their counts survive).
  tracker.onEndpointSlice(slice('np-1', 'np', [ep('10.244.1.2'), ep('10.244.1.3')]), false);
  await sync();
  t.false(/chain ip kube-proxy-ts (traffic|connections)-/.test(nft.lastTransaction!.toString()));

  // The Service gone: its elements and chains go.
  tracker.onService(np, undefined);
  await sync();
  t.is(nft.set('traffic-services')!.elements.length, 0);
  t.false(
    [...nft.dump().matchAll(/add chain ip kube-proxy-ts (\S+)/g)].some((m) => /^(traffic|connections)-/.test(m[1]!)),
  );
});
