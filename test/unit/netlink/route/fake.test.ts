// FakeRouteKernel without a kernel (test/kernel/route-contract.test.ts holds it to the real one).
import test from 'ava';
import { isKindUnsupported, isNoSuchAddress } from '../../../../src/netlink/route/index.ts';
import { fakeRoute } from '../../../../src/netlink/route/fake/index.ts';

test('kube-ipvs0 with service addresses, and node addresses around it', async (t) => {
  const { client, kernel } = fakeRoute();
  kernel.addLink('eth0', undefined);
  kernel.addAddr('eth0', '192.168.1.10', 24);
  kernel.addAddr('eth0', 'fe80::1', 64, 253);
  kernel.addAddr('eth0', '2001:db8::10', 64);
  const { link, created } = await client.ensureLink('kube-ipvs0');
  t.true(created);
  t.is(link.kind, 'dummy');
  await client.setLinkUp(link.index);
  t.false(await client.ensureAddress(link.index, '10.96.0.1'));
  t.true(await client.ensureAddress(link.index, '10.96.0.1'));
  t.deepEqual(kernel.dumpAddrs(), [
    'eth0 192.168.1.10/24',
    'eth0 2001:db8::10/64',
    'eth0 fe80::1/64',
    'kube-ipvs0 10.96.0.1/32',
    'lo 127.0.0.1/8',
    'lo ::1/128',
  ]);
  t.deepEqual(await client.nodeAddresses('IPv4', { exceptLink: 'kube-ipvs0' }), ['192.168.1.10']);
  t.deepEqual(await client.nodeAddresses('IPv6'), ['2001:db8::10']);
  t.true(isNoSuchAddress(await t.throwsAsync(client.deleteAddress('kube-ipvs0', '10.96.0.2'))));
});

test('a kernel without the dummy kind refuses it, as Linux does without CONFIG_DUMMY', async (t) => {
  const { client } = fakeRoute({ kinds: ['ifb'] });
  const e = await t.throwsAsync(client.createLink('kube-ipvs0', 'dummy'));
  t.true(isKindUnsupported(e));
  t.is(e!.message, 'create link kube-ipvs0 type dummy: ENOTSUP (Unknown device type)');
});
