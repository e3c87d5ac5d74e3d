// Every object kind's codec (objects.ts), through the table NftTransaction and FakeNft
// dispatch on: what encode() writes, decode() reads back; what apply() stores, FakeNft lists.
import test from 'ava';
import type { NftElement, NftObject, NftSetLike, RawElement } from '../../../../src/netlink/nftables/index.ts';
import { NftTransaction, rule, toElements } from '../../../../src/netlink/nftables/index.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { codecOf } from '../../../../src/netlink/nftables/objects.ts';

const scope = { family: 'ip', table: 'kube-proxy' } as const;
const vmap: NftSetLike = {
  kind: 'map',
  name: 'service-ips',
  key: ['ipv4_addr', 'inet_proto', 'inet_service'],
  data: 'verdict',
  comment: 'VIPs',
};
const cidrs: NftSetLike = { kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] };

/** One object of each kind, in an order a transaction can add them. */
const OBJECTS: NftObject[] = [
  { kind: 'table', comment: 'rules for Kubernetes services' },
  {
    kind: 'chain',
    name: 'nat-prerouting',
    base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
    comment: 'entry',
  },
  { kind: 'chain', name: 'svc-x' },
  vmap,
  cidrs,
  { kind: 'element', set: 'service-ips', key: ['10.96.0.1', 'tcp', 443], value: { verdict: 'goto', chain: 'svc-x' } },
  {
    ...rule('ip', 'nat-prerouting').vmap(['ip daddr', 'meta l4proto', 'th dport'], 'service-ips').build(),
    comment: 'services',
  },
];

const strip = (o: NftObject): NftObject => {
  const { text: _text, ...rest } = o as NftObject & { text?: string };
  return rest as NftObject;
};

for (const [i, obj] of OBJECTS.entries()) {
  test(`${obj.kind} ${i}: decode(encode(x)) is x, through the codec table`, (t) => {
    const tx = new NftTransaction(scope);
    tx.add(obj);
    const msgs = tx.messages((n) => (n === vmap.name ? vmap : undefined));
    t.is(msgs.length, 1);
    const back = codecOf(obj).decode(msgs[0]!) as Record<string, unknown>;
    if (obj.kind === 'element') {
      t.is(back.set, obj.set);
      t.deepEqual(toElements(vmap, back.elements as RawElement[]), [obj]);
    } else {
      // The listed object sits under its kind's name (a map under `set`), next to where it was listed.
      const decoded = back[obj.kind === 'map' ? 'set' : obj.kind] as NftObject;
      t.deepEqual(decoded, strip(obj));
      if (obj.kind !== 'table') t.is(back.table, scope.table);
    }
  });
}

test('elements: the element codec packs a run and decodes it back into the same elements', (t) => {
  const tx = new NftTransaction(scope);
  const els: NftElement[] = ['10.0.0.0/8', '192.168.1.0/24', '172.16.0.1-172.16.0.9'].map((k) => ({
    kind: 'element',
    set: 'cidrs',
    key: [k],
  }));
  for (const e of els) tx.add(e);
  const [msg] = tx.messages((n) => (n === 'cidrs' ? cidrs : undefined));
  const back = toElements(cidrs, (codecOf(els[0]!).decode(msg!) as { elements: never[] }).elements);
  t.deepEqual(back.map((e) => e.key[0]).sort(), ['10.0.0.0/8', '172.16.0.1-172.16.0.9', '192.168.1.0/24']);
});

test('render: every kind renders every verb it accepts, through the codec table', (t) => {
  const tx = new NftTransaction(scope);
  for (const o of OBJECTS) tx.add(o);
  tx.delete({
    kind: 'element',
    set: 'service-ips',
    key: ['10.96.0.1', 'tcp', 443],
    value: { verdict: 'goto', chain: 'svc-x' },
  });
  tx.flush({ kind: 'chain', name: 'svc-x' });
  tx.destroy({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'] });
  t.is(tx.error, undefined);
  const lines = tx.toString().trimEnd().split('\n');
  t.deepEqual(lines, [
    'add table ip kube-proxy { comment "rules for Kubernetes services" ; }',
    'add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; policy accept ; comment "entry" ; }',
    'add chain ip kube-proxy svc-x',
    'add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "VIPs" ; }',
    'add set ip kube-proxy cidrs { type ipv4_addr ; flags interval ; }',
    'add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto svc-x }',
    'add rule ip kube-proxy nat-prerouting ip daddr . meta l4proto . th dport vmap @service-ips comment "services"',
    'delete element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 }',
    'flush chain ip kube-proxy svc-x',
    'destroy set ip kube-proxy cidrs',
  ]);
});

test('apply: what each kind stores in FakeNft lists back, and a removal takes it away', async (t) => {
  const fake = new FakeNft(scope);
  const tx = fake.newTransaction();
  for (const o of OBJECTS) tx.add(o);
  await fake.run(tx);
  t.deepEqual((await fake.listChains()).map((c) => c.name).sort(), ['nat-prerouting', 'svc-x']);
  t.deepEqual((await fake.listSets()).map((s) => s.name).sort(), ['cidrs', 'service-ips']);
  t.deepEqual(
    (await fake.listElements('service-ips')).map((e) => e.value),
    [{ verdict: 'goto', chain: 'svc-x' }],
  );
  t.is((await fake.listRules('nat-prerouting')).length, 1);
  const down = fake.newTransaction();
  down.delete({ kind: 'element', set: 'service-ips', key: ['10.96.0.1', 'tcp', 443] });
  down.flush({ kind: 'chain', name: 'nat-prerouting' });
  down.delete({ kind: 'chain', name: 'svc-x' });
  down.delete({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'] });
  await fake.run(down);
  t.deepEqual(await fake.listElements('service-ips'), []);
  t.deepEqual(await fake.listRules('nat-prerouting'), []);
  t.deepEqual(
    (await fake.listChains()).map((c) => c.name),
    ['nat-prerouting'],
  );
  t.deepEqual(
    (await fake.listSets()).map((s) => s.name),
    ['service-ips'],
  );
});
