// The iptables dialect encoder against the bytes iptables-nft-restore 1.8.9 sent for the same
// rules (test/fixtures/netlink/iptables/, see CAPTURE.md): every NEWRULE of rules-ipv4.txt,
// rules-ipv6.txt, rules-ipvs.txt, rules-nfacct.txt and rules-nth.txt, seq and pid masked. The
// expected bytes never come from us.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { IPFamily } from '../../../../../src/base/ip.ts';
import { iptNftRule, ruleExprs } from '../../../../../src/netlink/nftables/iptables/encode.ts';
import type { IptRule } from '../../../../../src/netlink/nftables/iptables/rule.ts';
import { IPVS_RULES, NFACCT_RULES, NTH_RULES, ruleset } from '../../../../fixtures/netlink/iptables/ruleset.ts';
import { hexdiff } from '../../../../helpers/hexdiff.ts';
import { MSG, captured, ourBytes } from './fixture.ts';

const ctx = { setIndex: (name: string): number => (name === 'S' || name === 'S6' ? 0 : -1) };

function sameRules(t: ExecutionContext, fixture: string, family: IPFamily, rules: readonly IptRule[]): void {
  const theirs = captured(fixture).filter((m) => m.type === MSG.NEWRULE);
  t.is(theirs.length, rules.length, `${fixture}: one NEWRULE per rule`);
  rules.forEach((r, i) => {
    const ours = ourBytes(family, r.table, iptNftRule(r, family, ctx));
    const same = Buffer.from(ours).equals(Buffer.from(theirs[i]!.bytes));
    t.true(
      same,
      `${fixture} rule ${i} (${r.table} ${r.chain} ${JSON.stringify(r.matches)} -> ${JSON.stringify(r.target)})\n${same ? '' : hexdiff(ours, theirs[i]!.bytes, ['ours', 'iptables-nft'])}`,
    );
  });
}

test('every rule kind, IPv4 (nat, filter, mangle): the bytes iptables-nft-restore sends', (t) => {
  sameRules(t, 'restore-ipv4', 'IPv4', ruleset('IPv4').rules);
});

test('every rule kind, IPv6 (nat, filter, mangle): the bytes ip6tables-nft-restore sends', (t) => {
  sameRules(t, 'restore-ipv6', 'IPv6', ruleset('IPv6').rules);
});

test('rules encoded long before they are sent keep their bytes (info structs and messages share slabs)', (t) => {
  const theirs = captured('restore-ipv4').filter((m) => m.type === MSG.NEWRULE);
  const rules = ruleset('IPv4').rules;
  const held = rules.map((r) => iptNftRule(r, 'IPv4', ctx));
  // Thousands of rules with comments of their own in between: new slabs, none reused.
  for (let i = 0; i < 3000; i++)
    ourBytes('IPv4', 'nat', iptNftRule({ ...rules[0]!, matches: [{ m: 'comment', text: `churn ${i}` }] }, 'IPv4', ctx));
  held.forEach((nft, i) => {
    const ours = ourBytes('IPv4', rules[i]!.table, nft);
    t.true(Buffer.from(ours).equals(Buffer.from(theirs[i]!.bytes)), `rule ${i}\n${hexdiff(ours, theirs[i]!.bytes)}`);
  });
});

test('-m ipvs: the bytes iptables-nft-restore sends', (t) => {
  sameRules(t, 'restore-ipvs', 'IPv4', IPVS_RULES);
});

test("-m nfacct (upstream's two counting rules): the bytes iptables-nft-restore sends", (t) => {
  sameRules(t, 'restore-nfacct', 'IPv4', NFACCT_RULES);
});

test('-m statistic --mode nth (round-robin picks): the bytes iptables-nft-restore sends', (t) => {
  sameRules(t, 'restore-nth', 'IPv4', NTH_RULES);
});

test('bad input is refused with an error naming it', (t) => {
  const r = (matches: IptRule['matches'], target: IptRule['target'] = { t: 'ACCEPT' }): IptRule => ({
    table: 'filter',
    chain: 'INPUT',
    matches,
    target,
  });
  t.throws(() => ruleExprs(r([{ m: 'src', cidr: 'fd00::/64' }]), 'IPv4', ctx), {
    message: /fd00::\/64 is not an IPv4 CIDR/,
  });
  t.throws(() => ruleExprs(r([{ m: 'dport', proto: 'tcp', port: 80 }]), 'IPv4', ctx), {
    message: /-m tcp needs -p tcp/,
  });
  t.throws(
    () =>
      ruleExprs(
        r([
          { m: 'proto', proto: 'tcp' },
          { m: 'dport', proto: 'tcp', port: 0 },
        ]),
        'IPv4',
        ctx,
      ),
    { message: /port 0/ },
  );
  t.throws(() => ruleExprs(r([{ m: 'statistic', probability: '1.5' }]), 'IPv4', ctx), { message: /probability/ });
  t.throws(() => ruleExprs(r([{ m: 'statisticNth', every: 0, packet: 0 }]), 'IPv4', ctx), { message: /--every 0/ });
  t.throws(() => ruleExprs(r([{ m: 'statisticNth', every: 3, packet: 3 }]), 'IPv4', ctx), { message: /--packet 3/ });
  t.throws(() => ruleExprs(r([{ m: 'comment', text: 'x'.repeat(256) }]), 'IPv4', ctx), {
    message: /comment longer than 255/,
  });
  t.throws(() => ruleExprs(r([], { t: 'DNAT', addr: '10.0.0.1', port: 80 }), 'IPv6', ctx), {
    message: /not an IPv6 address/,
  });
  t.throws(() => ruleExprs(r([{ m: 'inIface', name: 'a-very-long-interface' }]), 'IPv4', ctx), {
    message: /interface name/,
  });
});
