// FakeNft: the kernel's transaction semantics in memory (all or nothing, the errnos the
// kernel returns), plus a sorted nft-syntax dump for golden tests.
import test from 'ava';
import { NetlinkError } from '../../../../src/netlink/core/index.ts';
import type { NftInterface } from '../../../../src/netlink/nftables/index.ts';
import { rule } from '../../../../src/netlink/nftables/index.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';

const scope = { family: 'ip', table: 'kube-proxy' } as const;

async function seeded(): Promise<FakeNft> {
  const f = new FakeNft(scope);
  const tx = f.newTransaction();
  tx.add({ kind: 'table' });
  tx.add({ kind: 'chain', name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100 } });
  tx.add({ kind: 'chain', name: 'services' });
  tx.add({ kind: 'chain', name: 'svc-a' });
  tx.add({ kind: 'map', name: 'service-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' });
  tx.add({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] });
  tx.add({
    kind: 'element',
    set: 'service-ips',
    key: ['10.96.0.1', 'tcp', 80],
    value: { verdict: 'goto', chain: 'svc-a' },
  });
  tx.add({ kind: 'element', set: 'cidrs', key: ['10.0.0.0/8'] });
  tx.add(rule('ip', 'nat-prerouting').jump('services').build());
  tx.add(rule('ip', 'services').vmap(['ip daddr', 'meta l4proto', 'th dport'], 'service-ips').build());
  tx.add(rule('ip', 'svc-a').inSet(['ip saddr'], 'cidrs', true).dnat('10.1.0.1', 8080).build());
  await f.run(tx);
  return f;
}

test('FakeNft implements the same interface as NftClient', (t) => {
  const f: NftInterface = new FakeNft(scope);
  t.truthy(f.newTransaction);
});

test('a committed transaction is visible; the dump is sorted nft syntax', async (t) => {
  const f = await seeded();
  t.deepEqual(await f.list('chain'), ['nat-prerouting', 'services', 'svc-a']);
  t.deepEqual(await f.list('map'), ['service-ips']);
  t.is(
    f.dump(),
    [
      'add table ip kube-proxy',
      'add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }',
      'add chain ip kube-proxy services',
      'add chain ip kube-proxy svc-a',
      'add set ip kube-proxy cidrs { type ipv4_addr ; flags interval ; }',
      'add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }',
      'add rule ip kube-proxy nat-prerouting jump services',
      'add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips',
      'add rule ip kube-proxy svc-a ip saddr != @cidrs dnat to 10.1.0.1:8080',
      'add element ip kube-proxy cidrs { 10.0.0.0/8 }',
      'add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto svc-a }',
      '',
    ].join('\n'),
  );
  t.deepEqual(f.lookupVerdict('service-ips', ['10.96.0.1', 'tcp', 80]), { verdict: 'goto', chain: 'svc-a' });
  t.is(f.generationId, 1);
});

test('a failing transaction changes nothing and fails with the kernel errno and operation', async (t) => {
  const f = await seeded();
  const before = f.dump();
  const tx = f.newTransaction();
  tx.add({ kind: 'chain', name: 'newcomer' });
  tx.add({
    kind: 'element',
    set: 'service-ips',
    key: ['10.96.0.2', 'udp', 53],
    value: { verdict: 'goto', chain: 'newcomer' },
  });
  tx.add(rule('ip', 'services').jump('missing').build());
  const err = await t.throwsAsync(f.run(tx), { instanceOf: NetlinkError });
  t.is(err!.code, 'ENOENT');
  t.is(err!.op, 'add rule ip kube-proxy services');
  t.is(err!.detail, 'no chain missing');
  t.is(f.dump(), before);
  t.is(f.generationId, 1);
  t.is(f.lastTransaction, tx);
});

test('kernel rules: EBUSY for referenced chains and sets, EEXIST for create and clashing elements, destroy tolerates absence', async (t) => {
  const f = await seeded();
  const code = async (fn: (tx: ReturnType<FakeNft['newTransaction']>) => void): Promise<string> => {
    const tx = f.newTransaction();
    fn(tx);
    try {
      await f.run(tx);
      return 'ok';
    } catch (e) {
      return (e as NetlinkError).code;
    }
  };
  t.is(await code((tx) => tx.delete({ kind: 'chain', name: 'svc-a' })), 'EBUSY'); // a map element points at it
  t.is(await code((tx) => tx.delete({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'] })), 'EBUSY');
  t.is(await code((tx) => tx.create({ kind: 'chain', name: 'services' })), 'EEXIST');
  t.is(await code((tx) => tx.add({ kind: 'chain', name: 'services' })), 'ok');
  t.is(
    await code((tx) =>
      tx.add({ kind: 'element', set: 'service-ips', key: ['10.96.0.1', 'tcp', 80], value: { verdict: 'drop' } }),
    ),
    'EEXIST',
  );
  t.is(
    await code((tx) =>
      tx.add({
        kind: 'element',
        set: 'service-ips',
        key: ['10.96.0.1', 'tcp', 80],
        value: { verdict: 'goto', chain: 'svc-a' },
      }),
    ),
    'ok',
  );
  t.is(await code((tx) => tx.delete({ kind: 'element', set: 'cidrs', key: ['192.168.0.0/16'] })), 'ENOENT');
  t.is(await code((tx) => tx.destroy({ kind: 'element', set: 'cidrs', key: ['192.168.0.0/16'] })), 'ok');
  t.is(await code((tx) => tx.destroy({ kind: 'chain', name: 'nothing-here' })), 'ok');
  t.is(await code((tx) => tx.delete({ kind: 'rule', chain: 'services', exprs: [], handle: 999n })), 'ENOENT');
  // Removing the reference first makes the delete legal, in one transaction.
  t.is(
    await code((tx) => {
      tx.flush({ kind: 'map', name: 'service-ips', key: ['ipv4_addr'], data: 'verdict' });
      tx.delete({ kind: 'chain', name: 'svc-a' });
    }),
    'ok',
  );
  t.deepEqual(await f.list('chain'), ['nat-prerouting', 'services']);
});

test('rules: handles, insert before, add after a position, replace and delete by handle', async (t) => {
  const f = await seeded();
  const [first] = await f.listRules('services');
  let tx = f.newTransaction();
  tx.insert(rule('ip', 'services').ctState(['invalid']).drop().build());
  tx.add({ ...rule('ip', 'services').counter().build(), position: first!.handle! });
  await f.run(tx);
  t.deepEqual(
    (await f.listRules('services')).map((r) => r.text),
    ['ct state invalid drop', 'ip daddr . meta l4proto . th dport vmap @service-ips', 'counter'],
  );
  const rules = await f.listRules('services');
  tx = f.newTransaction();
  tx.replace({ ...rule('ip', 'services').accept().build(), handle: rules[2]!.handle! });
  tx.delete(rules[0]!);
  await f.run(tx);
  t.deepEqual(
    (await f.listRules('services')).map((r) => r.text),
    ['ip daddr . meta l4proto . th dport vmap @service-ips', 'accept'],
  );
});

test('an invalid element is reported, not committed', async (t) => {
  const f = await seeded();
  const tx = f.newTransaction();
  tx.add({ kind: 'element', set: 'cidrs', key: ['300.0.0.0/8'] });
  await t.throwsAsync(f.run(tx), { message: /300\.0\.0\.0\/8 is not a valid ipv4_addr|not a valid/ });
  t.is((await f.listElements('cidrs')).length, 1);
});
