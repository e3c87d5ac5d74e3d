// Which announced changes undo something of the IPVS mode's (src/proxier/ipvs/drift.ts): our
// companion chains changed after we wrote them; kube-ipvs0 deleted, or an address still wanted
// on it removed. Our own unbinding (the address no longer wanted), other links, additions
// and everything before the first full sync are not drift.
import test from 'ava';
import type { RouteChange } from '../../../../src/netlink/route/index.ts';
import { companionChainDrifted, dummyLinkDrift } from '../../../../src/proxier/ipvs/drift.ts';

test('companion chains: ours in their table, our jumps from built-in chains, the whole table, nothing before the first write', (t) => {
  t.true(companionChainDrifted(true, 'nat', 'KUBE-SERVICES'));
  t.true(companionChainDrifted(true, 'filter', 'KUBE-IPVS-FILTER'));
  t.true(companionChainDrifted(true), 'table deleted or announcements lost');
  t.false(companionChainDrifted(true, 'nat', 'KUBE-IPVS-FILTER'), 'a filter chain name in nat is not ours');
  t.false(companionChainDrifted(true, 'nat', 'PREROUTING'), 'built-in chains are everybody’s');
  t.false(companionChainDrifted(true, 'nat', 'DOCKER'));
  t.true(companionChainDrifted(true, 'nat', 'PREROUTING', 'KUBE-SERVICES'), 'our jump removed from a built-in chain');
  t.true(companionChainDrifted(true, 'filter', 'INPUT', 'KUBE-IPVS-FILTER'));
  t.false(companionChainDrifted(true, 'nat', 'PREROUTING', 'DOCKER'), 'somebody else’s jump');
  t.false(companionChainDrifted(true, 'nat', 'PREROUTING', 'KUBE-IPVS-FILTER'), 'not a jump we make there');
  t.false(companionChainDrifted(false, 'nat', 'KUBE-SERVICES'), 'nothing written yet');
  t.false(companionChainDrifted(false));
});

const view = (linkIndex: number | undefined, wanted: string[] = ['10.96.0.10', 'fd00:96::10']) => ({
  linkIndex,
  wants: (a: string) => wanted.includes(a),
});
const delAddr = (address: string, index = 7, portId = 0): RouteChange => ({
  kind: 'addr',
  added: false,
  index,
  address,
  prefixLen: address.includes(':') ? 128 : 32,
  portId,
});
const link = (name: string, index: number, added = false): RouteChange => ({
  kind: 'link',
  added,
  index,
  name,
  portId: 0,
});

test('kube-ipvs0: a wanted address removed, or the link deleted, is drift', (t) => {
  t.is(
    dummyLinkDrift(view(7), delAddr('10.96.0.10', 7, 4242)),
    'removed address 10.96.0.10/32 from kube-ipvs0 (port 4242)',
  );
  t.is(dummyLinkDrift(view(7), delAddr('fd00:96::10')), 'removed address fd00:96::10/128 from kube-ipvs0 (port 0)');
  t.is(dummyLinkDrift(view(7), link('kube-ipvs0', 7)), 'removed link kube-ipvs0 (port 0)');
  t.truthy(dummyLinkDrift(view(7), link('kube-ipvs0', 9)), 'by name, whatever its index');
  t.truthy(dummyLinkDrift(view(7)), 'announcements lost');
});

test('kube-ipvs0: our own unbinding, other links, additions and the time before the first sync are not', (t) => {
  t.is(dummyLinkDrift(view(7), delAddr('10.96.0.99')), undefined, 'no longer wanted: our own unbinding');
  t.is(dummyLinkDrift(view(7), delAddr('10.96.0.10', 3)), undefined, 'on another link');
  t.is(dummyLinkDrift(view(7), { ...delAddr('10.96.0.10'), added: true }), undefined, 'added');
  t.is(dummyLinkDrift(view(7), link('eth0', 3)), undefined);
  t.is(dummyLinkDrift(view(7), link('kube-ipvs0', 7, true)), undefined, 'a link change (up, down, new)');
  t.is(dummyLinkDrift(view(undefined), link('kube-ipvs0', 7)), undefined, 'before the first full sync');
  t.is(dummyLinkDrift(view(undefined), delAddr('10.96.0.10')), undefined);
  t.is(dummyLinkDrift(view(undefined)), undefined);
});
