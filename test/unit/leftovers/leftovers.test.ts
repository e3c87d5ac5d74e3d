// Upstream kube-proxy's leftovers: the mode-aware sweep of iptables-nft chains (on FakeNft, which
// refuses to delete a chain still jumped to, as the kernel does), and the legacy-iptables check.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import {
  isIpvsChain,
  isUpstreamIptablesChain,
  planSweep,
  sweepPolicy,
  sweepTable,
} from '../../../src/leftovers/iptables.ts';
import type { SweepRule } from '../../../src/leftovers/iptables.ts';
import { removeUpstreamIpsets, upstreamIpsetNames, upstreamOwnsService } from '../../../src/leftovers/ipvs.ts';
import { fakeIpset } from '../../../src/netlink/ipset/fake/index.ts';
import {
  chainRegex,
  detectLegacyTables,
  legacyTableCommands,
  warnAboutLegacyIptables,
} from '../../../src/leftovers/legacy.ts';
import { leftoverSteps } from '../../../src/leftovers/upstream.ts';
import type { LeftoverClients } from '../../../src/leftovers/upstream.ts';
import { parseCIDR } from '../../../src/base/ip.ts';
import { rule } from '../../../src/netlink/nftables/index.ts';
import { FakeNft } from '../../../src/netlink/nftables/fake/index.ts';
import type { NftExpr } from '../../../src/netlink/nftables/index.ts';
import { CLEANUP_POLICY, type LeftoverPolicy } from '../../../src/leftovers/policy.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';
import type { IptablesTable } from '../../../src/leftovers/iptables.ts';

/** The policy a daemon starting in `mode` sweeps with; 'cleanup' for --cleanup's. */
const policyOf = (mode: string): LeftoverPolicy =>
  mode === 'cleanup' ? CLEANUP_POLICY : MODES[mode as keyof typeof MODES].leftovers;
const sweep = (mode: string, table: IptablesTable) => {
  const p = policyOf(mode);
  return sweepPolicy(p.ownsChain, p.dropSetRules, table);
};

const NAT_BASE = {
  PREROUTING: { type: 'nat', hook: 'prerouting', priority: -100 },
  OUTPUT: { type: 'nat', hook: 'output', priority: -100 },
  POSTROUTING: { type: 'nat', hook: 'postrouting', priority: 100 },
} as const;

/** An xt_set match followed by a jump, as iptables-nft writes `-m set --match-set X dst,dst -j C`. */
const setJump = (chain: string): NftExpr[] => [
  { type: 'xtmatch', name: 'set', rev: 4, info: new Uint8Array(48) },
  { type: 'immediate', verdict: { verdict: 'jump', chain } },
];

/**
 * An `ip nat` as a node that ran upstream's iptables mode, then its IPVS mode, leaves it: a
 * foreign rule first in PREROUTING, kubelet's KUBE-MARK-DROP, a CNI chain jumping to one
 * endpoint chain.
 */
async function upstreamNat(): Promise<FakeNft> {
  const nft = new FakeNft({ family: 'ip', table: 'nat' });
  const tx = nft.newTransaction();
  tx.add({ kind: 'table' });
  for (const [name, base] of Object.entries(NAT_BASE)) tx.add({ kind: 'chain', name, base: { ...base } });
  const chains = [
    'KUBE-SERVICES',
    'KUBE-SVC-AAAA',
    'KUBE-SEP-BBBB',
    'KUBE-SEP-CCCC',
    'KUBE-MARK-MASQ',
    'KUBE-POSTROUTING',
    'KUBE-NODE-PORT',
    'KUBE-MARK-DROP',
    'cni-x',
  ];
  for (const name of chains) tx.add({ kind: 'chain', name });
  tx.add(rule('ip', 'PREROUTING').match('th dport', 9).accept().build());
  tx.add(rule('ip', 'PREROUTING').jump('KUBE-SERVICES').build());
  tx.add(rule('ip', 'PREROUTING').match('th dport', 10).accept().build());
  tx.add(rule('ip', 'OUTPUT').jump('KUBE-SERVICES').build());
  tx.add(rule('ip', 'POSTROUTING').jump('KUBE-POSTROUTING').build());
  tx.add(rule('ip', 'KUBE-SERVICES').jump('KUBE-SVC-AAAA').build());
  tx.add(rule('ip', 'KUBE-SERVICES').raw(setJump('KUBE-MARK-MASQ'), 'match set').build());
  tx.add(rule('ip', 'KUBE-SERVICES').jump('KUBE-NODE-PORT').build());
  tx.add(rule('ip', 'KUBE-SVC-AAAA').jump('KUBE-SEP-BBBB').build());
  tx.add(rule('ip', 'KUBE-SEP-BBBB').jump('KUBE-MARK-MASQ').build());
  tx.add(rule('ip', 'KUBE-SEP-BBBB').dnat('10.244.1.2', 8080).build());
  tx.add(rule('ip', 'KUBE-POSTROUTING').masquerade().build());
  tx.add(rule('ip', 'cni-x').jump('KUBE-SEP-CCCC').build());
  await nft.run(tx);
  return nft;
}

async function shape(nft: FakeNft): Promise<{ chains: string[]; rules: string[] }> {
  const chains = (await nft.listChains()).map((c) => c.name).sort();
  const rules = (await nft.listRules()).map((r) => {
    const to = r.exprs.flatMap((e) =>
      e.type === 'immediate' && 'verdict' in e && 'chain' in e.verdict ? [e.verdict.chain] : [],
    );
    const set = r.exprs.some((e) => e.type === 'xtmatch') ? 'set ' : '';
    const port = r.exprs.some((e) => e.type === 'cmp') ? 'port ' : '';
    const last = r.exprs.at(-1);
    const end = last?.type === 'immediate' && 'verdict' in last ? last.verdict.verdict : last?.type;
    return `${r.chain}: ${set}${port}${to.length ? `-> ${to.join(',')}` : end}`;
  });
  return { chains, rules };
}

test('nftables mode: every upstream chain and the jumps to it go; foreign rules stay in order; kubelet and a CNI-held chain stay', async (t) => {
  const nft = await upstreamNat();
  const r = await sweepTable(nft, sweep('nftables', 'nat'));
  t.deepEqual(r.kept, [{ chain: 'KUBE-SEP-CCCC', heldBy: 'cni-x' }]);
  t.is(r.deletedRules, 3);
  t.deepEqual(await shape(nft), {
    chains: ['KUBE-MARK-DROP', 'KUBE-SEP-CCCC', 'OUTPUT', 'POSTROUTING', 'PREROUTING', 'cni-x'],
    rules: ['PREROUTING: port accept', 'PREROUTING: port accept', 'cni-x: -> KUBE-SEP-CCCC'],
  });
  // The two foreign PREROUTING rules keep their order (dport 9 before dport 10).
  const ports = (await nft.listRules('PREROUTING')).map((x) => x.exprs.find((e) => e.type === 'cmp'));
  t.deepEqual(
    ports.map((c) => (c && 'data' in c ? Array.from(c.data) : [])),
    [
      [0, 9],
      [0, 10],
    ],
  );
});

test('ipvs mode: the IPVS names are ours (kept, with their set rules); iptables-mode chains and the jumps into them from ours go', async (t) => {
  const nft = await upstreamNat();
  const r = await sweepTable(nft, sweep('ipvs', 'nat'));
  t.deepEqual(r.removedChains.sort(), ['KUBE-SEP-BBBB', 'KUBE-SVC-AAAA']);
  t.deepEqual((await shape(nft)).rules, [
    'PREROUTING: port accept',
    'PREROUTING: -> KUBE-SERVICES',
    'PREROUTING: port accept',
    'OUTPUT: -> KUBE-SERVICES',
    'POSTROUTING: -> KUBE-POSTROUTING',
    'KUBE-SERVICES: set -> KUBE-MARK-MASQ',
    'KUBE-SERVICES: -> KUBE-NODE-PORT',
    'KUBE-POSTROUTING: masq',
    'cni-x: -> KUBE-SEP-CCCC',
  ]);
});

test('iptables mode: upstream iptables names are ours; IPVS-only chains and the IPVS set rules in shared chains go', async (t) => {
  const nft = await upstreamNat();
  const r = await sweepTable(nft, sweep('iptables', 'nat'));
  t.deepEqual(r.removedChains, ['KUBE-NODE-PORT']);
  t.is(r.deletedRules, 2, 'the jump to KUBE-NODE-PORT and the set match');
  const rules = (await shape(nft)).rules;
  t.true(rules.includes('KUBE-SERVICES: -> KUBE-SVC-AAAA'));
  t.false(rules.some((x) => x.includes('set ')));
  t.true(rules.includes('PREROUTING: -> KUBE-SERVICES'));
});

/** `ip nat` after upstream's iptables mode and the userspace mode both ran. */
async function withPortals(): Promise<FakeNft> {
  const nft = await upstreamNat();
  const tx = nft.newTransaction();
  for (const name of ['KUBE-PORTALS-CONTAINER', 'KUBE-PORTALS-HOST', 'KUBE-NODEPORT-CONTAINER', 'KUBE-NODEPORT-HOST'])
    tx.add({ kind: 'chain', name });
  tx.add(rule('ip', 'PREROUTING').jump('KUBE-PORTALS-CONTAINER').build());
  tx.add(rule('ip', 'OUTPUT').jump('KUBE-PORTALS-HOST').build());
  tx.add(rule('ip', 'PREROUTING').jump('KUBE-NODEPORT-CONTAINER').build());
  tx.add(rule('ip', 'OUTPUT').jump('KUBE-NODEPORT-HOST').build());
  tx.add(rule('ip', 'KUBE-PORTALS-CONTAINER').match('th dport', 80).accept().build());
  await nft.run(tx);
  return nft;
}

const PORTAL_CHAINS = ['KUBE-NODEPORT-CONTAINER', 'KUBE-NODEPORT-HOST', 'KUBE-PORTALS-CONTAINER', 'KUBE-PORTALS-HOST'];

test("userspace mode: KUBE-PORTALS/KUBE-NODEPORT chains are ours; the iptables and IPVS modes' chains go", async (t) => {
  const nft = await withPortals();
  const r = await sweepTable(nft, sweep('userspace', 'nat'));
  t.false(r.removedChains.some((c) => PORTAL_CHAINS.includes(c)));
  t.true(r.removedChains.includes('KUBE-SERVICES'));
  const { chains, rules } = await shape(nft);
  for (const c of PORTAL_CHAINS) t.true(chains.includes(c), c);
  t.true(rules.includes('PREROUTING: -> KUBE-PORTALS-CONTAINER'));
  t.false(rules.includes('PREROUTING: -> KUBE-SERVICES'));
});

for (const mode of ['iptables', 'ipvs', 'nftables', 'cleanup']) {
  test(`${mode}: the userspace mode's chains and the jumps to them go`, async (t) => {
    const nft = await withPortals();
    const r = await sweepTable(nft, sweep(mode, 'nat'));
    for (const c of PORTAL_CHAINS) t.true(r.removedChains.includes(c), c);
    t.false((await shape(nft)).rules.some((x) => /PORTALS|NODEPORT-/.test(x)));
  });
}

test('a large leftover (3,000 endpoint chains) is removed in bounded batches', async (t) => {
  const nft = new FakeNft({ family: 'ip', table: 'nat' });
  const tx = nft.newTransaction();
  tx.add({ kind: 'table' });
  tx.add({ kind: 'chain', name: 'PREROUTING', base: { ...NAT_BASE.PREROUTING } });
  tx.add({ kind: 'chain', name: 'KUBE-SERVICES' });
  tx.add(rule('ip', 'PREROUTING').jump('KUBE-SERVICES').build());
  for (let i = 0; i < 3000; i++) {
    tx.add({ kind: 'chain', name: `KUBE-SEP-${i}` });
    tx.add(rule('ip', 'KUBE-SERVICES').jump(`KUBE-SEP-${i}`).build());
  }
  await nft.run(tx);
  const before = nft.generationId;
  const r = await sweepTable(nft, sweep('nftables', 'nat'));
  t.is(r.removedChains.length, 3001);
  t.is(nft.generationId - before, 7, '1 jump + 3001 flushes + 3001 deletes in batches of 1000');
  t.deepEqual((await shape(nft)).chains, ['PREROUTING']);
});

test('a table without upstream chains is only listed', async (t) => {
  const nft = new FakeNft({ family: 'ip6', table: 'filter' });
  const r = await sweepTable(nft, sweep('nftables', 'filter'));
  t.deepEqual(r, { table: 'ip6 filter', removedChains: [], deletedRules: 0, kept: [] });
  t.is(nft.generationId, 0);
});

test('names: upstream iptables and IPVS lists, kubelet chains are neither', (t) => {
  const nat = [
    'KUBE-SERVICES',
    'KUBE-SVC-X',
    'KUBE-SVL-X',
    'KUBE-SEP-X',
    'KUBE-FW-X',
    'KUBE-EXT-X',
    'KUBE-XLB-X',
    'KUBE-PROXY-CANARY',
  ];
  for (const n of nat) t.true(isUpstreamIptablesChain('nat', n), n);
  t.true(isUpstreamIptablesChain('filter', 'KUBE-EXTERNAL-SERVICES'));
  t.false(isUpstreamIptablesChain('filter', 'KUBE-SVC-X'));
  t.true(isUpstreamIptablesChain('mangle', 'KUBE-PROXY-CANARY'));
  for (const n of ['KUBE-FIREWALL', 'KUBE-MARK-DROP', 'KUBE-KUBELET-CANARY']) {
    for (const table of ['nat', 'filter', 'mangle'] as const) {
      t.false(isUpstreamIptablesChain(table, n) || isIpvsChain(table, n), `${table} ${n}`);
      t.false(new RegExp(`^${chainRegex(table)}$`).test(n), `legacy regex ${table} ${n}`);
    }
  }
  t.true(isIpvsChain('filter', 'KUBE-IPVS-FILTER'));
  t.true(new RegExp(`^${chainRegex('nat')}$`).test('KUBE-SEP-ABCDEF'));
  t.true(new RegExp(`^${chainRegex('filter')}$`).test('KUBE-IPVS-OUT-FILTER'));
});

test('planSweep keeps a chain held by a foreign chain and everything only it leads to', (t) => {
  const r = (chain: string, handle: number, ...targets: string[]): SweepRule => ({
    chain,
    handle: BigInt(handle),
    targets,
    usesSet: false,
  });
  const chains = ['INPUT', 'KUBE-SVC-A', 'KUBE-SEP-A', 'KUBE-SERVICES', 'mine'].map((name) => ({
    name,
    base: name === 'INPUT',
  }));
  const plan = planSweep(
    chains,
    [r('mine', 1, 'KUBE-SVC-A'), r('KUBE-SVC-A', 2, 'KUBE-SEP-A'), r('INPUT', 3, 'KUBE-SERVICES')],
    sweep('nftables', 'nat'),
  );
  t.deepEqual(plan.chains, ['KUBE-SERVICES']);
  t.deepEqual(plan.kept, [
    { chain: 'KUBE-SVC-A', heldBy: 'mine' },
    { chain: 'KUBE-SEP-A', heldBy: 'KUBE-SVC-A' },
  ]);
  t.deepEqual(
    plan.deleteRules.map((x) => x.handle),
    [3n],
  );
});

test('IPVS ownership: fwmark services aside, every address outside --ipvs-exclude-cidrs; both families of ipset names', (t) => {
  const exclude = [parseCIDR('10.200.0.0/16')!];
  t.true(upstreamOwnsService({ family: 'IPv4', protocol: 'tcp', address: '10.96.0.1', port: 443 }, exclude));
  t.false(upstreamOwnsService({ family: 'IPv4', protocol: 'tcp', address: '10.200.3.4', port: 80 }, exclude));
  const names = upstreamIpsetNames();
  t.true(
    names.includes('KUBE-CLUSTER-IP') &&
      names.includes('KUBE-6-CLUSTER-IP') &&
      names.includes('KUBE-6-LOAD-BALANCER-SOURCE-CID'),
  );
  // Upstream's 17 per family, and our KUBE-NO-LOCAL-ENDPOINTS (left by our own IPVS mode).
  t.true(names.includes('KUBE-NO-LOCAL-ENDPOINTS') && names.includes('KUBE-6-NO-LOCAL-ENDPOINTS'));
  t.is(names.length, 36);
});

test('legacy iptables: tables found from /proc/net, commands per table, one warning naming them', (t) => {
  const files: Record<string, string> = {
    '/proc/net/ip_tables_names': 'filter\nnat\nraw\n',
    '/proc/net/ip6_tables_names': '',
  };
  const probe = {
    read: (p: string) => files[p],
    readlink: (p: string) => (p === '/etc/alternatives/iptables' ? '/usr/sbin/iptables-legacy' : undefined),
  };
  t.deepEqual(detectLegacyTables(probe), {
    ipv4: ['nat', 'filter'],
    ipv6: [],
    alternative: '/usr/sbin/iptables-legacy',
  });
  const cmds = legacyTableCommands('iptables', 'nat');
  t.is(cmds.length, 3);
  t.true(
    cmds[0]!.startsWith(
      "iptables-legacy-save -t nat | grep -E '^-A (PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) .*-[jg] KUBE-(",
    ),
  );
  t.true(cmds[0]!.endsWith("| sed 's/^-A /-D /' | xargs -r -L1 iptables-legacy -t nat"));
  t.true(cmds[2]!.endsWith('| xargs -r -n1 iptables-legacy -t nat -X'));
  const logger = memoryLogger();
  t.true(warnAboutLegacyIptables(logger, probe));
  const [w] = logger.records;
  t.is(w?.level, 'warn');
  t.regex(w!.msg, /\(iptables: nat, filter; \/etc\/alternatives\/iptables -> \/usr\/sbin\/iptables-legacy\)/);
  t.true(
    logger.records.every((r) => r.level === 'warn' && !r.msg.includes('\n')),
    'one line per record',
  );
  t.is(
    logger.records.filter((r) => r.msg.startsWith('iptables-legacy')).length,
    7,
    'the check, then 3 commands per table',
  );
  t.false(
    warnAboutLegacyIptables(memoryLogger(), { read: () => '', readlink: () => undefined }),
    'no legacy table: nothing said',
  );
});

test('steps per mode: IPVS objects are left alone in IPVS mode; --cleanup removes only the sets (the IPVS proxier the rest)', (t) => {
  const clients = {} as LeftoverClients;
  const names = (mode: string) => leftoverSteps(policyOf(mode), clients, { logger: memoryLogger() }).map((s) => s.what);
  const ipvsStep = 'upstream kube-proxy IPVS virtual servers, ipsets and kube-ipvs0';
  t.true(names('nftables').includes(ipvsStep));
  t.true(names('iptables').includes(ipvsStep));
  t.false(names('ipvs').includes(ipvsStep));
  t.false(names('cleanup').includes(ipvsStep));
  t.true(names('cleanup').includes('upstream kube-proxy ipsets'));
  t.false(names('ipvs').includes('upstream kube-proxy ipsets'));
  t.is(names('nftables').filter((n) => n.includes('iptables-nft chains')).length, 6, 'ip and ip6: nat, filter, mangle');
  t.deepEqual(names('nftables').slice(0, 2), [
    'upstream kube-proxy nftables table ip kube-proxy',
    'upstream kube-proxy nftables table ip6 kube-proxy',
  ]);
  t.is(names('nftables').at(-1), 'legacy iptables check');
});

test('ipsets: busy sets are tried again until deleted rules let go (bounded); a foreign set stays; one held for good is named', async (t) => {
  const { client, kernel } = fakeIpset();
  for (const name of ['KUBE-CLUSTER-IP', 'KUBE-LOOP-BACK', 'someone-elses']) await client.create(name, 'hash:ip');
  kernel.reference('KUBE-CLUSTER-IP');
  let waits = 0;
  // The kernel frees the deleted rule (and its reference) during the second wait.
  const sleep = (): Promise<void> => {
    if (++waits === 2) kernel.reference('KUBE-CLUSTER-IP', -1);
    return Promise.resolve();
  };
  t.deepEqual(await removeUpstreamIpsets(client, { attempts: 5, delayMs: 1, sleep }), [
    'KUBE-LOOP-BACK',
    'KUBE-CLUSTER-IP',
  ]);
  t.is(waits, 2);
  t.deepEqual(await client.names(), ['someone-elses']);

  await client.create('KUBE-IPVS-IPS', 'hash:ip');
  kernel.reference('KUBE-IPVS-IPS');
  await t.throwsAsync(removeUpstreamIpsets(client, { attempts: 3, delayMs: 1, sleep: () => Promise.resolve() }), {
    message: /^destroy ipsets: KUBE-IPVS-IPS: .*\(still referenced by an iptables rule; legacy iptables\?\)$/,
  });
});
