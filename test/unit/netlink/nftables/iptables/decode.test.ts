// decode.ts reads back what iptables-nft itself wrote (the NEWRULE messages of the captures,
// test/fixtures/netlink/iptables/) as the IptRules of the fixture's rule set, reads our own
// encoding back the same (round trip), and gives undefined for rules that are not of our kinds.
import test from 'ava';
import type { IPFamily } from '../../../../../src/base/ip.ts';
import { parseMessages } from '../../../../../src/netlink/core/index.ts';
import type { NftExpr, NftRule } from '../../../../../src/netlink/nftables/index.ts';
import { decodeRule } from '../../../../../src/netlink/nftables/rule.ts';
import { decodeIptRule, jumpTarget, ruleComment } from '../../../../../src/netlink/nftables/iptables/decode.ts';
import { iptNftRule } from '../../../../../src/netlink/nftables/iptables/encode.ts';
import type { IptRule } from '../../../../../src/netlink/nftables/iptables/rule.ts';
import { IPVS_RULES, NFACCT_RULES, NTH_RULES, ruleset } from '../../../../fixtures/netlink/iptables/ruleset.ts';
import { MSG, captured } from './fixture.ts';

const enc = { setIndex: (): number => 0 };
const dec = (family: IPFamily) => ({
  setName: (i: number): string | undefined => (i === 0 ? (family === 'IPv4' ? 'S' : 'S6') : undefined),
});

for (const [family, fixture] of [
  ['IPv4', 'restore-ipv4'],
  ['IPv6', 'restore-ipv6'],
] as [IPFamily, string][]) {
  test(`the rules iptables-nft wrote decode to the fixture's IptRules, ${family}`, (t) => {
    const rules = ruleset(family).rules;
    const msgs = captured(fixture).filter((m) => m.type === MSG.NEWRULE);
    t.is(msgs.length, rules.length);
    msgs.forEach((m, i) => {
      const listed = decodeRule(parseMessages(m.bytes)[0]!).rule;
      t.deepEqual(decodeIptRule(listed, rules[i]!.table, family, dec(family)), rules[i], `rule ${i}`);
    });
  });

  test(`our encoding decodes back to the same IptRule (round trip), ${family}`, (t) => {
    for (const r of ruleset(family).rules)
      t.deepEqual(decodeIptRule(iptNftRule(r, family, enc), r.table, family, dec(family)), r);
  });
}

test('the ipvs match round-trips', (t) => {
  for (const r of IPVS_RULES) t.deepEqual(decodeIptRule(iptNftRule(r, 'IPv4', enc), r.table, 'IPv4'), r);
});

test('the nfacct rules iptables-nft wrote decode to their IptRules', (t) => {
  const msgs = captured('restore-nfacct').filter((m) => m.type === MSG.NEWRULE);
  t.is(msgs.length, NFACCT_RULES.length);
  msgs.forEach((m, i) => {
    const listed = decodeRule(parseMessages(m.bytes)[0]!).rule;
    t.deepEqual(decodeIptRule(listed, NFACCT_RULES[i]!.table, 'IPv4'), NFACCT_RULES[i], `rule ${i}`);
  });
});

test('the nth-mode statistic rules iptables-nft wrote decode to their IptRules, and ours round-trip', (t) => {
  const msgs = captured('restore-nth').filter((m) => m.type === MSG.NEWRULE);
  t.is(msgs.length, NTH_RULES.length);
  msgs.forEach((m, i) => {
    const listed = decodeRule(parseMessages(m.bytes)[0]!).rule;
    t.deepEqual(decodeIptRule(listed, 'nat', 'IPv4'), NTH_RULES[i], `rule ${i}`);
  });
  for (const r of NTH_RULES) t.deepEqual(decodeIptRule(iptNftRule(r, 'IPv4', enc), r.table, 'IPv4'), r);
});

test('jumpTarget and ruleComment read a rule without decoding it all', (t) => {
  const r = iptNftRule(ruleset('IPv4').rules[0]!, 'IPv4', enc);
  t.is(jumpTarget(r), 'KUBE-SERVICES');
  t.is(ruleComment(r), 'kubernetes service portals');
  t.is(ruleComment({ kind: 'rule', chain: 'X', exprs: [] }), undefined);
});

test("other software's rules decode to undefined, never throw", (t) => {
  const rule = (exprs: NftExpr[]): NftRule => ({ kind: 'rule', chain: 'FORWARD', exprs });
  const accept: NftExpr = { type: 'immediate', verdict: { verdict: 'accept' } };
  const foreign: NftExpr[][] = [
    [], // no verdict
    [
      { type: 'ct', key: 'state', dreg: 1 },
      { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: Uint8Array.of(6, 0, 0, 0), xor: new Uint8Array(4) },
      { type: 'cmp', sreg: 1, op: 'neq', data: new Uint8Array(4) },
      accept,
    ],
    [{ type: 'xtmatch', name: 'limit', rev: 0, info: new Uint8Array(32) }, { type: 'counter' }, accept],
    [
      { type: 'xtmatch', name: 'comment', rev: 0, info: new Uint8Array(256) },
      { type: 'counter' },
      { type: 'xttarget', name: 'LOG', rev: 0, info: new Uint8Array(40) },
    ],
    [{ type: 'xtmatch', name: 'conntrack', rev: 3, info: new Uint8Array(3) }, accept], // truncated struct
    [{ type: 'xtmatch', name: 'set', rev: 4, info: new Uint8Array(48) }, accept], // unknown set index
    [
      { type: 'payload', base: 'network', offset: 9, len: 1, dreg: 1 },
      { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(6) },
      accept,
    ],
    [{ type: 'counter' }, accept, accept],
    [
      { type: 'meta', key: 'iifname', dreg: 1 },
      { type: 'cmp', sreg: 1, op: 'lt', data: Uint8Array.of(0x65, 0) },
      accept,
    ],
    [{ type: 'xttarget', name: 'DNAT', rev: 2, info: new Uint8Array(48) }],
  ];
  for (const exprs of foreign)
    t.is(
      decodeIptRule(rule(exprs), 'filter', 'IPv4', dec('IPv4')),
      undefined,
      JSON.stringify(exprs, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
    );
});

test('forms the fixtures do not hold round-trip too: -i +, a full mark mask, /0, IPv6 REDIRECT and REJECT', (t) => {
  const rules: [IPFamily, IptRule][] = [
    ['IPv4', { table: 'filter', chain: 'INPUT', matches: [{ m: 'inIface', name: '+' }], target: { t: 'ACCEPT' } }],
    [
      'IPv4',
      {
        table: 'filter',
        chain: 'INPUT',
        matches: [{ m: 'mark', value: 7, mask: 0xffffffff, invert: true }],
        target: { t: 'DROP' },
      },
    ],
    [
      'IPv6',
      {
        table: 'nat',
        chain: 'OUTPUT',
        matches: [
          { m: 'proto', proto: 'tcp' },
          { m: 'dport', proto: 'tcp', port: 80 },
        ],
        target: { t: 'REDIRECT', port: 8080 },
      },
    ],
    [
      'IPv6',
      {
        table: 'filter',
        chain: 'X',
        matches: [{ m: 'ctstate', states: ['INVALID', 'NEW', 'RELATED', 'ESTABLISHED', 'DNAT'] }],
        target: { t: 'REJECT' },
      },
    ],
  ];
  for (const [family, r] of rules) t.deepEqual(decodeIptRule(iptNftRule(r, family, enc), r.table, family), r);
  const all: IptRule = {
    table: 'filter',
    chain: 'INPUT',
    matches: [{ m: 'src', cidr: '0.0.0.0/0' }],
    target: { t: 'ACCEPT' },
  };
  t.deepEqual(
    decodeIptRule(iptNftRule(all, 'IPv4', enc), 'filter', 'IPv4'),
    { ...all, matches: [] },
    'iptables drops a /0 match',
  );
});
