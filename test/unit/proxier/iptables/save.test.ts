// The iptables-save renderer's details, each checked against what iptables-nft-save 1.8.9
// printed for the same rule (test/kernel/iptables-save-render.test.ts compares whole rulesets).
import test from 'ava';
import type { IptRule } from '../../../../src/netlink/nftables/iptables/rule.ts';
import {
  formatThreshold,
  ruleLine,
  saveString,
  statisticThreshold,
  tableToSave,
} from '../../../../src/netlink/nftables/iptables/save.ts';
import { assembleRuleset, probability } from '../../../../src/proxier/iptables/index.ts';
import { NFACCT_RULES, NFACCT_SAVED, NTH_RULES, NTH_SAVED } from '../../../fixtures/netlink/iptables/ruleset.ts';

test('comments: bare when only letters, digits, _ and -; otherwise quoted with \\ before " \\ \'', (t) => {
  t.is(saveString('ns1_svc1'), 'ns1_svc1');
  t.is(saveString('a.b'), '"a.b"');
  t.is(saveString('ns1/svc1:p80'), '"ns1/svc1:p80"');
  t.is(saveString(''), '""');
  t.is(saveString('q"uo\'te\\x'), '"q\\"uo\\\'te\\\\x"');
});

test('-m nfacct: --nfacct-name and two spaces, as iptables-nft-save printed rules-nfacct.txt', (t) => {
  t.deepEqual(
    NFACCT_RULES.map((r) => ruleLine(r)),
    NFACCT_SAVED,
  );
});

test('-m statistic --mode nth: --every and --packet, as iptables-nft-save printed rules-nth.txt', (t) => {
  t.deepEqual(
    NTH_RULES.map((r) => ruleLine(r)),
    NTH_SAVED,
  );
});

test('statistic: the kernel’s 31-bit threshold printed with 11 decimals, as iptables-save shows it', (t) => {
  t.is(formatThreshold(statisticThreshold('0.3333333333')), '0.33333333349');
  t.is(formatThreshold(statisticThreshold('0.5000000000')), '0.50000000000');
  t.is(formatThreshold(statisticThreshold('0.2500000000')), '0.25000000000');
  t.is(formatThreshold(statisticThreshold('1')), '1.00000000000');
  t.throws(() => statisticThreshold('1.5'), { message: /not in 0\.\.1/ });
});

test('probability(n) is upstream’s %0.10f of 1/n, ties rounded to even as Go does', (t) => {
  t.is(probability(2), '0.5000000000');
  t.is(probability(3), '0.3333333333');
  t.is(probability(7), '0.1428571429');
  t.is(probability(1000), '0.0010000000');
  // 1/2048 = 0.00048828125 exactly: Go prints ...812 (even), toFixed would print ...813.
  t.is(probability(2048), '0.0004882812');
  t.is(probability(4096), '0.0002441406');
  t.throws(() => probability(0), { message: /positive endpoint count/ });
});

test('a rule: -s -d -i -o -p first in that order, whatever the rule’s order; then matches in order', (t) => {
  const r: IptRule = {
    table: 'nat',
    chain: 'X',
    matches: [
      { m: 'comment', text: 'c' },
      { m: 'proto', proto: 'udp' },
      { m: 'outIface', name: 'eth0' },
      { m: 'inIface', name: 'veth+', invert: true },
      { m: 'dst', cidr: '10.0.0.1' },
      { m: 'src', cidr: '10.0.0.0/8', invert: true },
      { m: 'mark', value: 0x4000, mask: 0xffffffff },
      { m: 'dport', proto: 'udp', port: 53 },
    ],
    target: { t: 'REDIRECT', port: 5353 },
  };
  t.is(
    ruleLine(r),
    '-A X ! -s 10.0.0.0/8 -d 10.0.0.1/32 ! -i veth+ -o eth0 -p udp -m comment --comment c -m mark --mark 0x4000 -m udp --dport 53 -j REDIRECT --to-ports 5353',
  );
  t.is(ruleLine({ table: 'nat', chain: 'Y', matches: [], target: { t: 'none' } }), '-A Y');
});

test('a table: built-ins with ACCEPT, our chains sorted by byte order, rules chain by chain', (t) => {
  const text = tableToSave(
    {
      table: 'nat',
      chains: [
        {
          name: 'KUBE-SERVICES',
          rules: [{ table: 'nat', chain: 'KUBE-SERVICES', matches: [], target: { t: 'RETURN' } }],
        },
        { name: 'KUBE-SEP-A', rules: [] },
        {
          name: 'OUTPUT',
          rules: [{ table: 'nat', chain: 'OUTPUT', matches: [], target: { t: 'jump', chain: 'KUBE-SERVICES' } }],
        },
      ],
    },
    'IPv4',
  );
  t.is(
    text,
    [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':INPUT ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':POSTROUTING ACCEPT [0:0]',
      ':KUBE-SEP-A - [0:0]',
      ':KUBE-SERVICES - [0:0]',
      '-A OUTPUT -j KUBE-SERVICES',
      '-A KUBE-SERVICES -j RETURN',
      'COMMIT',
      '',
    ].join('\n'),
  );
  t.throws(() => tableToSave({ table: 'filter', chains: [{ name: 'PREROUTING', rules: [] }] }, 'IPv4'), {
    message: /no built-in chain PREROUTING/,
  });
});

test('assembling refuses a chain declared twice and a rule for a chain that is not ours', (t) => {
  const global = {
    family: 'IPv4' as const,
    chains: [{ table: 'nat' as const, name: 'KUBE-SERVICES' }],
    jumps: [],
    rules: [],
    tail: [],
  };
  const f = {
    id: 'ns/a:p/TCP' as never,
    chains: [{ table: 'nat' as const, name: 'KUBE-SVC-A', rules: [] }],
    shared: [],
  };
  t.throws(() => assembleRuleset(global, [f, f]), { message: /KUBE-SVC-A is declared twice/ });
  const stray = {
    ...f,
    chains: [],
    shared: [{ table: 'nat' as const, chain: 'KUBE-NOPE', matches: [], target: { t: 'ACCEPT' as const } }],
  };
  t.throws(() => assembleRuleset(global, [stray]), { message: /KUBE-NOPE, which is not a chain of ours/ });
});
