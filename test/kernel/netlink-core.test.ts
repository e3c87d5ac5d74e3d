// The netlink core against the machine's real nf_tables, each test in a fresh namespace.
// `nft -j list ruleset` reads the result back independently of our decoder.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { NftJsonObject } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/core-nft.ts';

const S = new URL('./scenarios/core-nft.ts', import.meta.url).href;
type ErrorView = Scenario.ErrorView;

const chainsOf = (objs: NftJsonObject[]): string[] =>
  objs
    .filter((o) => o.chain)
    .map((o) => `${String(o.chain!.table)}/${String(o.chain!.name)}`)
    .sort();
const tablesOf = (objs: NftJsonObject[]): string[] =>
  objs
    .filter((o) => o.table)
    .map((o) => String(o.table!.name))
    .sort();

test('a batch creates a table and a chain; a dump through the core lists them; deletes remove them', async (t) => {
  const ns = await netnsFor(t, 'core-crud');
  const a = await ns.agent();
  t.is(await a.call(S, 'createTableAndChain', 'kpts', 'services'), null);
  t.deepEqual(chainsOf(await ns.nftJson()), ['kpts/services']);
  t.deepEqual(await a.call(S, 'dumpNames'), { tables: ['kpts'], chains: ['kpts/services'] });
  t.is(await a.call(S, 'deleteChain', 'kpts', 'services'), null);
  t.deepEqual(chainsOf(await ns.nftJson()), []);
  t.is(await a.call(S, 'deleteTable', 'kpts'), null);
  t.deepEqual(await ns.nftJson(), []);
});

test('EEXIST, ENOENT and EINVAL come back as typed errors naming the operation', async (t) => {
  const ns = await netnsFor(t, 'core-errors');
  const a = await ns.agent();
  t.is(await a.call(S, 'createTableAndChain', 'kpts', 'services'), null);

  const exists = await a.call<ErrorView>(S, 'createTableExclusive', 'kpts');
  t.like(exists, { name: 'NetlinkError', code: 'EEXIST', op: 'add table ip kpts' });

  const missing = await a.call<ErrorView>(S, 'getMissingTable', 'nope');
  t.like(missing, { name: 'NetlinkError', code: 'ENOENT', op: 'get table ip nope' });
  const missingChain = await a.call<ErrorView>(S, 'deleteChain', 'kpts', 'nochain');
  t.like(missingChain, { code: 'ENOENT', op: 'delete chain ip kpts nochain' });

  const invalid = await a.call<ErrorView>(S, 'addNamelessChain', 'kpts');
  t.like(invalid, { code: 'EINVAL', op: 'add chain ip kpts (no name)' });
  t.regex(invalid.message, /^add chain ip kpts \(no name\): EINVAL/);
});

test('a batch whose third message is invalid leaves nothing behind and names that message', async (t) => {
  const ns = await netnsFor(t, 'core-atomic');
  const a = await ns.agent();
  const { error } = await a.call<{ error: ErrorView | null; ms: number }>(S, 'batchWithInvalidThird', 'kpts');
  t.truthy(error);
  t.is(error!.op, 'add chain ip kpts three (hook 99)');
  t.is(error!.code, 'ENOTSUP');
  const after = await ns.nftJson();
  t.deepEqual(tablesOf(after), [], 'the table from message 1 was rolled back');
  t.deepEqual(chainsOf(after), []);
});

test('concurrent requests on one connection each get their own answer', async (t) => {
  const ns = await netnsFor(t, 'core-concurrent');
  const a = await ns.agent();
  t.is(await a.call(S, 'createTableAndChain', 'kpts', 'services'), null);
  const names = Array.from({ length: 40 }, (_, i) => (i % 3 === 1 ? `missing${i}` : 'kpts'));
  const results = await a.call<(string | ErrorView)[]>(S, 'concurrentGets', names);
  results.forEach((r, i) => {
    if (i % 3 === 1) t.like(r as ErrorView, { code: 'ENOENT', op: `get table ip missing${i}` });
    else t.is(r, 'kpts');
  });
});

test('a dump spanning many datagrams returns every object', async (t) => {
  const ns = await netnsFor(t, 'core-bigdump');
  const a = await ns.agent();
  t.is(await a.call(S, 'manyChains', 'kpts', 3000), null);
  const { chains } = await a.call<{ chains: string[] }>(S, 'dumpNames');
  t.is(chains.length, 3000);
  t.is(chainsOf(await ns.nftJson()).length, 3000);
});
