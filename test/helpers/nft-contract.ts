// The contract FakeNft must honour: the same steps run against FakeNft (unit test) and
// against the kernel through NftClient (kernel test), and both must give the same outcome
// (ok or errno name) and the same state after every step.

import type { NftInterface, NftTransaction } from '../../src/netlink/nftables/index.ts';
import { rule } from '../../src/netlink/nftables/index.ts';

export interface Step {
  name: string;
  build(tx: NftTransaction, rules: { chain: string; handle: bigint }[]): void;
}

const F = 'ip' as const;

export const STEPS: Step[] = [
  {
    name: 'create everything',
    build(tx) {
      tx.add({ kind: 'table' });
      tx.add({ kind: 'chain', name: 'pre', base: { type: 'nat', hook: 'prerouting', priority: -100 } });
      for (const c of ['services', 'svc-a', 'svc-b']) tx.add({ kind: 'chain', name: c });
      tx.add({ kind: 'map', name: 'vips', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' });
      tx.add({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'], flags: ['interval'] });
      tx.add({
        kind: 'element',
        set: 'vips',
        key: ['10.96.0.1', 'tcp', 80],
        value: { verdict: 'goto', chain: 'svc-a' },
      });
      tx.add({ kind: 'element', set: 'cidrs', key: ['10.0.0.0/8'] });
      tx.add(rule(F, 'pre').jump('services').build());
      tx.add(rule(F, 'services').vmap(['ip daddr', 'meta l4proto', 'th dport'], 'vips').build());
      tx.add(rule(F, 'svc-b').inSet(['ip saddr'], 'cidrs').accept().build());
    },
  },
  { name: 'create an existing chain', build: (tx) => tx.create({ kind: 'chain', name: 'services' }) },
  { name: 'add an existing chain', build: (tx) => tx.add({ kind: 'chain', name: 'services' }) },
  { name: 'delete a chain a map element points at', build: (tx) => tx.delete({ kind: 'chain', name: 'svc-a' }) },
  { name: 'delete a chain a rule jumps to', build: (tx) => tx.delete({ kind: 'chain', name: 'services' }) },
  { name: 'add a rule jumping to a missing chain', build: (tx) => tx.add(rule(F, 'services').jump('missing').build()) },
  { name: 'add a rule to a missing chain', build: (tx) => tx.add(rule(F, 'nowhere').accept().build()) },
  {
    name: 'add a rule looking up a missing set',
    build: (tx) => tx.add(rule(F, 'services').inSet(['ip saddr'], 'nope').accept().build()),
  },
  {
    name: 'add an existing element with other data',
    build: (tx) =>
      tx.add({
        kind: 'element',
        set: 'vips',
        key: ['10.96.0.1', 'tcp', 80],
        value: { verdict: 'goto', chain: 'svc-b' },
      }),
  },
  {
    name: 'add an existing element with the same data',
    build: (tx) =>
      tx.add({
        kind: 'element',
        set: 'vips',
        key: ['10.96.0.1', 'tcp', 80],
        value: { verdict: 'goto', chain: 'svc-a' },
      }),
  },
  {
    name: 'create an existing element',
    build: (tx) =>
      tx.create({
        kind: 'element',
        set: 'vips',
        key: ['10.96.0.1', 'tcp', 80],
        value: { verdict: 'goto', chain: 'svc-a' },
      }),
  },
  {
    name: 'delete a missing element',
    build: (tx) => tx.delete({ kind: 'element', set: 'vips', key: ['10.96.0.9', 'tcp', 80] }),
  },
  {
    name: 'destroy a missing element',
    build: (tx) => tx.destroy({ kind: 'element', set: 'vips', key: ['10.96.0.9', 'tcp', 80] }),
  },
  { name: 'destroy a missing chain', build: (tx) => tx.destroy({ kind: 'chain', name: 'ghost' }) },
  { name: 'delete a missing set', build: (tx) => tx.delete({ kind: 'set', name: 'ghost', key: ['mark'] }) },
  { name: 'delete a set a rule uses', build: (tx) => tx.delete({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'] }) },
  {
    name: 'delete a rule by a missing handle',
    build: (tx) => tx.delete({ kind: 'rule', chain: 'services', exprs: [], handle: 9999n }),
  },
  {
    name: 'a good step then a bad one: nothing happens',
    build(tx) {
      tx.add({ kind: 'chain', name: 'svc-c' });
      tx.add({
        kind: 'element',
        set: 'vips',
        key: ['10.96.0.3', 'udp', 53],
        value: { verdict: 'goto', chain: 'svc-c' },
      });
      tx.delete({ kind: 'chain', name: 'ghost' });
    },
  },
  {
    name: 'unhook then delete in one transaction',
    build(tx) {
      tx.flush({ kind: 'map', name: 'vips', key: ['ipv4_addr'], data: 'verdict' });
      tx.delete({ kind: 'chain', name: 'svc-a' });
      tx.flush({ kind: 'chain', name: 'svc-b' });
      tx.delete({ kind: 'set', name: 'cidrs', key: ['ipv4_addr'] });
    },
  },
  {
    name: 'delete rules by listed handles',
    build(tx, rules) {
      for (const r of rules.filter((x) => x.chain === 'services'))
        tx.delete({ kind: 'rule', chain: r.chain, exprs: [], handle: r.handle });
    },
  },
  { name: 'delete the table', build: (tx) => tx.delete({ kind: 'table' }) },
  { name: 'delete the missing table', build: (tx) => tx.delete({ kind: 'table' }) },
  { name: 'destroy the missing table', build: (tx) => tx.destroy({ kind: 'table' }) },
];

export interface Snapshot {
  chains: string[];
  sets: string[];
  elements: Record<string, string[]>;
  rules: Record<string, number>;
}

export async function snapshot(n: NftInterface): Promise<Snapshot> {
  const chains = (await n.list('chain')).sort();
  let sets: string[];
  try {
    sets = [...(await n.list('set')), ...(await n.list('map'))].sort();
  } catch (e) {
    // Listing sets of a missing table is ENOENT (kernel and fake alike); chains list empty.
    if ((e as { code?: string }).code !== 'ENOENT') throw e;
    return { chains, sets: [], elements: {}, rules: {} };
  }
  const elements: Record<string, string[]> = {};
  for (const s of sets)
    elements[s] = (await n.listElements(s)).map((e) => JSON.stringify([e.key.map(String), e.value ?? null])).sort();
  const rules: Record<string, number> = {};
  for (const c of chains) rules[c] = (await n.listRules(c)).length;
  return { chains, sets, elements, rules };
}

/** Runs every step; returns, per step, the outcome and the state after it. */
export async function runContract(n: NftInterface): Promise<{ step: string; outcome: string; state: Snapshot }[]> {
  const out: { step: string; outcome: string; state: Snapshot }[] = [];
  for (const s of STEPS) {
    let listed: { chain: string; handle: bigint }[] = [];
    try {
      listed = (await n.listRules()).map((r) => ({ chain: r.chain, handle: r.handle ?? 0n }));
    } catch {
      listed = [];
    }
    const tx = n.newTransaction();
    s.build(tx, listed);
    let outcome = 'ok';
    try {
      await n.run(tx);
    } catch (e) {
      outcome = (e as { code?: string }).code ?? (e as Error).name;
    }
    out.push({ step: s.name, outcome, state: await snapshot(n) });
  }
  return out;
}
