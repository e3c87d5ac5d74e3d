// The transaction builder: latched validation, nft text, set ids, element packing; and the
// client over a FakeKernel (one batch per run, the size limit, dumps).
import test from 'ava';
import { AttrSet, NetlinkConnection, NetlinkError, nfnlCmd } from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import { ackReply, doneReply } from '../../../../src/netlink/core/fake/index.ts';
import type { NftElement, NftSetLike } from '../../../../src/netlink/nftables/index.ts';
import {
  MAX_ELEMENTS_BYTES,
  NFTA_SET_ELEM_LIST_ELEMENTS,
  NftClient,
  NftMsg,
  NftTransaction,
  NftValidationError,
  rule,
} from '../../../../src/netlink/nftables/index.ts';

const scope = { family: 'ip', table: 'kube-proxy' } as const;

test('verbs never throw; the first invalid operation is latched and shown by toString()', (t) => {
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'table' });
  tx.replace(rule('ip', 'c').accept().build()); // no handle
  tx.add({ kind: 'chain', name: 'later' }); // ignored after the error
  t.is(tx.size, 1);
  t.true(tx.error instanceof NftValidationError);
  t.regex(tx.error!.message, /replace rule: replace rule in c needs a handle/);
  t.is(tx.toString(), 'add table ip kube-proxy\n# ERROR: replace rule: replace rule in c needs a handle\n');
  t.throws(() => tx.messages(), { instanceOf: NftValidationError });
});

test('invalid objects are caught: bad key types, flushing a rule, elements of unknown sets', (t) => {
  const bad = (fn: (tx: NftTransaction) => void): string => {
    const tx = new NftTransaction(scope);
    fn(tx);
    try {
      tx.messages(() => undefined);
    } catch (e) {
      return (e as Error).message;
    }
    return '';
  };
  t.regex(
    bad((tx) => tx.add({ kind: 'set', name: 's', key: ['nope' as 'mark'] })),
    /unknown key type nope/,
  );
  t.regex(
    bad((tx) => tx.add({ kind: 'set', name: '', key: ['mark'] })),
    /needs a name/,
  );
  t.regex(
    bad((tx) => tx.flush({ kind: 'rule', chain: 'c', exprs: [] } as never)),
    /cannot flush a rule/,
  );
  t.regex(
    bad((tx) => tx.add({ kind: 'element', set: 'ghost', key: ['1.2.3.4'] })),
    /unknown set/,
  );
  t.regex(
    bad((tx) => {
      tx.add({ kind: 'set', name: 's', key: ['ipv4_addr'] });
      tx.add({ kind: 'element', set: 's', key: ['not-an-ip'] });
    }),
    /not-an-ip is not a valid ipv4_addr/,
  );
  t.regex(
    bad((tx) => {
      tx.add({ kind: 'map', name: 'm', key: ['ipv4_addr'], data: 'verdict' });
      tx.add({ kind: 'element', set: 'm', key: ['1.2.3.4'] });
    }),
    /element without a value/,
  );
});

test('toString() renders nft syntax for every verb and object', (t) => {
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'table', comment: 'kube-proxy-ts' });
  tx.add({
    kind: 'chain',
    name: 'nat-prerouting',
    base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
  });
  tx.add({ kind: 'chain', name: 'services' });
  tx.add({
    kind: 'map',
    name: 'service-ips',
    key: ['ipv4_addr', 'inet_proto', 'inet_service'],
    data: 'verdict',
    comment: 'ClusterIPs',
  });
  tx.add({ kind: 'set', name: 'affinity', key: ['ipv4_addr'], flags: ['dynamic'], timeoutMs: 10_800_000 });
  tx.add({
    kind: 'map',
    name: 'pick',
    key: ['integer'],
    typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
    data: 'verdict',
  });
  tx.add({
    kind: 'element',
    set: 'service-ips',
    key: ['10.96.0.1', 'tcp', 443],
    value: { verdict: 'goto', chain: 'svc-a' },
  });
  tx.add({ kind: 'element', set: 'affinity', key: ['10.1.2.3'], timeoutMs: 10_000 });
  tx.add(rule('ip', 'nat-prerouting').jump('services').build());
  tx.add(
    rule('ip', 'services').vmap(['ip daddr', 'meta l4proto', 'th dport'], 'service-ips').comment('dispatch').build(),
  );
  tx.insert(rule('ip', 'services').ctState(['invalid']).drop().build());
  tx.replace({ ...rule('ip', 'services').counter().build(), handle: 4n });
  tx.flush({ kind: 'chain', name: 'services' });
  tx.flush({ kind: 'map', name: 'service-ips', key: ['ipv4_addr'], data: 'verdict' });
  tx.delete({
    kind: 'element',
    set: 'service-ips',
    key: ['10.96.0.1', 'tcp', 443],
    value: { verdict: 'goto', chain: 'svc-a' },
  });
  tx.delete({ kind: 'rule', chain: 'services', exprs: [], handle: 7n });
  tx.delete({ kind: 'chain', name: 'old' });
  tx.destroy({ kind: 'set', name: 'gone', key: ['mark'] });
  tx.delete({ kind: 'table' });
  t.is(
    tx.toString(),
    [
      'add table ip kube-proxy { comment "kube-proxy-ts" ; }',
      'add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; policy accept ; }',
      'add chain ip kube-proxy services',
      'add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIPs" ; }',
      'add set ip kube-proxy affinity { type ipv4_addr ; flags dynamic,timeout ; timeout 3h ; }',
      'add map ip kube-proxy pick { typeof numgen random mod 2 : verdict ; }',
      'add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto svc-a }',
      'add element ip kube-proxy affinity { 10.1.2.3 timeout 10s }',
      'add rule ip kube-proxy nat-prerouting jump services',
      'add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips comment "dispatch"',
      'insert rule ip kube-proxy services ct state invalid drop',
      'replace rule ip kube-proxy services handle 4 counter',
      'flush chain ip kube-proxy services',
      'flush map ip kube-proxy service-ips',
      'delete element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 }',
      'delete rule ip kube-proxy services handle 7',
      'delete chain ip kube-proxy old',
      'destroy set ip kube-proxy gone',
      'delete table ip kube-proxy',
      '',
    ].join('\n'),
  );
});

test('set ids: one per set name in order of first mention, shared by NEWSET, elements and lookups', (t) => {
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'set', name: 'b', key: ['ipv4_addr'] });
  tx.add({ kind: 'set', name: 'a', key: ['ipv4_addr'] });
  tx.add({ kind: 'element', set: 'a', key: ['1.1.1.1'] });
  tx.add(rule('ip', 'c').inSet(['ip saddr'], 'b').inSet(['ip daddr'], 'a').accept().build());
  const msgs = tx.messages();
  const attrs = (i: number) => new AttrSet(msgs[i]!.payload.subarray(4), 'm');
  t.is(attrs(0).u32(10, 'net'), 1); // NFTA_SET_ID of b
  t.is(attrs(1).u32(10, 'net'), 2); // a
  t.is(attrs(2).u32(4, 'net'), 2); // NFTA_SET_ELEM_LIST_SET_ID
  const hex = Buffer.from(msgs[3]!.payload).toString('hex');
  t.true(hex.includes('0800040000000001') && hex.includes('0800040000000002'));
});

test('elements are packed many per message and split below the 64 KiB attribute limit', (t) => {
  const set: NftSetLike = {
    kind: 'map',
    name: 'big',
    key: ['ipv4_addr', 'inet_proto', 'inet_service'],
    data: 'verdict',
  };
  const tx = new NftTransaction(scope);
  const n = 10_000;
  for (let i = 0; i < n; i++) {
    tx.add({
      kind: 'element',
      set: 'big',
      key: [`10.0.${i >> 8}.${i & 255}`, 'tcp', 80],
      value: { verdict: 'goto', chain: `svc-${i}` },
    });
  }
  const msgs = tx.messages(() => set);
  t.true(msgs.length > 1 && msgs.length < 20, `${msgs.length} messages`);
  let total = 0;
  for (const m of msgs) {
    t.is(nfnlCmd(m.type), NftMsg.NEWSETELEM);
    const list = new AttrSet(m.payload.subarray(4), 'm').get(NFTA_SET_ELEM_LIST_ELEMENTS)!;
    t.true(list.data.length + 4 <= MAX_ELEMENTS_BYTES + 4);
    const carried = new AttrSet(list.data, 'l').all.length;
    t.is(m.elements, carried, 'the message counts its elements');
    total += carried;
  }
  t.is(total, n);
  t.is(msgs[0]!.label, 'add element ip kube-proxy big', 'the bare label; the count is a field');
});

test('a new single-field interval set gets the leading end element nft sends; an existing one does not', (t) => {
  const cidrs: NftSetLike = { kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] };
  const el: NftElement = { kind: 'element', set: 'cidrs', key: ['10.0.0.0/8'] };
  const count = (tx: NftTransaction, i: number, schema?: NftSetLike) => {
    const m = tx.messages(() => schema)[i]!;
    return new AttrSet(new AttrSet(m.payload.subarray(4), 'm').get(NFTA_SET_ELEM_LIST_ELEMENTS)!.data, 'l').all.length;
  };
  const fresh = new NftTransaction(scope);
  fresh.add(cidrs);
  fresh.add(el);
  t.is(count(fresh, 1), 3);
  const existing = new NftTransaction(scope);
  existing.add(el);
  t.is(count(existing, 0, cidrs), 2);
});

// ---- NftClient over a FakeKernel ----

function fakeClient(handler: ConstructorParameters<typeof FakeKernel>[0]) {
  const kernel = new FakeKernel(handler);
  const conn = new NetlinkConnection(kernel, { timeoutMs: 2000 });
  return { kernel, conn, client: new NftClient({ family: 'ip', table: 'kube-proxy', transport: conn }) };
}

test('run() sends one batch and learns the sets it created', async (t) => {
  const { kernel, client, conn } = fakeClient((reqs) => reqs.filter((r) => r.flags & 4).map((r) => ackReply(r)));
  const tx = client.newTransaction();
  tx.add({ kind: 'table' });
  tx.add({ kind: 'set', name: 'addrs', key: ['ipv4_addr'] });
  const measured = client.measure(tx);
  const stats = await client.run(tx);
  t.deepEqual(stats, { messages: 2, bytes: measured.bytes });
  t.is(kernel.sent.length, 1);
  t.is(kernel.sent[0]!.length, measured.bytes);
  t.truthy(client.knownSet('addrs'));
  const tx2 = client.newTransaction();
  tx2.add({ kind: 'element', set: 'addrs', key: ['10.0.0.1'] });
  await client.run(tx2);
  t.is(kernel.sent.length, 2);
  conn.close();
});

test('run() refuses a transaction larger than the socket can send, before sending anything', async (t) => {
  const { kernel, client, conn } = fakeClient((reqs) => reqs.map((r) => ackReply(r)));
  kernel.maxSend = 4096;
  const tx = client.newTransaction();
  for (let i = 0; i < 200; i++) tx.add({ kind: 'chain', name: `chain-${i}` });
  const err = await t.throwsAsync(client.run(tx), { instanceOf: NetlinkError });
  t.is(err!.code, 'EMSGSIZE');
  t.regex(err!.message, /200 operations .* exceeds the socket's 4096-byte batch limit/);
  t.is(kernel.sent.length, 0);
  conn.close();
});

test('a kernel error names the operation that failed', async (t) => {
  const { client, conn } = fakeClient((reqs) => {
    const bad = reqs.find((r) => nfnlCmd(r.type) === NftMsg.NEWCHAIN);
    return bad ? [{ ...ackReply(bad), payload: errPayload(bad, 2) }] : reqs.map((r) => ackReply(r));
  });
  const tx = client.newTransaction();
  tx.add({ kind: 'table' });
  tx.add({ kind: 'chain', name: 'services' });
  const err = await t.throwsAsync(client.run(tx), { instanceOf: NetlinkError });
  t.is(err!.op, 'add chain ip kube-proxy services');
  t.is(err!.code, 'ENOENT');
  conn.close();
});

function errPayload(
  req: { payload: Uint8Array; type: number; flags: number; seq: number; pid: number },
  errno: number,
): Uint8Array {
  const b = Buffer.alloc(20);
  b.writeInt32LE(-errno, 0);
  b.writeUInt32LE(16 + req.payload.length, 4);
  b.writeUInt16LE(req.type, 8);
  b.writeUInt16LE(req.flags, 10);
  b.writeUInt32LE(req.seq, 12);
  b.writeUInt32LE(req.pid, 16);
  return b;
}

test('dumps decode chains, sets and elements from kernel-shaped replies', async (t) => {
  // Replies are built with our own encoder (already checked against nft's bytes).
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'chain', name: 'services' });
  tx.add({ kind: 'set', name: 'addrs', key: ['ipv4_addr'] });
  tx.add({ kind: 'element', set: 'addrs', key: ['10.0.0.1'] });
  const [chainMsg, setMsg, elemMsg] = tx.messages();
  const { client, conn } = fakeClient((reqs) => {
    const r = reqs[0]!;
    const reply = (m: { payload: Uint8Array }) => ({ type: r.type, flags: 2, payload: m.payload });
    switch (nfnlCmd(r.type)) {
      case NftMsg.GETCHAIN:
        return [reply(chainMsg!), doneReply(r)];
      case NftMsg.GETSET:
        return [reply(setMsg!), doneReply(r)];
      case NftMsg.GETSETELEM:
        return [reply(elemMsg!), doneReply(r)];
      default:
        return [doneReply(r)];
    }
  });
  t.deepEqual(await client.list('chain'), ['services']);
  t.deepEqual(await client.list('set'), ['addrs']);
  t.deepEqual(await client.listElements('addrs'), [{ kind: 'element', set: 'addrs', key: ['10.0.0.1'] }]);
  conn.close();
});

test('destroy can be emulated as add + delete for kernels without DESTROY messages', (t) => {
  const tx = new NftTransaction(scope);
  tx.destroy({ kind: 'chain', name: 'old', base: { type: 'nat', hook: 'output', priority: 0 } });
  tx.destroy({ kind: 'set', name: 's', key: ['mark'] });
  const native = tx.messages();
  t.deepEqual(
    native.map((m) => nfnlCmd(m.type)),
    [NftMsg.DESTROYCHAIN, NftMsg.DESTROYSET],
  );
  const emulated = tx.messages(() => undefined, { emulateDestroy: true });
  t.deepEqual(
    emulated.map((m) => nfnlCmd(m.type)),
    [NftMsg.NEWCHAIN, NftMsg.DELCHAIN, NftMsg.NEWSET, NftMsg.DELSET],
  );
  // The emulating add is a plain chain add: no hook, so an existing base chain is left as it is.
  t.false(new AttrSet(emulated[0]!.payload.subarray(4), 'c').has(4));
  const bad = new NftTransaction(scope);
  bad.destroy({ kind: 'rule', chain: 'c', exprs: [], handle: 3n });
  t.throws(() => bad.messages(() => undefined, { emulateDestroy: true }), { message: /needs kernel 6\.3\+/ });
});
