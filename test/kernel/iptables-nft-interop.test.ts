// The iptables dialect against the real iptables-nft (Debian 12's 1.8.9), each step in its own
// fresh namespace: a rule set using every rule kind (nat, filter, mangle; IPv4 and IPv6; the
// fixture of test/fixtures/netlink/iptables/) written by our encoder over NftClient is printed by
// iptables-nft-save / ip6tables-nft-save without a warning and exactly as they print the same
// rules loaded by iptables-nft-restore from the text; that printout, loaded by
// iptables-nft-restore into a third namespace, gives back the same rule set; and decode.ts reads
// every rule we wrote back as the IptRule we wrote.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import type { IPFamily } from '../../src/base/ip.ts';
import { ruleset } from '../fixtures/netlink/iptables/ruleset.ts';
import { netnsFor } from '../helpers/netns.ts';
import type { Netns } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/iptables-nft.ts';

const S = new URL('./scenarios/iptables-nft.ts', import.meta.url).href;

const tools = (family: IPFamily) =>
  family === 'IPv4'
    ? { save: 'iptables-nft-save', restore: 'iptables-nft-restore', setFamily: 'inet', text: 'rules-ipv4.txt' }
    : { save: 'ip6tables-nft-save', restore: 'ip6tables-nft-restore', setFamily: 'inet6', text: 'rules-ipv6.txt' };

/** A fresh namespace holding the rule set's ipset (the set matches name it). */
async function prepared(t: ExecutionContext, family: IPFamily, label: string): Promise<Netns> {
  const ns = await netnsFor(t, label);
  await ns.run('ipset', 'create', ruleset(family).set, 'hash:ip,port,ip', 'family', tools(family).setFamily);
  return ns;
}

/** iptables-nft-save's printout without its dated `#` lines; fails the test on any warning. */
async function save(t: ExecutionContext, ns: Netns, family: IPFamily): Promise<string> {
  const r = await ns.exec(tools(family).save);
  t.is(r.code, 0, r.stderr);
  t.is(r.stderr.trim(), '', `${tools(family).save} printed no warning`);
  t.notRegex(r.stdout, /[Ww]arning|unsupported|\[unknown/);
  return r.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

async function restore(t: ExecutionContext, ns: Netns, family: IPFamily, text: string): Promise<void> {
  const r = await ns.exec(tools(family).restore, ['--noflush'], { input: text });
  t.is(r.code, 0, `${tools(family).restore}: ${r.stderr}`);
}

for (const family of ['IPv4', 'IPv6'] as IPFamily[]) {
  test(`every rule kind, ${family}: iptables-nft-save prints ours as it prints iptables-nft-restore's, and its printout reloads the same`, async (t) => {
    const fx = ruleset(family);
    const ours = await prepared(t, family, `xt-ours-${family}`);
    const messages = await (await ours.agent()).call<number>(S, 'writeRuleset', family);
    t.true(messages > fx.rules.length);
    const ourSave = await save(t, ours, family);
    t.is(ourSave.split('\n').filter((l) => l.startsWith('-A ')).length, fx.rules.length);

    const text = readFileSync(new URL(`../fixtures/netlink/iptables/${tools(family).text}`, import.meta.url), 'utf8');
    const theirs = await prepared(t, family, `xt-text-${family}`);
    await restore(t, theirs, family, text);
    t.is(ourSave, await save(t, theirs, family));

    const reloaded = await prepared(t, family, `xt-reload-${family}`);
    await restore(t, reloaded, family, ourSave);
    t.is(await save(t, reloaded, family), ourSave);

    // decode.ts reads each rule back (in the kernel's form) as the IptRule we wrote, chain by chain.
    const read = await (
      await ours.agent()
    ).call<Awaited<ReturnType<typeof Scenario.readRuleset>>>(S, 'readRuleset', family);
    const key = (r: { table: string; chain: string }): string => `${r.table} ${r.chain}`;
    const chains = [...new Set(fx.rules.map(key))];
    for (const c of chains)
      t.deepEqual(
        read.filter((r) => key(r) === c).map((r) => r.rule),
        fx.rules.filter((r) => key(r) === c),
        c,
      );
    t.is(read.length, fx.rules.length);
  });
}
