// rtnetlink requests against what iproute2 6.1 sends, captured with strace in a throwaway
// namespace (test/fixtures/netlink/capture-ipset-route.sh, CAPTURE.md).
import test from 'ava';
import {
  delAddrMessage,
  delLinkMessage,
  getLinkMessage,
  listAddrsMessage,
  newAddrMessage,
  newLinkMessage,
  setLinkUpMessage,
} from '../../../../src/netlink/route/index.ts';
import { sameAsFixture } from '../ipset/fixture-lines.ts';

const f = (name: string): string => `route/${name}.hex`;

test('ip link add kube-ipvs0 type dummy', (t) => {
  sameAsFixture(t, newLinkMessage('kube-ipvs0', 'dummy'), f('link-add-dummy'), 2);
});

test('ip link set up / down / del (by index, as iproute2 resolves it first)', (t) => {
  sameAsFixture(t, setLinkUpMessage(2, true), f('link-set-up'), 3);
  sameAsFixture(t, setLinkUpMessage(2, false), f('link-set-down'), 3);
  sameAsFixture(t, delLinkMessage(2), f('link-del'), 3);
});

test('get link by name (iproute2 sends it without NLM_F_ACK)', (t) => {
  sameAsFixture(t, getLinkMessage('kube-ipvs0'), f('link-set-up'), 2, { maskFlags: true });
  sameAsFixture(t, getLinkMessage('kube-ipvs0'), f('link-get'), 2, { maskFlags: true });
});

test('ip addr add/del: /32 and /128, noprefixroute', (t) => {
  sameAsFixture(t, newAddrMessage(2, '10.96.0.1'), f('addr-add-v4'), 2);
  sameAsFixture(t, newAddrMessage(2, 'fd00::1', 128, { noPrefixRoute: true }), f('addr-add-v6'), 2);
  sameAsFixture(t, delAddrMessage(2, '10.96.0.1', 32), f('addr-del-v4'), 2);
});

test('address dump of one family', (t) => {
  sameAsFixture(t, listAddrsMessage('IPv4', 2), f('addr-dump'), 3, { dump: true });
});

test('labels and validation', (t) => {
  t.is(newAddrMessage(7, '10.96.0.1', undefined, {}, 'kube-ipvs0').label, 'add address 10.96.0.1/32 to kube-ipvs0');
  t.is(delAddrMessage(7, 'fd00::1').label, 'delete address fd00::1/128 from #7');
  t.is(newLinkMessage('kube-ipvs0', 'dummy').label, 'create link kube-ipvs0 type dummy');
  t.throws(() => newLinkMessage('a-name-that-is-too-long', 'dummy'), { instanceOf: TypeError });
  t.throws(() => newAddrMessage(1, '10.0.0.1', 33), { instanceOf: RangeError });
  t.throws(() => newAddrMessage(1, 'not-an-ip'), { instanceOf: TypeError });
});
