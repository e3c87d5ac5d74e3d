// Our encoder against the bytes nft 1.0.6 sends for the same commands (see CAPTURE.md).
import test from 'ava';
import type { Family, NftElement, NftRule, NftSetLike } from '../../../../src/netlink/nftables/index.ts';
import { NftTransaction, rule } from '../../../../src/netlink/nftables/index.ts';
import { compare } from './fixture.ts';

const KP = 'kube-proxy';
const tx = (family: Family = 'ip'): NftTransaction => new NftTransaction({ family, table: KP });
const H3 = 3 * 3600 * 1000;

const sets: Record<string, NftSetLike> = {
  addrs: { kind: 'set', name: 'addrs', key: ['ipv4_addr'] },
  clusterIps: { kind: 'set', name: 'cluster-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'] },
  cidrs: { kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] },
  cidrs6: { kind: 'set', name: 'cidrs', key: ['ipv6_addr'], flags: ['interval'] },
  affinity: { kind: 'set', name: 'affinity', key: ['ipv4_addr'], flags: ['dynamic', 'timeout'], timeoutMs: H3 },
  ranges: { kind: 'set', name: 'ranges', key: ['ipv4_addr', 'inet_service'], flags: ['interval'] },
  serviceIps: { kind: 'map', name: 'service-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' },
  dnatTargets: {
    kind: 'map',
    name: 'dnat-targets',
    key: ['ipv4_addr', 'inet_service'],
    data: ['ipv4_addr', 'inet_service'],
  },
};
// The nftables proxier's endpoints maps, written out as nft records them (`typeof … numgen
// random mod 1 : ip daddr . th dport`); test/unit/proxier/nftables/endpoints-map.test.ts holds
// the proxier's own declarations to the same captures.
const numgenKey = { expr: 'numgen', mode: 'random', modulus: 1 } as const;
// The nftables proxier's per-Service balancing map (proxier/nftables/balancing.ts
// balancingMapDef; test/unit/proxier/nftables/endpoints-map.test.ts holds it to the same shape).
const balancingMapDef = (family: 'ip' | 'ip6', name: string): NftSetLike => ({
  kind: 'map',
  name,
  key: ['integer'],
  typeof: [numgenKey],
  data: [family === 'ip' ? 'ipv4_addr' : 'ipv6_addr', 'inet_service'],
  dataTypeof: [
    { expr: 'payload', field: family === 'ip' ? 'ip daddr' : 'ip6 daddr' },
    { expr: 'payload', field: 'th dport' },
  ],
});
const endpointsMaps = {
  ip: {
    kind: 'map',
    name: 'endpoints-2',
    key: ['ipv4_addr', 'inet_proto', 'inet_service', 'integer'],
    typeof: [
      { expr: 'payload', field: 'ip daddr' },
      { expr: 'meta', key: 'l4proto' },
      { expr: 'payload', field: 'th dport' },
      numgenKey,
    ],
    data: ['ipv4_addr', 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: 'ip daddr' },
      { expr: 'payload', field: 'th dport' },
    ],
  },
  ip6: {
    kind: 'map',
    name: 'endpoints-2',
    key: ['ipv6_addr', 'inet_proto', 'inet_service', 'integer'],
    typeof: [
      { expr: 'payload', field: 'ip6 daddr' },
      { expr: 'meta', key: 'l4proto' },
      { expr: 'payload', field: 'th dport' },
      numgenKey,
    ],
    data: ['ipv6_addr', 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: 'ip6 daddr' },
      { expr: 'payload', field: 'th dport' },
    ],
  },
  nodeport: {
    kind: 'map',
    name: 'nodeport-endpoints-2',
    key: ['inet_proto', 'inet_service', 'integer'],
    typeof: [{ expr: 'meta', key: 'l4proto' }, { expr: 'payload', field: 'th dport' }, numgenKey],
    data: ['ipv4_addr', 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: 'ip daddr' },
      { expr: 'payload', field: 'th dport' },
    ],
  },
} satisfies Record<string, NftSetLike>;

const schema = (name: string): NftSetLike | undefined => Object.values(sets).find((s) => s.name === name);
const el = (set: string, key: NftElement['key'], more: Partial<NftElement> = {}): NftElement => ({
  kind: 'element',
  set,
  key,
  ...more,
});

type Case = { build: () => NftTransaction; pick?: number[]; theirs?: number[]; schema?: typeof schema };
const cases: Record<string, Case> = {
  table: {
    build: () => {
      const t = tx();
      t.add({ kind: 'table' });
      return t;
    },
  },
  'table-inet': {
    build: () => {
      const t = tx('inet');
      t.add({ kind: 'table' });
      return t;
    },
  },
  'table-delete': {
    build: () => {
      const t = tx();
      t.delete({ kind: 'table' });
      return t;
    },
  },
  'chain-base-nat': {
    build: () => {
      const t = tx();
      t.add({
        kind: 'chain',
        name: 'nat-prerouting',
        base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
      });
      return t;
    },
  },
  'chain-base-filter-drop': {
    build: () => {
      const t = tx();
      t.add({
        kind: 'chain',
        name: 'filter-input',
        base: { type: 'filter', hook: 'input', priority: 0, policy: 'drop' },
      });
      return t;
    },
  },
  'chain-base-netdev': {
    build: () => {
      const t = tx('netdev');
      t.add({
        kind: 'chain',
        name: 'ingress',
        base: { type: 'filter', hook: 'ingress', device: 'lo', priority: -500 },
      });
      return t;
    },
  },
  'chain-regular': {
    build: () => {
      const t = tx();
      t.add({ kind: 'chain', name: 'services' });
      return t;
    },
  },
  'chain-flush-delete': {
    build: () => {
      const t = tx();
      t.flush({ kind: 'chain', name: 'services' });
      t.delete({ kind: 'chain', name: 'services' });
      return t;
    },
  },
  'set-ipv4': {
    build: () => {
      const t = tx();
      t.add(sets.addrs!);
      return t;
    },
  },
  'set-concat': {
    build: () => {
      const t = tx();
      t.add({ ...sets.clusterIps!, comment: 'cluster IPs' });
      return t;
    },
  },
  'set-interval': {
    build: () => {
      const t = tx();
      t.add(sets.cidrs!);
      return t;
    },
  },
  'set-ipv6-interval': {
    build: () => {
      const t = tx('ip6');
      t.add(sets.cidrs6!);
      return t;
    },
  },
  'set-timeout': {
    build: () => {
      const t = tx();
      t.add(sets.affinity!);
      return t;
    },
  },
  'set-concat-interval': {
    build: () => {
      const t = tx();
      t.add(sets.ranges!);
      return t;
    },
  },
  'map-verdict': {
    build: () => {
      const t = tx();
      t.add(sets.serviceIps!);
      return t;
    },
  },
  'map-data-concat': {
    build: () => {
      const t = tx();
      t.add(sets.dnatTargets!);
      return t;
    },
  },
  'map-numgen': {
    build: () => {
      const t = tx();
      t.add({
        kind: 'map',
        name: 'ep-pick',
        key: ['inet_proto', 'integer'],
        typeof: [
          { expr: 'meta', key: 'l4proto' },
          { expr: 'numgen', mode: 'random', modulus: 4 },
        ],
        data: 'verdict',
      });
      return t;
    },
  },
  'map-typeof-numgen': {
    build: () => {
      const t = tx();
      t.add({
        kind: 'map',
        name: 'pick',
        key: ['integer'],
        typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
        data: 'verdict',
      });
      return t;
    },
  },
  'map-typeof-numgen-dnat': {
    build: () => {
      const t = tx();
      t.add({
        kind: 'map',
        name: 'endpoints',
        key: ['integer'],
        typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
        data: ['ipv4_addr', 'inet_service'],
        dataTypeof: [
          { expr: 'payload', field: 'ip daddr' },
          { expr: 'payload', field: 'tcp dport' },
        ],
      });
      return t;
    },
  },
  'map-typeof-numgen-dnat6': {
    build: () => {
      const t = tx('ip6');
      t.add({
        kind: 'map',
        name: 'endpoints',
        key: ['integer'],
        typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
        data: ['ipv6_addr', 'inet_service'],
        dataTypeof: [
          { expr: 'payload', field: 'ip6 daddr' },
          { expr: 'payload', field: 'tcp dport' },
        ],
      });
      return t;
    },
  },
  'set-delete-flush': {
    build: () => {
      const t = tx();
      t.flush(sets.addrs!);
      t.delete(sets.addrs!);
      return t;
    },
  },
  'elem-ipv4': {
    build: () => {
      const t = tx();
      t.add(el('addrs', ['10.0.0.1']));
      t.add(el('addrs', ['10.0.0.2']));
      return t;
    },
  },
  'elem-concat': {
    build: () => {
      const t = tx();
      t.add(el('cluster-ips', ['10.96.0.1', 'tcp', 443]));
      t.add(el('cluster-ips', ['10.96.0.10', 'udp', 53]));
      return t;
    },
  },
  // nft sends the leading end element at 0 because it knows the set is empty; we do the same
  // for a set created in the same transaction, so compare the element message only.
  'elem-interval': {
    build: () => {
      const t = tx();
      t.add(sets.cidrs!);
      t.add(el('cidrs', ['10.0.0.0/8']));
      t.add(el('cidrs', ['192.168.1.0/24']));
      return t;
    },
    pick: [1],
  },
  'elem-interval-max': {
    build: () => {
      const t = tx();
      t.add(sets.cidrs!);
      t.add(el('cidrs', ['255.255.255.0/24']));
      return t;
    },
    pick: [1],
  },
  'elem-interval-more': {
    build: () => {
      const t = tx();
      t.add(el('cidrs', ['192.168.1.0/24']));
      return t;
    },
  },
  'elem-interval-delete': {
    build: () => {
      const t = tx();
      t.delete(el('cidrs', ['192.168.1.0/24']));
      return t;
    },
  },
  'elem-ipv6-interval': {
    build: () => {
      const t = tx('ip6');
      t.add(sets.cidrs6!);
      t.add(el('cidrs', ['fd00::/64']));
      return t;
    },
    pick: [1],
  },
  'elem-concat-interval': {
    build: () => {
      const t = tx();
      t.add(el('ranges', ['10.0.0.0/8', 80]));
      t.add(el('ranges', ['192.168.0.1', '1000-2000']));
      return t;
    },
  },
  'elem-verdict': {
    build: () => {
      const t = tx();
      t.add(el('service-ips', ['10.96.0.1', 'tcp', 443], { value: { verdict: 'goto', chain: 'svc-a' } }));
      t.add(el('service-ips', ['10.96.0.10', 'udp', 53], { value: { verdict: 'jump', chain: 'svc-b' } }));
      t.add(el('service-ips', ['10.96.0.11', 'sctp', 9], { value: { verdict: 'drop' } }));
      return t;
    },
  },
  'elem-timeout': {
    build: () => {
      const t = tx();
      t.add(el('affinity', ['10.1.2.3'], { timeoutMs: 10_000 }));
      return t;
    },
  },
  'elem-delete': {
    build: () => {
      const t = tx();
      t.delete(el('addrs', ['10.0.0.1']));
      return t;
    },
  },
  'elem-delete-verdict': {
    build: () => {
      const t = tx();
      t.delete(el('service-ips', ['10.96.0.1', 'tcp', 443], { value: { verdict: 'goto', chain: 'svc-a' } }));
      return t;
    },
  },
  'elem-comment': {
    build: () => {
      const t = tx();
      t.add(el('addrs', ['10.0.0.1'], { comment: 'x' }));
      return t;
    },
  },
  // The nftables proxier's endpoints maps (see endpointsMaps above).
  'map-endpoints-frontend': {
    build: () => {
      const t = tx();
      t.add(endpointsMaps.ip);
      return t;
    },
  },
  'map-endpoints-frontend6': {
    build: () => {
      const t = tx('ip6');
      t.add(endpointsMaps.ip6);
      return t;
    },
  },
  'map-endpoints-nodeport': {
    build: () => {
      const t = tx();
      t.add(endpointsMaps.nodeport);
      return t;
    },
  },
  'elem-endpoints-frontend': {
    build: () => {
      const t = tx();
      t.add(el('endpoints-2', ['10.96.0.10', 'udp', 53, 0], { value: ['10.244.1.5', 53] }));
      t.add(el('endpoints-2', ['10.96.0.10', 'udp', 53, 1], { value: ['10.244.2.7', 5353] }));
      return t;
    },
    schema: (name) => (name === 'endpoints-2' ? endpointsMaps.ip : undefined),
  },
  'set-and-elems-same-batch': {
    build: () => {
      const t = tx();
      t.add(sets.addrs!);
      t.add(el('addrs', ['10.0.0.1']));
      return t;
    },
    schema: () => undefined,
  },
};

const rules = (family: Family, list: NftRule[]): NftTransaction => {
  const t = tx(family);
  for (const r of list) t.add(r);
  return t;
};
const R = (chain = 'c', family: Family = 'ip') => rule(family, chain);
const ruleCases: Record<string, Case> = {
  'rule-immediate': {
    build: () =>
      rules('ip', [
        R().accept().build(),
        R().drop().build(),
        R().jump('t').build(),
        R().goto('t').build(),
        R().return().build(),
        R().continue().build(),
      ]),
  },
  'rule-ct-state-counter-comment': {
    build: () => rules('ip', [R().ctState(['new']).counter().accept().comment('new connections').build()]),
  },
  'rule-ct-state-invalid': { build: () => rules('ip', [R().ctState(['invalid']).drop().build()]) },
  'rule-ct-original': {
    build: () =>
      rules('ip', [
        {
          kind: 'rule',
          chain: 'c',
          exprs: [
            { type: 'ct', key: 'direction', dreg: 1 },
            { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(0) },
            { type: 'ct', key: 'ip daddr', dreg: 1, direction: 'original' },
            { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(10, 96, 0, 1) },
            { type: 'immediate', verdict: { verdict: 'accept' } },
          ],
        },
      ]),
  },
  'rule-vmap-lookup': {
    build: () => rules('ip', [R().vmap(['ip daddr', 'meta l4proto', 'th dport'], 'service-ips').build()]),
  },
  'rule-set-lookup': {
    build: () =>
      rules('ip', [
        R().inSet(['ip saddr'], 'cidrs').drop().build(),
        R().inSet(['ip saddr'], 'cidrs', true).accept().build(),
      ]),
  },
  'rule-numgen': { build: () => rules('ip', [R().match('numgen random mod 3', 0).goto('ep1').build()]) },
  'rule-numgen-map': {
    build: () => rules('ip', [R().vmap(['meta l4proto', 'numgen random mod 4'], 'ep-pick').build()]),
  },
  'rule-dnat': { build: () => rules('ip', [R().match('meta l4proto', 'tcp').dnat('10.1.0.1', 8080).build()]) },
  'rule-dnat-addr': { build: () => rules('ip', [R().dnat('10.1.0.1').build()]) },
  'rule-dnat-map': {
    build: () =>
      rules('ip', [R().match('meta l4proto', 'tcp').dnatMap(['ip daddr', 'th dport'], 'dnat-targets').build()]),
  },
  'rule-dnat-inet': {
    build: () =>
      rules('inet', [
        R('c', 'inet').match('meta l4proto', 'tcp').dnat('10.1.0.1', 8080).build(),
        R('c', 'inet').match('meta l4proto', 'tcp').dnat('fd00::1', 8080).build(),
      ]),
  },
  'rule-snat': { build: () => rules('ip', [R().snat('10.0.0.1').build()]) },
  'rule-masq': {
    build: () =>
      rules('ip', [R().markAnd(0x4000, 0x4000).masquerade().build(), R().masquerade({ fullyRandom: true }).build()]),
  },
  'rule-mark-set': { build: () => rules('ip', [R().setMarkOr(0x4000).build()]) },
  'rule-reject': {
    build: () =>
      rules('ip', [
        R().reject('icmp port-unreachable').build(),
        R().match('meta l4proto', 'tcp').reject('tcp reset').build(),
        R().reject('icmp host-unreachable').build(),
      ]),
  },
  'rule-reject-inet': {
    build: () =>
      rules('inet', [
        R('c', 'inet').reject('icmpx port-unreachable').build(),
        R('c', 'inet').match('meta nfproto', 'ipv6').reject('icmpv6 port-unreachable').build(),
      ]),
  },
  'rule-fib': {
    build: () => rules('ip', [R().fibDaddrLocal().jump('nodeports').build(), R().fibDaddrLocal(true).return().build()]),
  },
  'rule-dnat-numgen-map': {
    build: () => rules('ip', [R().match('meta l4proto', 'tcp').dnatNumgen(3, 10, 'endpoints').build()]),
  },
  // Per-Service load balancing (proxier/nftables/balancing.ts): the map and its picking rule.
  'rule-dnat-jhash-map': {
    build: () => {
      const t = tx();
      t.add(balancingMapDef('ip', 'lb'));
      t.add(R().match('meta l4proto', 'tcp').dnatHashSource(1009, 0, 'lb').build());
      return t;
    },
  },
  'rule-dnat-jhash-map6': {
    build: () => {
      const t = tx('ip6');
      t.add(balancingMapDef('ip6', 'lb'));
      t.add(R('c', 'ip6').match('meta l4proto', 'udp').dnatHashSource(101, 0, 'lb').build());
      return t;
    },
  },
  'rule-dnat-numgen-inc-map': {
    build: () => {
      const t = tx();
      t.add(balancingMapDef('ip', 'lb'));
      t.add(R().match('meta l4proto', 'tcp').dnatRoundRobin(3, 'lb').build());
      return t;
    },
  },
  'rule-dnat-frontend-map': {
    build: () => {
      const t = tx();
      t.add(endpointsMaps.ip);
      t.add(
        R()
          .match('meta l4proto', 'udp')
          .dnatMap(['ip daddr', 'meta l4proto', 'th dport', 'numgen random mod 2'], 'endpoints-2')
          .build(),
      );
      return t;
    },
  },
  'rule-dnat-frontend-map6': {
    build: () => {
      const t = tx('ip6');
      t.add(endpointsMaps.ip6);
      t.add(
        R('c', 'ip6')
          .match('meta l4proto', 'tcp')
          .dnatMap(['ip6 daddr', 'meta l4proto', 'th dport', 'numgen random mod 2'], 'endpoints-2')
          .build(),
      );
      return t;
    },
  },
  'rule-dnat-nodeport-map': {
    build: () => {
      const t = tx();
      t.add(endpointsMaps.nodeport);
      t.add(
        R()
          .match('meta l4proto', 'sctp')
          .dnatMap(['meta l4proto', 'th dport', 'numgen random mod 2'], 'nodeport-endpoints-2')
          .build(),
      );
      return t;
    },
  },
  'rule-affinity-pick': {
    build: () =>
      rules('ip', [
        R()
          .match('numgen random mod 2', 0)
          .update('aff', ['ip saddr'])
          .match('meta l4proto', 'tcp')
          .dnat('10.1.0.1', 8080)
          .build(),
      ]),
  },
  'rule-mark-clear': { build: () => rules('ip', [R().clearMark(0x4000).build()]) },
  'rule-fib-saddr': { build: () => rules('ip', [R().fibSaddrLocal().accept().build()]) },
  'rule-dynset': { build: () => rules('ip', [R().update('affinity', ['ip saddr'], H3).build()]) },
  'rule-dynset-concat': { build: () => rules('ip', [R().update('affinity', ['ip saddr', 'ip daddr']).build()]) },
  'rule-limit': { build: () => rules('ip', [R().limit(10, 5).accept().build()]) },
  'rule-payload-ports': {
    build: () =>
      rules('ip', [
        R().match('ip daddr', '10.96.0.1').match('meta l4proto', 'tcp').match('th dport', 80).accept().build(),
        R().match('ip saddr', '10.0.0.0/8').accept().build(),
      ]),
  },
  'rule-meta-iif': {
    build: () =>
      rules('ip', [
        R().match('iifname', 'eth0').match('oifname', 'lo', 'neq').accept().build(),
        R().match('meta mark', 0x4000).accept().build(),
      ]),
  },
  'rule-iifname-wildcard': {
    build: () =>
      rules('ip', [
        R().match('iifname', 'veth*', 'neq').setMarkOr(0x4000).build(),
        R().match('iifname', 'br0', 'neq').accept().build(),
        R().match('iifname', 'cali*').accept().build(),
      ]),
  },
  'rule-notrack-log': { build: () => rules('ip', [R().notrack().build(), R().log('kp: ').drop().build()]) },
  'rule-ipv6': {
    build: () =>
      rules('ip6', [
        R('c', 'ip6')
          .match('ip6 daddr', 'fd00::1')
          .match('meta l4proto', 'tcp')
          .match('th dport', 443)
          .accept()
          .build(),
      ]),
  },
  'rule-delete-handle': {
    build: () => {
      const t = tx();
      t.delete({ kind: 'rule', chain: 'c', exprs: [], handle: 2n });
      return t;
    },
  },
  'rule-insert-replace': {
    build: () => {
      const t = tx();
      t.insert(R().drop().build());
      t.replace({ ...R().counter().build(), handle: 2n });
      t.add({ ...R().return().build(), position: 2n });
      return t;
    },
  },
};

for (const [name, c] of Object.entries({ ...cases, ...ruleCases })) {
  test(`matches nft: ${name}`, (t) => {
    const transaction = c.build();
    t.is(transaction.error, undefined);
    const diff = compare(name, transaction.messages(c.schema ?? schema), c.pick, c.theirs);
    if (diff) t.fail(`\n${diff}`);
    else t.pass();
  });
}

test('a prefix match: byte-aligned prefixes load only their bytes, others mask (as nft compiles them)', (t) => {
  const aligned = rule('ip', 'c').match('ip saddr', '10.0.0.0/8').accept().build();
  t.deepEqual(
    aligned.exprs.map((e) => e.type),
    ['payload', 'cmp', 'immediate'],
  );
  t.is(aligned.text, 'ip saddr 10.0.0.0/8 accept');
  const masked = rule('ip', 'c').match('ip saddr', '10.16.0.0/12', 'neq').accept().build();
  t.deepEqual(
    masked.exprs.map((e) => e.type),
    ['payload', 'bitwise', 'cmp', 'immediate'],
  );
  t.deepEqual(masked.exprs[1], {
    type: 'bitwise',
    sreg: 1,
    dreg: 1,
    len: 4,
    mask: Uint8Array.of(255, 240, 0, 0),
    xor: new Uint8Array(4),
  });
  t.is(masked.text, 'ip saddr != 10.16.0.0/12 accept');
});
