// FakeIpsetKernel without a kernel (test/kernel/ipset-contract.test.ts holds it to the real one).
import test from 'ava';
import { isEntryExists, isSetBusy } from '../../../../src/netlink/ipset/index.ts';
import { fakeIpset } from '../../../../src/netlink/ipset/fake/index.ts';

test('a proxier-style sync against the fake: create, bulk add, swap, destroy', async (t) => {
  const { client, kernel } = fakeIpset();
  await client.create('KUBE-CLUSTER-IP', 'hash:ip,port', { comment: true });
  await client.create('KUBE-CLUSTER-IP-TMP', 'hash:ip,port', { comment: true });
  await client.addMany('KUBE-CLUSTER-IP-TMP', [
    { ip: '10.96.0.1', proto: 'tcp', port: 443, comment: 'default/kubernetes:https' },
    { ip: '10.96.0.10', proto: 'udp', port: 53 },
  ]);
  await client.swap('KUBE-CLUSTER-IP', 'KUBE-CLUSTER-IP-TMP');
  await client.destroy('KUBE-CLUSTER-IP-TMP');
  t.deepEqual(kernel.dump('KUBE-CLUSTER-IP'), {
    type: 'hash:ip,port',
    entries: ['10.96.0.1,tcp:443 comment "default/kubernetes:https"', '10.96.0.10,udp:53'],
  });
  t.deepEqual(await client.getByName('KUBE-CLUSTER-IP'), { index: 0, family: 'inet' });
  const dup = await t.throwsAsync(client.add('KUBE-CLUSTER-IP', { ip: '10.96.0.10', proto: 'udp', port: 53 }));
  t.true(isEntryExists(dup));
  kernel.reference('KUBE-CLUSTER-IP');
  t.true(isSetBusy(await t.throwsAsync(client.destroy('KUBE-CLUSTER-IP'))));
});

test('hash:net entries are stored with host bits cleared, as the kernel does', async (t) => {
  const { client, kernel } = fakeIpset();
  await client.create('KUBE-SOURCE-RANGES', 'hash:net');
  await client.add('KUBE-SOURCE-RANGES', { ip: '10.1.2.3', cidr: 8 });
  t.deepEqual(kernel.dump('KUBE-SOURCE-RANGES')?.entries, ['10.0.0.0/8']);
  t.true(isEntryExists(await t.throwsAsync(client.add('KUBE-SOURCE-RANGES', { ip: '10.200.0.0', cidr: 8 }))));
});
