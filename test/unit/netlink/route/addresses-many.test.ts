// RouteClient's many-address calls over FakeRouteKernel: addAddresses/deleteAddresses
// pipelined with one named result per address, and linkAndNodeAddresses' single dump.
import test from 'ava';
import { NetlinkConnection, NetlinkError } from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import {
  ADDRS_PER_DATAGRAM,
  RouteClient,
  isNoSuchAddress,
  isRouteExists,
} from '../../../../src/netlink/route/index.ts';
import { FakeRouteKernel } from '../../../../src/netlink/route/fake/index.ts';

function setup(): { kernel: FakeRouteKernel; sock: FakeKernel; client: RouteClient } {
  const kernel = new FakeRouteKernel();
  const sock = new FakeKernel(kernel.handler);
  return { kernel, sock, client: new RouteClient(new NetlinkConnection(sock, { timeoutMs: 2000 })) };
}

const vip = (i: number): string => `10.96.${i >> 8}.${i & 255}`;

test(`addAddresses: ${ADDRS_PER_DATAGRAM} per datagram, one result per address naming it; failures do not stop the rest`, async (t) => {
  const { kernel, sock, client } = setup();
  const { link } = await client.ensureLink('kube-ipvs0');
  await client.addAddress(link.index, vip(5));
  const sent = sock.sent.length;
  const addrs = [...Array.from({ length: 300 }, (_, i) => vip(i)), 'bogus'];
  const res = await client.addAddresses(link.index, addrs);
  t.is(sock.sent.length - sent, 2, '300 addresses in two datagrams');
  t.is(res.length, 301);
  t.true(isRouteExists(res[5]));
  t.is(res[5]!.message, `add address 10.96.0.5/32 to #${link.index}: EEXIST (ipv4: Address already assigned)`);
  t.true(res[300] instanceof NetlinkError);
  t.is(res[300]!.code, 'EINVAL');
  t.regex(res[300]!.message, /^add address bogus to #\d+: EINVAL/);
  t.is(res.filter((e) => e === undefined).length, 299);
  t.is(kernel.dumpAddrs().filter((l) => l.startsWith('kube-ipvs0 ')).length, 300);

  const del = await client.deleteAddresses('kube-ipvs0', [vip(1), vip(1), vip(2)]);
  t.is(del[0], undefined);
  t.true(isNoSuchAddress(del[1]));
  t.is(del[1]!.message, 'delete address 10.96.0.1/32 from kube-ipvs0: EADDRNOTAVAIL (ipv4: Address not found)');
  t.is(del[2], undefined);
  t.deepEqual(await client.addAddresses(link.index, []), []);
});

test("linkAndNodeAddresses: one dump, split into the link's addresses and the node's own (no loopback, no link-local)", async (t) => {
  const { kernel, sock, client } = setup();
  kernel.addLink('eth0', undefined);
  kernel.addAddr('eth0', '192.168.1.10', 24);
  kernel.addAddr('eth0', 'fe80::1', 64, 253);
  kernel.addAddr('eth0', '2001:db8::10', 64);
  const { link } = await client.ensureLink('kube-ipvs0');
  await client.addAddresses(link.index, ['10.96.0.1', '10.96.0.2', '192.168.1.10', 'fd00::1']);
  const sent = sock.sent.length;
  t.deepEqual(await client.linkAndNodeAddresses(link.index, 'IPv4'), {
    link: ['10.96.0.1', '10.96.0.2', '192.168.1.10'],
    node: ['192.168.1.10'],
  });
  t.is(sock.sent.length - sent, 1, 'one dump, no link look-up for an index');
  t.deepEqual(await client.linkAndNodeAddresses('kube-ipvs0', 'IPv6'), { link: ['fd00::1'], node: ['2001:db8::10'] });
  t.deepEqual(await client.nodeAddresses('IPv4', { exceptLink: 'kube-ipvs0' }), ['192.168.1.10']);
});
