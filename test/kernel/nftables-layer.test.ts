// The nf_tables layer against the machine's kernel, each test in fresh namespaces.
// `nft` (called by absolute path) is the independent reader: it must print what we wrote,
// and its printout, loaded by `nft -f` into another fresh namespace, must give back the
// same ruleset, down to the expression lists our decoder reads. The print-and-reload checks
// run with every binary of nft-binaries.ts: Debian 12's nft and a newer one.
import test from 'ava';
import { normaliseNftJson } from '../helpers/nft-json.ts';
import { netnsFor } from '../helpers/netns.ts';
import { loadFresh, NFT_BINARIES, printRuleset, roundTrip } from './nft-binaries.ts';
import type * as Scenario from './scenarios/nftables.ts';

const S = new URL('./scenarios/nftables.ts', import.meta.url).href;
type ErrorView = Scenario.ErrorView;
type Readback = Scenario.Readback;

const normalise = normaliseNftJson;

const sortRules = (rb: Readback): Readback => ({
  ...rb,
  rules: [...rb.rules].sort((a, b) => a.chain.localeCompare(b.chain)),
});

test('a table using every object and expression kind: nft prints it, reloads it, and our dumps agree', async (t) => {
  const a = await netnsFor(t, 'nft-full-a');
  const agent = await a.agent();
  const { error, text } = await agent.call<{ error: ErrorView | null; text: string }>(S, 'applyFull', 'kpts');
  t.is(error, null, text);
  const ours = await agent.call<Readback>(S, 'readBack', 'ip', 'kpts');
  t.true(ours.generation > 0);

  for (const [i, nft] of NFT_BINARIES.entries()) {
    // nft prints it, as text and as JSON, without complaint, and each printout loads into a
    // fresh namespace and yields the same ruleset.
    const { printout, fromText: b } = await roundTrip(t, nft, a, `nft-full-${i}`);
    t.true(
      printout.json.some((o) => o.map?.name === 'service-ips'),
      nft.name,
    );

    // Our decoder reads back what we wrote, and what nft wrote from the printout is the same bytecode.
    const theirs = await (await b.agent()).call<Readback>(S, 'readBack', 'ip', 'kpts');
    t.deepEqual(sortRules({ ...ours, generation: 0 }).rules, sortRules({ ...theirs, generation: 0 }).rules, nft.name);
    t.deepEqual(ours.chains, theirs.chains, nft.name);
    t.deepEqual(ours.elements, theirs.elements, nft.name);
    t.deepEqual(
      ours.sets.map((s) => ({ ...s, handle: 0n })),
      theirs.sets.map((s) => ({ ...s, handle: 0n })),
      nft.name,
    );
  }
  const jsonA = await a.nftJson();

  // And the dumps agree with nft -j on names and element counts.
  const chainNames = jsonA
    .filter((o) => o.chain)
    .map((o) => String(o.chain!.name))
    .sort();
  t.deepEqual(ours.chains, chainNames);
  const jsonSet = (name: string) => jsonA.find((o) => (o.set ?? o.map)?.name === name);
  t.is((jsonSet('cluster-ips')?.set?.elem as unknown[]).length, ours.elements['cluster-ips']!.length);
  t.deepEqual(ours.elements['cidrs']!.map((e) => e.key[0]).sort(), [
    '10.0.0.0/8',
    '172.16.0.1-172.16.0.9',
    '192.168.1.0/24',
    '255.255.255.0/24',
  ]);
});

test('what we decode equals what we encoded', async (t) => {
  const a = await netnsFor(t, 'nft-decode');
  const agent = await a.agent();
  const { error } = await agent.call<{ error: ErrorView | null }>(S, 'applyFull', 'kpts');
  t.is(error, null);
  const back = await agent.call<Readback>(S, 'readBack', 'ip', 'kpts');
  const { rulesFor, SETS, ELEMENTS } = await import('./scenarios/nftables.ts');
  const { kernelForm } = await import('../../src/netlink/nftables/index.ts');
  const sent = rulesFor().map((r) => ({
    chain: r.chain,
    exprs: r.exprs.map(kernelForm),
    ...(r.comment !== undefined ? { comment: r.comment } : {}),
  }));
  const byChain = (rs: { chain: string }[]) => [...rs].sort((x, y) => x.chain.localeCompare(y.chain));
  t.deepEqual(byChain(back.rules), byChain(sent));
  for (const s of SETS) {
    const got = back.sets.find((x) => x.name === s.name);
    t.truthy(got, s.name);
    const { handle: _h, size, ...rest } = got!;
    if (s.size !== undefined) t.is(size, s.size);
    t.deepEqual(
      { ...rest, flags: [...(rest.flags ?? [])].sort() },
      { ...s, flags: [...(s.flags ?? [])].sort() },
      s.name,
    );
  }
  for (const s of SETS) {
    if ((s.flags ?? []).includes('dynamic')) continue;
    const want = ELEMENTS.filter((e) => e.set === s.name)
      .map((e) => JSON.stringify(e.key.map(String)))
      .sort();
    const got = back.elements[s.name]!.map((e) => JSON.stringify(e.key.map(String))).sort();
    t.deepEqual(got, want, s.name);
  }
  const dnat = back.elements['dnat-targets']![0]!;
  t.deepEqual(dnat.value, ['10.1.0.1', 8080]);
  t.deepEqual(back.elements['service-ips']!.find((e) => e.key[0] === '10.96.0.1')!.value, {
    verdict: 'goto',
    chain: 'svc-a',
  });
  t.is(back.elements['cluster-ips']!.find((e) => e.key[0] === '10.96.0.10')!.comment, 'dns');
});

test('a failing transaction names the operation and leaves the previous ruleset intact', async (t) => {
  const a = await netnsFor(t, 'nft-atomic');
  const agent = await a.agent();
  t.is((await agent.call<{ error: ErrorView | null }>(S, 'applyFull', 'kpts')).error, null);
  const before = normalise(await a.nftJson());
  const err = await agent.call<ErrorView | null>(S, 'failingTransaction', 'kpts');
  t.truthy(err);
  t.is(err!.code, 'ENOENT');
  t.is(err!.op, 'add rule ip kpts services');
  t.deepEqual(normalise(await a.nftJson()), before);
});

test('tens of thousands of elements go in one transaction, many per message', async (t) => {
  const a = await netnsFor(t, 'nft-bulk');
  const agent = await a.agent();
  const n = 20_000;
  const r = await agent.call<{ error: ErrorView | null; messages: number; listed: number }>(
    S,
    'bulkElements',
    'kpts',
    n,
  );
  t.is(r.error, null);
  t.is(r.listed, n);
  t.true(r.messages < 40, `${r.messages} messages for ${n} elements`);
  const json = await a.nftJson();
  t.is((json.find((o) => o.map?.name === 'big')!.map!.elem as unknown[]).length, n);
});

test('an inet table with ip/ip6 matches, icmpx reject and an ipv6 interval set prints and reloads', async (t) => {
  const a = await netnsFor(t, 'nft-inet-a');
  const agent = await a.agent();
  t.is(await agent.call(S, 'applyInet', 'kpts6'), null);
  const ours = await agent.call<Readback>(S, 'readBack', 'inet', 'kpts6');
  t.deepEqual(ours.elements['cidrs6']!.map((e) => e.key[0]).sort(), ['2001:db8::1', 'fd00::/64']);
  for (const [i, nft] of NFT_BINARIES.entries()) {
    const { printout, fromText: b } = await roundTrip(t, nft, a, `nft-inet-${i}`);
    t.regex(printout.text, /fd00::\/64/, nft.name);
    t.regex(printout.text, /th dport 9 reject/, nft.name);
    const theirs = await (await b.agent()).call<Readback>(S, 'readBack', 'inet', 'kpts6');
    t.deepEqual(sortRules(ours).rules, sortRules(theirs).rules, nft.name);
  }
});

test('rules listed with their handles can be deleted by handle', async (t) => {
  const a = await netnsFor(t, 'nft-handles');
  const agent = await a.agent();
  t.is((await agent.call<{ error: ErrorView | null }>(S, 'applyFull', 'kpts')).error, null);
  const r = await agent.call<{ error: ErrorView | null; rulesLeft: number }>(S, 'deleteByHandle', 'kpts');
  t.is(r.error, null);
  t.is(r.rulesLeft, 0);
});

test("a transaction's toString() is nft input that builds the same ruleset", async (t) => {
  const a = await netnsFor(t, 'nft-text-a');
  const agent = await a.agent();
  const { error, text } = await agent.call<{ error: ErrorView | null; text: string }>(S, 'applyFull', 'kpts');
  t.is(error, null);
  for (const [i, nft] of NFT_BINARIES.entries()) {
    const b = await loadFresh(t, nft, text, `nft-text-${i}`);
    t.deepEqual(
      normalise((await printRuleset(t, nft, b)).json),
      normalise((await printRuleset(t, nft, a)).json),
      nft.name,
    );
  }
});

for (const mode of ['native', 'emulate'] as const) {
  test(`destroy (${mode}) removes what exists and ignores what does not`, async (t) => {
    const a = await netnsFor(t, `nft-destroy-${mode}`);
    const agent = await a.agent();
    const r = await agent.call<{ error: ErrorView | null; chains: string[]; sets: string[] }>(
      S,
      'destroyBoth',
      'kpts',
      mode,
    );
    t.is(r.error, null);
    t.deepEqual(r.chains, ['keep']);
    t.deepEqual(r.sets, ['present-set']);
    const json = await a.nftJson();
    t.deepEqual(json.find((o) => o.set?.name === 'present-set')!.set!.elem, undefined);
  });
}

test('an ip6 table (concat verdict map, numgen DNAT map, prefixes, reject) prints, reloads and decodes the same', async (t) => {
  const a = await netnsFor(t, 'nft-ip6-a');
  const agent = await a.agent();
  t.is(await agent.call(S, 'applyIp6', 'kpts'), null);
  const ours = await agent.call<Readback>(S, 'readBack', 'ip6', 'kpts');
  t.deepEqual(
    ours.elements['endpoints']!.map((e) => e.value),
    [
      ['fd00:10:244::5', 8080],
      ['fd00:10:244::6', 8080],
    ],
  );
  for (const [i, nft] of NFT_BINARIES.entries()) {
    const { printout, fromText: b } = await roundTrip(t, nft, a, `nft-ip6-${i}`);
    t.regex(printout.text, /dnat ip6 to numgen random mod 2 map @endpoints/, nft.name);
    t.regex(printout.text, /typeof numgen random mod 2 : ip6 daddr \. tcp dport/, nft.name);
    const theirs = await (await b.agent()).call<Readback>(S, 'readBack', 'ip6', 'kpts');
    t.deepEqual(sortRules(ours).rules, sortRules(theirs).rules, nft.name);
    t.deepEqual(ours.elements, theirs.elements, nft.name);
  }
});
