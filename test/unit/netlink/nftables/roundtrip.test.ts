// Every encoder has a decoder: decode(encode(x)) gives x back, for each expression and object.
import test from 'ava';
import { AttrSet, AttrWriter } from '../../../../src/netlink/core/index.ts';
import type { NftElement, NftExpr, NftSetLike } from '../../../../src/netlink/nftables/index.ts';
import {
  decodeChain,
  decodeRawElements,
  decodeRule,
  decodeSet,
  decodeTable,
  mergeIntervals,
  NFTA_LIST_ELEM,
  NFTA_RULE_EXPRESSIONS,
  NftTransaction,
  readExprs,
  toElements,
} from '../../../../src/netlink/nftables/index.ts';
import { writeExprs } from '../../../../src/netlink/nftables/expr/index.ts';
import type { OutMessage } from '../../../../src/netlink/core/index.ts';

const scope = { family: 'ip', table: 'kube-proxy' } as const;
const ctx = { setId: (n: string) => (n === 'fresh' ? 7 : undefined) };

const EXPRS: NftExpr[] = [
  { type: 'payload', base: 'network', offset: 16, len: 4, dreg: 1 },
  { type: 'payload', base: 'transport', offset: 2, len: 2, sreg: 1, csumType: 1, csumOffset: 16, csumFlags: 1 },
  { type: 'meta', key: 'l4proto', dreg: 9 },
  { type: 'meta', key: 'mark', sreg: 1 },
  { type: 'cmp', sreg: 1, op: 'neq', data: Uint8Array.of(1, 2, 3, 4) },
  { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: Uint8Array.of(0, 0x40, 0, 0), xor: Uint8Array.of(0, 0, 0, 0) },
  { type: 'bitwise', sreg: 1, dreg: 2, op: 'lshift', len: 4, data: Uint8Array.of(8, 0, 0, 0) },
  { type: 'lookup', set: 'service-ips', sreg: 1, dreg: 0 },
  { type: 'lookup', set: 'cidrs', sreg: 1, invert: true },
  { type: 'immediate', verdict: { verdict: 'goto', chain: 'svc-x' } },
  { type: 'immediate', verdict: { verdict: 'return' } },
  { type: 'immediate', dreg: 1, data: Uint8Array.of(10, 0, 0, 1) },
  { type: 'numgen', mode: 'random', modulus: 3, offset: 0, dreg: 1 },
  { type: 'numgen', mode: 'inc', modulus: 5, offset: 2, dreg: 9 },
  { type: 'hash', hash: 'jhash', sreg: 2, dreg: 1, len: 4, modulus: 1009, seed: 0, offset: 0 },
  { type: 'hash', hash: 'jhash', sreg: 2, dreg: 1, len: 16, modulus: 101, seed: 0xdeadbeef, offset: 7 },
  { type: 'nat', nat: 'dnat', family: 'ip', regAddrMin: 1, regProtoMin: 2, flags: 2 },
  { type: 'nat', nat: 'snat', family: 'ip6', regAddrMin: 1, regAddrMax: 1, regProtoMin: 12, regProtoMax: 12 },
  { type: 'masq' },
  { type: 'masq', flags: 16, regProtoMin: 1, regProtoMax: 2 },
  { type: 'reject', reject: 'icmp', code: 3 },
  { type: 'reject', reject: 'tcp-reset', code: 0 },
  { type: 'reject', reject: 'icmpx', code: 1 },
  { type: 'ct', key: 'state', dreg: 1 },
  { type: 'ct', key: 'ip daddr', dreg: 1, direction: 'original' },
  { type: 'ct', key: 'mark', sreg: 1 },
  { type: 'fib', result: 'type', flags: ['daddr'], dreg: 1 },
  { type: 'fib', result: 'oif', flags: ['saddr', 'iif'], dreg: 1 },
  { type: 'counter' },
  { type: 'counter', bytes: 1234n, packets: 5n },
  { type: 'dynset', set: 'affinity', op: 'update', sregKey: 1, timeoutMs: 10_800_000n },
  { type: 'dynset', set: 'fresh', op: 'add', sregKey: 1, sregData: 9, invert: true },
  { type: 'limit', rate: 10n, unit: 1n, burst: 5, kind: 'packets' },
  { type: 'limit', rate: 1000n, unit: 60n, burst: 0, kind: 'bytes', invert: true },
  { type: 'log', prefix: 'kp: ' },
  { type: 'log', prefix: 'x', group: 2, snaplen: 64, qthreshold: 1, level: 4, flags: 0 },
  { type: 'notrack' },
  { type: 'unknown', name: 'quota', data: Uint8Array.of(12, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 9) },
];

for (const e of EXPRS) {
  test(`expression round trip: ${e.type} ${JSON.stringify(e, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? Array.from(v) : v)).slice(0, 80)}`, (t) => {
    const w = new AttrWriter();
    writeExprs(w, [e], ctx);
    const back = readExprs(new AttrSet(w.finish(), 'exprs'));
    t.deepEqual(back, [e]);
  });
}

test('a set id from the context goes with lookups and dynsets', (t) => {
  const w = new AttrWriter();
  writeExprs(w, [{ type: 'lookup', set: 'fresh', sreg: 1 }], ctx);
  t.true(Buffer.from(w.finish()).includes(Buffer.from([8, 0, 4, 0, 0, 0, 0, 7])));
});

const one = (m: OutMessage[]): OutMessage => {
  if (m.length !== 1) throw new Error(`expected one message, got ${m.length}`);
  return m[0]!;
};

test('table, chain, rule and set messages decode back to the objects', (t) => {
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'table', comment: 'ours' });
  tx.add({
    kind: 'chain',
    name: 'pre',
    base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
    comment: 'entry',
  });
  tx.add({ kind: 'chain', name: 'services' });
  tx.add({ kind: 'rule', chain: 'services', exprs: EXPRS.slice(0, 12), comment: 'all of it' });
  const sets: NftSetLike[] = [
    { kind: 'set', name: 'a', key: ['ipv4_addr', 'inet_proto', 'inet_service'], comment: 'c' },
    { kind: 'set', name: 'b', key: ['ipv6_addr'], flags: ['interval'] },
    { kind: 'set', name: 'c', key: ['ipv4_addr', 'inet_service'], flags: ['interval'], size: 100 },
    { kind: 'set', name: 'd', key: ['ipv4_addr'], flags: ['timeout', 'dynamic'], timeoutMs: 60_000 },
    { kind: 'map', name: 'e', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' },
    { kind: 'map', name: 'f', key: ['ipv4_addr', 'inet_service'], data: ['ipv4_addr', 'inet_service'] },
    {
      kind: 'map',
      name: 'g',
      key: ['inet_proto', 'integer'],
      typeof: [
        { expr: 'meta', key: 'l4proto' },
        { expr: 'numgen', mode: 'random', modulus: 4 },
      ],
      data: 'verdict',
    },
    { kind: 'set', name: 'h', key: ['mark', 'ifname', 'ether_addr', 'iface_index', 'ct_state'] },
  ];
  for (const s of sets) tx.add(s);
  const msgs = tx.messages();
  const table = decodeTable(msgs[0]!);
  t.deepEqual([table.family, table.name, table.table], ['ip', 'kube-proxy', { kind: 'table', comment: 'ours' }]);
  t.deepEqual(decodeChain(msgs[1]!).chain, {
    kind: 'chain',
    name: 'pre',
    base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
    comment: 'entry',
  });
  t.deepEqual(decodeChain(msgs[2]!).chain, { kind: 'chain', name: 'services' });
  const r = decodeRule(msgs[3]!);
  t.is(r.table, 'kube-proxy');
  t.deepEqual(r.rule, { kind: 'rule', chain: 'services', exprs: EXPRS.slice(0, 12), comment: 'all of it' });
  sets.forEach((s, i) => {
    const back = decodeSet(msgs[4 + i]!);
    t.true(back.typed, s.name);
    const norm = (x: NftSetLike) => ({ ...x, flags: [...(x.flags ?? [])].sort() });
    t.deepEqual(norm(back.set), norm(s), s.name);
  });
});

test('elements decode back: plain, concat, verdict, data, timeouts, comments, intervals of both kinds', (t) => {
  const cases: [NftSetLike, NftElement['key'][], Partial<NftElement>?][] = [
    [
      { kind: 'set', name: 'a', key: ['ipv4_addr', 'inet_proto', 'inet_service'] },
      [
        ['10.96.0.1', 'tcp', 443],
        ['10.96.0.10', 'udp', 53],
        ['10.0.0.1', 'sctp', 9],
      ],
    ],
    [
      { kind: 'set', name: 'b', key: ['ipv4_addr'], flags: ['interval'] },
      [['10.0.0.0/8'], ['192.168.1.0/24'], ['172.16.0.1-172.16.0.9'], ['255.255.255.0/24'], ['1.2.3.4']],
    ],
    [
      { kind: 'set', name: 'c', key: ['ipv6_addr'], flags: ['interval'] },
      [['fd00::/64'], ['2001:db8::1'], ['ffff::/16']],
    ],
    [
      { kind: 'set', name: 'd', key: ['ipv4_addr', 'inet_service'], flags: ['interval'] },
      [
        ['10.0.0.0/8', 80],
        ['192.168.0.1', '1000-2000'],
      ],
    ],
    [{ kind: 'set', name: 'e', key: ['inet_service'], flags: ['interval'] }, [['1000-2000'], [80]]],
    [
      { kind: 'set', name: 'f', key: ['ipv4_addr'], flags: ['timeout'] },
      [['10.1.2.3']],
      { timeoutMs: 10_000, comment: 'hi' },
    ],
    [
      { kind: 'map', name: 'g', key: ['ipv4_addr', 'inet_service'], data: ['ipv4_addr', 'inet_service'] },
      [['10.96.0.20', 80]],
      { value: ['10.1.0.1', 8080] },
    ],
    [
      { kind: 'map', name: 'h', key: ['inet_proto', 'integer'], data: 'verdict' },
      [
        ['tcp', 0],
        ['udp', 1],
      ],
      { value: { verdict: 'goto', chain: 'ep' } },
    ],
    [{ kind: 'set', name: 'i', key: ['mark', 'ifname', 'ether_addr'] }, [[0x4000, 'eth0', '02:00:00:00:00:01']]],
  ];
  for (const [set, keys, more] of cases) {
    const tx = new NftTransaction(scope);
    const els: NftElement[] = keys.map((key) => ({ kind: 'element', set: set.name, key, ...(more ?? {}) }));
    for (const e of els) tx.add(e);
    const msg = one(tx.messages(() => set));
    const raw = decodeRawElements(msg);
    t.is(raw.set, set.name);
    const back = toElements(set, raw.elements);
    const sortKey = (e: NftElement) => JSON.stringify(e.key.map(String));
    t.deepEqual(
      [...back].sort((x, y) => sortKey(x).localeCompare(sortKey(y))),
      [...els].sort((x, y) => sortKey(x).localeCompare(sortKey(y))),
      set.name,
    );
  }
});

test('the rule expression list is one NFTA_RULE_EXPRESSIONS of NFTA_LIST_ELEMs', (t) => {
  const tx = new NftTransaction(scope);
  tx.add({ kind: 'rule', chain: 'c', exprs: [{ type: 'counter' }, { type: 'notrack' }] });
  const msg = one(tx.messages());
  const attrs = new AttrSet(msg.payload.subarray(4), 'rule');
  const list = attrs.nested(NFTA_RULE_EXPRESSIONS)!;
  t.deepEqual(
    list.all.map((a) => a.type),
    [NFTA_LIST_ELEM, NFTA_LIST_ELEM],
  );
});

test('mergeIntervals makes overlapping ranges disjoint, keeps adjacent ones apart', (t) => {
  t.deepEqual(
    mergeIntervals('ipv4_addr', [
      '10.1.0.0/16',
      '10.0.0.0/8',
      '11.0.0.0/8',
      '192.168.0.5',
      '192.168.0.0/24',
      '172.16.0.1-172.16.0.9',
      '172.16.0.5-172.16.0.20',
    ]),
    ['10.0.0.0/8', '11.0.0.0/8', '172.16.0.1-172.16.0.20', '192.168.0.0/24'],
  );
  t.deepEqual(mergeIntervals('ipv6_addr', ['fd00::/64', 'fd00::1']), ['fd00::/64']);
  t.deepEqual(mergeIntervals('inet_service', ['1000-2000', 1500, '1900-2100', 80]), [80, '1000-2100']);
});
