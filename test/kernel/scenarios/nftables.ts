// Scenario functions for the nf_tables layer, run inside a test namespace by the netns
// agent (see test/helpers/netns.ts). They drive src/netlink/nftables against the real
// kernel and return plain data (bigints and Uint8Arrays travel through the agent's
// structured clone).

import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import type { NetlinkConnection } from '../../../src/netlink/core/index.ts';
import type { Family, NftElement, NftExpr, NftRule, NftSetLike } from '../../../src/netlink/nftables/index.ts';
import { NftClient, rule } from '../../../src/netlink/nftables/index.ts';
import { errorView as view } from './outcomes.ts';
import type { ErrorView } from './outcomes.ts';

export type { ErrorView };

async function withClient<T>(
  family: Family,
  table: string,
  fn: (c: NftClient, conn: NetlinkConnection) => Promise<T>,
): Promise<T> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 20_000 });
  try {
    return await fn(new NftClient({ family, table, transport: conn }), conn);
  } finally {
    conn.close();
  }
}

const H3 = 3 * 3600 * 1000;

export const SETS: NftSetLike[] = [
  { kind: 'set', name: 'cluster-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], comment: 'cluster IPs' },
  { kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] },
  { kind: 'set', name: 'ranges', key: ['ipv4_addr', 'inet_service'], flags: ['interval'] },
  { kind: 'set', name: 'affinity-a', key: ['ipv4_addr'], flags: ['dynamic', 'timeout'], timeoutMs: H3 },
  { kind: 'set', name: 'marks', key: ['mark'] },
  { kind: 'map', name: 'service-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' },
  { kind: 'map', name: 'nodeports', key: ['inet_proto', 'inet_service'], data: 'verdict' },
  { kind: 'map', name: 'dnat-targets', key: ['ipv4_addr', 'inet_service'], data: ['ipv4_addr', 'inet_service'] },
  {
    kind: 'map',
    name: 'svc-a-eps',
    key: ['integer'],
    typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
    data: 'verdict',
  },
  {
    kind: 'map',
    name: 'endpoints',
    key: ['integer'],
    typeof: [{ expr: 'numgen', mode: 'random', modulus: 2 }],
    data: ['ipv4_addr', 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: 'ip daddr' },
      { expr: 'payload', field: 'tcp dport' },
    ],
  },
  {
    kind: 'map',
    name: 'ep-pick',
    key: ['inet_proto', 'integer'],
    typeof: [
      { expr: 'meta', key: 'l4proto' },
      { expr: 'numgen', mode: 'random', modulus: 2 },
    ],
    data: 'verdict',
  },
];

const el = (set: string, key: NftElement['key'], more: Partial<NftElement> = {}): NftElement => ({
  kind: 'element',
  set,
  key,
  ...more,
});

export const ELEMENTS: NftElement[] = [
  el('cluster-ips', ['10.96.0.1', 'tcp', 443]),
  el('cluster-ips', ['10.96.0.10', 'udp', 53], { comment: 'dns' }),
  el('cidrs', ['10.0.0.0/8']),
  el('cidrs', ['192.168.1.0/24']),
  el('cidrs', ['172.16.0.1-172.16.0.9']),
  el('cidrs', ['255.255.255.0/24']),
  el('ranges', ['10.0.0.0/8', 80]),
  el('ranges', ['192.168.0.1', '1000-2000']),
  el('affinity-a', ['10.1.2.3'], { timeoutMs: 600_000 }),
  el('marks', [0x4000]),
  el('service-ips', ['10.96.0.1', 'tcp', 80], { value: { verdict: 'goto', chain: 'svc-a' } }),
  el('service-ips', ['10.96.0.10', 'udp', 53], { value: { verdict: 'jump', chain: 'svc-b' } }),
  el('service-ips', ['10.96.0.11', 'sctp', 9], { value: { verdict: 'drop' } }),
  el('nodeports', ['tcp', 30080], { value: { verdict: 'goto', chain: 'svc-a' } }),
  el('dnat-targets', ['10.96.0.20', 80], { value: ['10.1.0.1', 8080] }),
  el('svc-a-eps', [0], { value: { verdict: 'goto', chain: 'ep-a1' } }),
  el('svc-a-eps', [1], { value: { verdict: 'goto', chain: 'ep-a2' } }),
  el('endpoints', [10], { value: ['10.1.0.1', 8080] }),
  el('endpoints', [11], { value: ['10.1.0.2', 8080] }),
  el('ep-pick', ['tcp', 0], { value: { verdict: 'goto', chain: 'ep-a1' } }),
  el('ep-pick', ['udp', 1], { value: { verdict: 'goto', chain: 'ep-a2' } }),
];

/** Rules using every expression the layer has, all in forms nft itself writes. */
export function rulesFor(): NftRule[] {
  const r = (chain: string) => rule('ip', chain);
  return [
    r('nat-prerouting').jump('services').build(),
    r('nat-output').jump('services').build(),
    r('nat-postrouting').jump('masquerading').build(),
    r('filter-input').ctState(['new']).counter().accept().comment('new connections').build(),
    r('filter-input').ctState(['invalid']).drop().build(),
    r('filter-input').ctState(['established', 'related']).accept().build(),
    r('services').vmap(['ip daddr', 'meta l4proto', 'th dport'], 'service-ips').build(),
    r('services').fibDaddrLocal().jump('nodeports').build(),
    r('services').fibDaddrLocal(true).return().build(),
    r('nodeports').vmap(['meta l4proto', 'th dport'], 'nodeports').build(),
    r('svc-a').inSet(['ip saddr'], 'cidrs', true).jump('mark-for-masq').build(),
    r('svc-a').inSet(['ip saddr'], 'affinity-a').goto('ep-a1').build(),
    r('svc-a').vmap(['numgen random mod 2'], 'svc-a-eps').build(),
    r('svc-b').vmap(['meta l4proto', 'numgen random mod 2'], 'ep-pick').build(),
    r('svc-b').match('numgen random mod 3', 0).goto('ep-a1').build(),
    r('ep-a1').update('affinity-a', ['ip saddr'], H3).build(),
    r('ep-a1').match('ip saddr', '10.1.0.1').jump('mark-for-masq').build(),
    r('ep-a1').match('meta l4proto', 'tcp').dnat('10.1.0.1', 8080).build(),
    r('ep-a2').dnat('10.1.0.2').build(),
    r('dnat-map').match('meta l4proto', 'tcp').dnatMap(['ip daddr', 'th dport'], 'dnat-targets').build(),
    r('dnat-map').match('meta l4proto', 'tcp').dnatNumgen(2, 10, 'endpoints').build(),
    r('dnat-map').fibSaddrLocal().jump('mark-for-masq').build(),
    r('mark-for-masq').setMarkOr(0x4000).build(),
    r('masquerading').clearMark(0x4000).build(),
    r('masquerading').markAnd(0x4000, 0, 'eq').return().build(),
    r('masquerading').inSet(['meta mark'], 'marks').counter().build(),
    r('masquerading').masquerade({ fullyRandom: true }).build(),
    r('masquerading').snat('10.0.0.1').build(),
    r('rejects').match('meta l4proto', 'tcp').reject('tcp reset').build(),
    r('rejects').reject('icmp port-unreachable').build(),
    r('rejects').inSet(['ip daddr', 'meta l4proto', 'th dport'], 'cluster-ips').reject().build(),
    r('rejects').inSet(['ip saddr', 'th dport'], 'ranges').drop().build(),
    r('misc').match('iifname', 'lo').match('oifname', 'eth0', 'neq').counter().accept().comment('loopback').build(),
    r('misc').limit(10).accept().build(),
    r('misc').limit(100, 20).continue().build(),
    r('misc').log('kp: ').drop().build(),
    r('misc').match('meta mark', 0x4000).match('th sport', 53).accept().build(),
    r('misc').match('ip saddr', '10.0.0.0/8').match('ip daddr', '10.16.0.0/12', 'neq').accept().build(),
    r('misc').ctDirection('original').counter().build(),
    r('misc').ctDirection('reply').return().build(),
    r('raw-prerouting').match('ip daddr', '10.96.0.10').match('meta l4proto', 'udp').notrack().build(),
    {
      kind: 'rule',
      chain: 'misc',
      exprs: [
        { type: 'ct', key: 'direction', dreg: 1 },
        { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(0) },
        { type: 'ct', key: 'ip daddr', dreg: 1, direction: 'original' },
        { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(10, 96, 0, 1) },
        { type: 'immediate', verdict: { verdict: 'accept' } },
      ],
      text: 'ct direction original ct original ip daddr 10.96.0.1 accept',
    },
  ];
}

/** Builds the full ip ruleset in one transaction; returns null or the error, plus the transaction text. */
export function applyFull(table: string): Promise<{ error: ErrorView | null; text: string }> {
  return withClient('ip', table, async (c) => {
    const tx = c.newTransaction();
    tx.add({ kind: 'table', comment: 'kube-proxy-ts test' });
    tx.add({
      kind: 'chain',
      name: 'nat-prerouting',
      base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' },
    });
    tx.add({ kind: 'chain', name: 'nat-output', base: { type: 'nat', hook: 'output', priority: -100 } });
    tx.add({
      kind: 'chain',
      name: 'nat-postrouting',
      base: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' },
    });
    tx.add({
      kind: 'chain',
      name: 'filter-input',
      base: { type: 'filter', hook: 'input', priority: 0, policy: 'accept' },
    });
    tx.add({ kind: 'chain', name: 'raw-prerouting', base: { type: 'filter', hook: 'prerouting', priority: -300 } });
    for (const n of [
      'services',
      'nodeports',
      'svc-a',
      'svc-b',
      'ep-a1',
      'ep-a2',
      'dnat-map',
      'mark-for-masq',
      'masquerading',
      'rejects',
      'misc',
    ]) {
      tx.add({ kind: 'chain', name: n, ...(n === 'misc' ? { comment: 'odds and ends' } : {}) });
    }
    for (const s of SETS) tx.add(s);
    for (const e of ELEMENTS) tx.add(e);
    for (const r of rulesFor()) tx.add(r);
    try {
      await c.run(tx);
      return { error: null, text: tx.toString() };
    } catch (e) {
      return { error: view(e), text: tx.toString() };
    }
  });
}

/** A transaction that adds a chain and rules, the last of which jumps to a missing chain. */
export function failingTransaction(table: string): Promise<ErrorView | null> {
  return withClient('ip', table, async (c) => {
    await c.listSets();
    const tx = c.newTransaction();
    tx.add({ kind: 'chain', name: 'newcomer' });
    tx.add(rule('ip', 'newcomer').accept().build());
    tx.add({ kind: 'element', set: 'cluster-ips', key: ['10.96.0.99', 'tcp', 99] });
    tx.flush({ kind: 'chain', name: 'misc' });
    tx.delete({ kind: 'element', set: 'cidrs', key: ['10.0.0.0/8'] });
    tx.add(rule('ip', 'services').jump('does-not-exist').build());
    try {
      await c.run(tx);
      return null;
    } catch (e) {
      return view(e);
    }
  });
}

const normExpr = (e: NftExpr): NftExpr => (e.type === 'counter' ? { type: 'counter' } : e);

export interface Readback {
  chains: string[];
  sets: NftSetLike[];
  elements: Record<string, NftElement[]>;
  rules: { chain: string; exprs: NftExpr[]; comment?: string }[];
  generation: number;
}

/** Everything in the table, read through our client. */
export function readBack(family: Family, table: string): Promise<Readback> {
  return withClient(family, table, async (c) => {
    const chains = (await c.listChains()).map((x) => x.name).sort();
    const sets = await c.listSets();
    const elements: Record<string, NftElement[]> = {};
    const keyText = (e: NftElement): string => JSON.stringify(e.key.map(String));
    for (const s of sets) {
      if ((s.flags ?? []).includes('dynamic')) continue;
      elements[s.name] = (await c.listElements(s.name)).sort((x, y) => keyText(x).localeCompare(keyText(y)));
    }
    const rules = (await c.listRules()).map((r) => {
      const out: { chain: string; exprs: NftExpr[]; comment?: string } = {
        chain: r.chain,
        exprs: r.exprs.map(normExpr),
      };
      if (r.comment !== undefined) out.comment = r.comment;
      return out;
    });
    return { chains, sets, elements, rules, generation: await c.generation() };
  });
}

/** Adds n elements to a verdict map in one transaction (split over many messages). */
export function bulkElements(
  table: string,
  n: number,
): Promise<{ error: ErrorView | null; messages: number; listed: number }> {
  return withClient('ip', table, async (c) => {
    const tx = c.newTransaction();
    tx.add({ kind: 'table' });
    tx.add({ kind: 'chain', name: 'target' });
    tx.add({ kind: 'map', name: 'big', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' });
    for (let i = 0; i < n; i++) {
      tx.add({
        kind: 'element',
        set: 'big',
        key: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, i % 2 ? 'udp' : 'tcp', 1 + (i % 60000)],
        value: { verdict: 'goto', chain: 'target' },
      });
    }
    const messages = tx.messages().length;
    try {
      await c.run(tx);
    } catch (e) {
      return { error: view(e), messages, listed: 0 };
    }
    return { error: null, messages, listed: (await c.listRawElements('big')).length };
  });
}

/** An inet table: nfproto-dependent matches, icmpx reject, ip and ip6 dnat, an ipv6 interval set. */
export function applyInet(table: string): Promise<ErrorView | null> {
  return withClient('inet', table, async (c) => {
    const tx = c.newTransaction();
    const r = (chain: string) => rule('inet', chain);
    tx.add({ kind: 'table' });
    tx.add({ kind: 'chain', name: 'prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100 } });
    tx.add({ kind: 'chain', name: 'filter', base: { type: 'filter', hook: 'forward', priority: 0, policy: 'accept' } });
    tx.add({ kind: 'set', name: 'cidrs6', key: ['ipv6_addr'], flags: ['interval'] });
    tx.add({ kind: 'element', set: 'cidrs6', key: ['fd00::/64'] });
    tx.add({ kind: 'element', set: 'cidrs6', key: ['2001:db8::1'] });
    tx.add(r('prerouting').match('ip daddr', '10.96.0.1').match('meta l4proto', 'tcp').dnat('10.1.0.1', 8080).build());
    tx.add(r('prerouting').match('ip6 daddr', 'fd00::10').match('meta l4proto', 'tcp').dnat('fd00::1', 8080).build());
    // (After an ip6 match nft prints an icmpx reject as a bare `reject`, which it reloads as
    // icmpv6: keep the icmpx reject on a family-neutral match.)
    tx.add(r('filter').inSet(['ip6 saddr'], 'cidrs6').drop().build());
    tx.add(r('filter').match('th dport', 9).reject('icmpx port-unreachable').build());
    tx.add(r('filter').match('meta nfproto', 'ipv6').reject('icmpv6 port-unreachable').build());
    try {
      await c.run(tx);
      return null;
    } catch (e) {
      return view(e);
    }
  });
}

/** Deletes by handle: a rule found by listing, then a set and chain; returns what remains. */
export function deleteByHandle(table: string): Promise<{ error: ErrorView | null; rulesLeft: number }> {
  return withClient('ip', table, async (c) => {
    const rules = await c.listRules('misc');
    const tx = c.newTransaction();
    for (const r of rules) tx.delete(r);
    try {
      await c.run(tx);
    } catch (e) {
      return { error: view(e), rulesLeft: -1 };
    }
    return { error: null, rulesLeft: (await c.listRules('misc')).length };
  });
}

/** The FakeNft contract (test/helpers/nft-contract.ts) against the kernel. */
export async function contract(table: string) {
  const { runContract } = await import('../../helpers/nft-contract.ts');
  return withClient('ip', table, (c) => runContract(c));
}

/** destroy, native and emulated, on present and missing objects. */
export function destroyBoth(
  table: string,
  mode: 'native' | 'emulate',
): Promise<{ error: ErrorView | null; chains: string[]; sets: string[] }> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 20_000 });
  const c = new NftClient({ family: 'ip', table, transport: conn, destroy: mode });
  return (async () => {
    try {
      const setup = c.newTransaction();
      setup.add({ kind: 'table' });
      setup.add({ kind: 'chain', name: 'keep' });
      setup.add({ kind: 'chain', name: 'present' });
      setup.add({ kind: 'set', name: 'present-set', key: ['ipv4_addr'] });
      setup.add({ kind: 'element', set: 'present-set', key: ['10.0.0.1'] });
      await c.run(setup);
      const tx = c.newTransaction();
      tx.destroy({ kind: 'chain', name: 'present' });
      tx.destroy({ kind: 'chain', name: 'absent' });
      tx.destroy({ kind: 'element', set: 'present-set', key: ['10.0.0.1'] });
      tx.destroy({ kind: 'element', set: 'present-set', key: ['10.0.0.2'] });
      tx.destroy({ kind: 'set', name: 'absent-set', key: ['mark'] });
      await c.run(tx);
      return { error: null, chains: (await c.list('chain')).sort(), sets: await c.list('set') };
    } catch (e) {
      return { error: view(e), chains: [], sets: [] };
    } finally {
      conn.close();
    }
  })();
}

/**
 * An ip6 table with the IPv6 forms of the service dispatch: concat verdict map, numgen DNAT map, masquerade, reject.
 */
export function applyIp6(table: string): Promise<ErrorView | null> {
  return withClient('ip6', table, async (c) => {
    const tx = c.newTransaction();
    const r = (chain: string) => rule('ip6', chain);
    tx.add({ kind: 'table' });
    tx.add({ kind: 'chain', name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100 } });
    tx.add({ kind: 'chain', name: 'nat-postrouting', base: { type: 'nat', hook: 'postrouting', priority: 100 } });
    tx.add({
      kind: 'chain',
      name: 'filter-forward',
      base: { type: 'filter', hook: 'forward', priority: 0, policy: 'accept' },
    });
    for (const n of ['services', 'svc-a', 'masq']) tx.add({ kind: 'chain', name: n });
    tx.add({ kind: 'map', name: 'service-ips', key: ['ipv6_addr', 'inet_proto', 'inet_service'], data: 'verdict' });
    tx.add({ kind: 'set', name: 'no-endpoints', key: ['ipv6_addr', 'inet_proto', 'inet_service'] });
    tx.add({ kind: 'set', name: 'pod-cidrs', key: ['ipv6_addr'], flags: ['interval'] });
    tx.add({
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
    tx.add({
      kind: 'element',
      set: 'service-ips',
      key: ['fd00:10:96::1', 'tcp', 80],
      value: { verdict: 'goto', chain: 'svc-a' },
    });
    tx.add({ kind: 'element', set: 'no-endpoints', key: ['fd00:10:96::2', 'udp', 53] });
    tx.add({ kind: 'element', set: 'pod-cidrs', key: ['fd00:10:244::/48'] });
    tx.add({ kind: 'element', set: 'endpoints', key: [0], value: ['fd00:10:244::5', 8080] });
    tx.add({ kind: 'element', set: 'endpoints', key: [1], value: ['fd00:10:244::6', 8080] });
    tx.add(r('nat-prerouting').jump('services').build());
    tx.add(r('nat-postrouting').jump('masq').build());
    tx.add(r('services').vmap(['ip6 daddr', 'meta l4proto', 'th dport'], 'service-ips').build());
    tx.add(r('svc-a').inSet(['ip6 saddr'], 'pod-cidrs', true).setMarkOr(0x4000).build());
    tx.add(r('svc-a').match('meta l4proto', 'tcp').dnatNumgen(2, 0, 'endpoints').build());
    tx.add(r('masq').markAnd(0x4000, 0).return().build());
    tx.add(r('masq').clearMark(0x4000).masquerade().build());
    tx.add(
      r('filter-forward')
        .inSet(['ip6 daddr', 'meta l4proto', 'th dport'], 'no-endpoints')
        .reject('icmpv6 port-unreachable')
        .build(),
    );
    tx.add(
      r('filter-forward')
        .match('ip6 saddr', 'fd00:10:244::/48')
        .match('ip6 daddr', 'fd00:10:96::/112', 'neq')
        .fibDaddrLocal()
        .accept()
        .build(),
    );
    try {
      await c.run(tx);
      return null;
    } catch (e) {
      return view(e);
    }
  });
}
