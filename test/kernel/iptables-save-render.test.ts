// save.ts against the real tools: the text we render for a ruleset, loaded with
// iptables-nft-restore into a fresh namespace, is printed back by iptables-nft-save exactly
// as we rendered it (so our text is what an operator will see), without a warning. Covers
// the generator's rulesets for IPv4 and IPv6 and a ruleset with every match and target of
// the rule model (the IPVS match aside: this kernel has no IPVS).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { IPFamily } from '../../src/base/ip.ts';
import type { IptRule, Match, Target } from '../../src/netlink/nftables/iptables/rule.ts';
import { rulesetToSave } from '../../src/netlink/nftables/iptables/save.ts';
import { NfacctCounter } from '../../src/proxier/iptables/index.ts';
import { netnsFor } from '../helpers/netns.ts';
import { cluster, ep, saveText, slice, svc } from '../unit/proxier/iptables/harness.ts';

async function roundTrip(
  t: ExecutionContext,
  family: IPFamily,
  text: string,
  setup?: (run: (cmd: string, ...args: string[]) => Promise<string>) => Promise<void>,
): Promise<string> {
  const ns = await netnsFor(t, 'iptsave');
  if (setup) await setup((cmd, ...args) => ns.run(cmd, ...args));
  const [restore, save] =
    family === 'IPv4' ? ['iptables-nft-restore', 'iptables-nft-save'] : ['ip6tables-nft-restore', 'ip6tables-nft-save'];
  const loaded = await ns.exec(restore, [], { input: text });
  t.is(loaded.code, 0, loaded.stderr);
  t.is(loaded.stderr, '');
  const printed = await ns.exec(save, []);
  t.is(printed.code, 0, printed.stderr);
  t.is(printed.stderr, '', 'iptables-nft-save prints every rule without a warning');
  return printed.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

const PORTS = [{ name: 'p80', protocol: 'TCP', port: 80 }];

/** The harness writes upstream's nfacct counting rules; xt_nfacct needs the objects to exist. */
const makeNfacctObjects = async (run: (cmd: string, ...args: string[]) => Promise<string>): Promise<void> => {
  for (const name of Object.values(NfacctCounter)) await run('nfacct', 'add', name);
};

function ipv4Cluster() {
  const c = cluster();
  const port = (nodePort?: number, protocol = 'TCP') => [
    { name: 'p80', protocol, port: 80, ...(nodePort ? { nodePort } : {}) },
  ];
  c.onService(undefined, svc('svc1', { ns: 'ns1', clusterIP: '172.30.0.41', ports: port() }));
  c.onService(
    undefined,
    svc('svc2', {
      ns: 'ns2',
      type: 'LoadBalancer',
      eTP: 'Local',
      clusterIP: '172.30.0.42',
      ports: port(3001),
      ingress: [{ ip: '1.2.3.4' }],
      externalIPs: ['192.168.99.22'],
      hcPort: 30000,
    }),
  );
  c.onService(
    undefined,
    svc('svc5', {
      ns: 'ns5',
      type: 'LoadBalancer',
      clusterIP: '172.30.0.45',
      ports: port(3002),
      ingress: [{ ip: '5.6.7.8' }],
      sourceRanges: ['203.0.113.0/25'],
      affinity: 'ClientIP',
      timeout: 10800,
    }),
  );
  c.onService(undefined, svc('svc6', { ns: 'ns6', clusterIP: '172.30.0.46', ports: port() }));
  c.onService(
    undefined,
    svc('svc7', { ns: 'ns7', type: 'NodePort', iTP: 'Local', clusterIP: '172.30.0.47', ports: port(3007, 'UDP') }),
  );
  c.onService(
    undefined,
    svc('svc8', { ns: 'ns8', type: 'NodePort', clusterIP: '172.30.0.48', ports: port(3008, 'SCTP') }),
  );
  const s = (ns: string, name: string, eps: ReturnType<typeof ep>[], protocol = 'TCP') =>
    c.onEndpointSlice(slice(`${name}-1`, name, eps, { ns, ports: [{ ...PORTS[0]!, protocol }] }), false);
  s('ns1', 'svc1', [ep('10.180.0.1'), ep('10.180.0.11'), ep('10.180.0.12')]);
  s('ns2', 'svc2', [ep('10.180.0.2', { node: 'node-a' }), ep('10.180.0.22')]);
  s('ns5', 'svc5', [ep('10.180.0.3'), ep('10.180.0.31')]);
  s('ns7', 'svc7', [ep('10.180.0.7')], 'UDP');
  s('ns8', 'svc8', [ep('10.180.0.8')], 'SCTP');
  return c.checkout().desired;
}

test('the generator’s IPv4 ruleset: iptables-nft-save prints back exactly what we render', async (t) => {
  const text = saveText(ipv4Cluster());
  t.is(await roundTrip(t, 'IPv4', text, makeNfacctObjects), text);
});

test('the generator’s IPv6 ruleset, with detect-local by interface prefix: printed back exactly', async (t) => {
  const c = cluster({ family: 'IPv6', detectLocalMode: 'InterfaceNamePrefix', interfaceNamePrefix: 'veth' });
  c.onService(
    undefined,
    svc('s', {
      type: 'LoadBalancer',
      eTP: 'Local',
      clusterIPs: ['fd00:30::10'],
      ingress: [{ ip: '2001:db8::4' }],
      sourceRanges: ['2001:db8:1::/48'],
      affinity: 'ClientIP',
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  c.onService(undefined, svc('none', { clusterIPs: ['fd00:30::11'] }));
  c.onEndpointSlice(
    slice('s-1', 's', [ep('fd00:10::5', { node: 'node-a' }), ep('fd00:10::6')], {
      addressType: 'IPv6',
      ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
    }),
    false,
  );
  const text = saveText(c.checkout().desired, { masqueradeBit: 10 });
  t.is(await roundTrip(t, 'IPv6', text, makeNfacctObjects), text);
});

const rule = (chain: string, matches: Match[], target: Target): IptRule => ({
  table: 'filter',
  chain,
  matches,
  target,
});

test('every match and target of the rule model (IPVS aside) renders as iptables-nft-save prints it', async (t) => {
  const nat = (chain: string, matches: Match[], target: Target): IptRule => ({ table: 'nat', chain, matches, target });
  const filter: IptRule[] = [
    rule(
      'OUTPUT',
      [
        { m: 'ctstate', states: ['NEW'] },
        { m: 'comment', text: 'it\'s "quoted" \\ here' },
      ],
      { t: 'jump', chain: 'KUBE-T' },
    ),
    rule(
      'KUBE-T',
      [
        { m: 'src', cidr: '10.0.0.0/8', invert: true },
        { m: 'dst', cidr: '10.1.2.3' },
        { m: 'inIface', name: 'veth+', invert: true },
        { m: 'outIface', name: 'eth0' },
        { m: 'proto', proto: 'tcp' },
        { m: 'dport', proto: 'tcp', port: 443 },
      ],
      { t: 'ACCEPT' },
    ),
    rule(
      'KUBE-T',
      [
        { m: 'set', set: 'KUBE-TEST-SET', dirs: ['dst', 'dst'] },
        { m: 'comment', text: 'plain_comment-1' },
      ],
      { t: 'RETURN' },
    ),
    rule(
      'KUBE-T',
      [
        { m: 'addrtype', dir: 'src', type: 'LOCAL', invert: true },
        { m: 'addrtype', dir: 'dst', type: 'LOCAL' },
      ],
      { t: 'DROP' },
    ),
    rule(
      'KUBE-T',
      [
        { m: 'mark', value: 0x4000, mask: 0x4000, invert: true },
        { m: 'mark', value: 0x1, mask: 0xffffffff },
      ],
      { t: 'REJECT' },
    ),
    rule(
      'KUBE-T',
      [
        { m: 'ctstate', states: ['RELATED', 'ESTABLISHED', 'DNAT'], invert: true },
        { m: 'ctstate', states: ['INVALID'] },
      ],
      { t: 'DROP' },
    ),
    rule('KUBE-T', [{ m: 'physdevNotIsIn' }], { t: 'ACCEPT' }),
    rule('KUBE-T', [{ m: 'nfacct', name: 'kpts_test' }], { t: 'none' }),
    rule(
      'KUBE-T',
      [
        { m: 'proto', proto: 'sctp' },
        { m: 'l4', proto: 'sctp' },
        { m: 'comment', text: '' },
      ],
      { t: 'none' },
    ),
  ];
  const natRules: IptRule[] = [
    nat('PREROUTING', [], { t: 'jump', chain: 'KUBE-N' }),
    nat(
      'KUBE-N',
      [
        { m: 'statistic', probability: '0.1428571429' },
        { m: 'recent', name: 'KUBE-N', mode: 'rcheck', seconds: 5, reap: true },
      ],
      { t: 'MARK', op: 'or', value: 0x4000 },
    ),
    nat(
      'KUBE-N',
      [
        { m: 'recent', name: 'KUBE-N', mode: 'set' },
        { m: 'proto', proto: 'udp' },
        { m: 'l4', proto: 'udp' },
      ],
      { t: 'DNAT', addr: '10.1.0.1', port: 53 },
    ),
    nat(
      'KUBE-N',
      [
        { m: 'proto', proto: 'tcp' },
        { m: 'dport', proto: 'tcp', port: 80 },
      ],
      { t: 'REDIRECT', port: 8080 },
    ),
    nat('POSTROUTING', [], { t: 'MASQUERADE', randomFully: true }),
    nat('POSTROUTING', [{ m: 'src', cidr: '10.0.0.0/8' }], { t: 'MASQUERADE', randomFully: false }),
    nat('KUBE-N', [], { t: 'MARK', op: 'xor', value: 0x4000 }),
  ];
  const byChain = (rules: IptRule[]) =>
    [...new Set(rules.map((r) => r.chain))].map((name) => ({ name, rules: rules.filter((r) => r.chain === name) }));
  const text = rulesetToSave({
    family: 'IPv4',
    tables: [
      { table: 'filter', chains: byChain(filter) },
      { table: 'nat', chains: byChain(natRules) },
    ],
  });
  const printed = await roundTrip(t, 'IPv4', text, async (run) => {
    await run('ipset', 'create', 'KUBE-TEST-SET', 'hash:ip,port');
    await run('nfacct', 'add', 'kpts_test');
  });
  t.is(printed, text);
});
