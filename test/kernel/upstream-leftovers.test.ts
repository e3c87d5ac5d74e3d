// Migrating a node from upstream kube-proxy (docs/migrating.md): upstream's rules are left in
// the kernel the way upstream writes them (its nftables table through `nft -f`, its iptables
// chains through iptables-nft-restore, a few legacy-iptables chains through
// iptables-legacy-restore; fixtures in test/fixtures/upstream), with foreign rules among them,
// and they still catch the Service's traffic (sent to pod IPs that no longer exist). Then
// kube-proxy-ts starts in nftables mode from a manifest directory, as the guide says:
// upstream's nftables tables and iptables-nft chains are gone, a real packet to the Service
// reaches our endpoint, the foreign rules and kubelet's chains survive in order, and the
// warning about legacy iptables names commands that, run as printed, remove exactly upstream's
// legacy chains. Finally upstream's rules are loaded again and `--cleanup` removes them too.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const FIXTURES = new URL('../fixtures/upstream/', import.meta.url);
const fixture = (name: string): Promise<string> => readFile(new URL(name, FIXTURES), 'utf8');
const VIP = '10.96.0.10';

/** Loads upstream's state into the node the way upstream's kube-proxy writes it. */
async function loadUpstream(c: Cluster, opts: { legacy: boolean }): Promise<void> {
  const load = async (tool: string, args: string[], file: string): Promise<void> => {
    const r = await c.node.exec(tool, args, { input: await fixture(file) });
    if (r.code !== 0) throw new Error(`${tool} ${args.join(' ')} < ${file}: ${r.stderr}`);
  };
  await load('nft', ['-f', '-'], 'kube-proxy-nftables.nft');
  await load('iptables-nft-restore', ['--noflush'], 'kube-proxy-iptables.rules');
  await load('ip6tables-nft-restore', ['--noflush'], 'kube-proxy-ip6tables.rules');
  if (opts.legacy) await load('iptables-legacy-restore', ['--noflush'], 'legacy-iptables.rules');
}

/** `iptables-nft-save` (or another saver) of the node: chain declarations and rules, counters cut. */
async function saved(c: Cluster, tool = 'iptables-nft-save'): Promise<{ chains: string[]; rules: string[] }> {
  const lines = (await c.node.run(tool)).split('\n');
  let table = '';
  const chains: string[] = [];
  const rules: string[] = [];
  for (const l of lines) {
    if (l.startsWith('*')) table = l.slice(1);
    else if (l.startsWith(':')) chains.push(`${table} ${l.slice(1).split(' ')[0]!}`);
    else if (l.startsWith('-A ')) rules.push(`${table} ${l}`);
  }
  return { chains, rules };
}

/** Starts kube-proxy-ts in nftables mode on the node; resolves once the ClusterIP reaches pod1. */
async function startServing(t: ExecutionContext, c: Cluster, dir: string): Promise<DaemonProcess> {
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }));
  const answered = async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod1 ') ? true : undefined;
  await pollUntil('the ClusterIP to answer from our endpoint', answered, 20_000).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });
  return d;
}

const kube = (xs: string[]): string[] => xs.filter((x) => x.includes('KUBE-'));
const tables = async (c: Cluster): Promise<string[]> =>
  (await c.node.nftJson())
    .filter((o) => 'table' in o)
    .map((o) => `${String(o['table']!['family'])} ${String(o['table']!['name'])}`)
    .sort();

test.serial(
  'a node that ran upstream kube-proxy: its leftovers go at start, ours serve, foreign rules stay; --cleanup removes them too',
  async (t) => {
    const c = await makeCluster(t, 'upl', 2);
    const dir = await tempDir(t, 'upstream');
    await writeFile(
      join(dir, 'web.yaml'),
      serviceYAML({ name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, endpoints: [podIP(0)] }),
    );

    // 1. Upstream was stopped, its rules stay: they still take the Service to its stale pods.
    await loadUpstream(c, { legacy: true });
    t.deepEqual(await tables(c), ['ip filter', 'ip kube-proxy', 'ip mangle', 'ip nat', 'ip6 kube-proxy', 'ip6 nat']);
    const stale = await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80);
    t.false(stale.startsWith('pod'), `before: upstream's rules send the ClusterIP to pods that are gone (${stale})`);
    const before = await saved(c);

    // 2. kube-proxy-ts starts in nftables mode.
    const d = await startServing(t, c, dir);
    const answers = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', VIP, 80, 8);
    t.true(
      answers.every((a) => a.startsWith('pod1 ')),
      `every connection reaches our endpoint: ${answers.join(', ')}`,
    );
    const viaNodePort = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', '10.1.0.1', 30080, 4);
    t.true(
      viaNodePort.every((a) => a.startsWith('pod1 ')),
      `NodePort too: ${viaNodePort.join(', ')}`,
    );

    t.deepEqual(
      await tables(c),
      ['ip filter', 'ip kube-proxy-ts', 'ip mangle', 'ip nat', 'ip6 kube-proxy-ts', 'ip6 nat'],
      'both families served (the kernel has IPv6, as upstream decides), ip6 kube-proxy gone',
    );
    const after = await saved(c);
    // Only kubelet's chains are left of the KUBE-* ones, and no rule jumps to upstream's.
    t.deepEqual(kube(after.chains).sort(), [
      'filter KUBE-FIREWALL',
      'filter KUBE-KUBELET-CANARY',
      'mangle KUBE-KUBELET-CANARY',
      'nat KUBE-KUBELET-CANARY',
    ]);
    const kubelets = kube(before.rules).filter((r) => r.startsWith('filter -A KUBE-FIREWALL '));
    t.deepEqual(kube(after.rules), [
      'filter -A INPUT -j KUBE-FIREWALL',
      'filter -A OUTPUT -j KUBE-FIREWALL',
      ...kubelets,
    ]);
    // Every rule that was not upstream's is still there, in the same order.
    const foreign = (rs: string[]) => rs.filter((r) => !/KUBE-(?!FIREWALL)/.test(r));
    t.deepEqual(foreign(after.rules), foreign(before.rules));
    t.deepEqual(
      after.rules.filter((r) => r.includes('foreign')),
      [
        'filter -A FORWARD -p tcp -m tcp --dport 5555 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
        'filter -A FORWARD -p udp -m udp --dport 5556 -m comment --comment "foreign: also not kube-proxy rules" -j ACCEPT',
        'nat -A PREROUTING -p tcp -m tcp --dport 7777 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
        'nat -A PREROUTING -p tcp -m tcp --dport 7778 -m comment --comment "foreign: also not kube-proxy rules" -j ACCEPT',
      ],
    );
    t.deepEqual(kube((await saved(c, 'ip6tables-nft-save')).chains), []);
    t.regex(d.log(), /Removed upstream kube-proxy nftables table table="ip kube-proxy"/);
    t.regex(d.log(), /Removed upstream kube-proxy iptables-nft chains table="ip nat" chains=8 /);

    // 3. Legacy iptables: named, not touched; the commands in the warning, run as printed, remove
    //    upstream's legacy chains and jumps and nothing else.
    const legacyBefore = await saved(c, 'iptables-legacy-save');
    t.is(kube(legacyBefore.chains).length, 3, 'legacy chains are left for the operator');
    const commands = d
      .log()
      .split('\n')
      .map((l) => /\bwarn +(ip6?tables-legacy-save -t .*)$/.exec(l)?.[1])
      .filter((cmd): cmd is string => cmd !== undefined);
    t.is(commands.length, 3, d.log());
    for (const cmd of commands) {
      const r = await c.node.exec('sh', ['-c', cmd]);
      t.is(r.code, 0, `${cmd}: ${r.stderr}`);
    }
    t.deepEqual(await saved(c, 'iptables-legacy-save'), {
      chains: ['nat PREROUTING', 'nat INPUT', 'nat OUTPUT', 'nat POSTROUTING', 'nat KUBE-MARK-DROP'],
      rules: ['nat -A PREROUTING -p tcp -m tcp --dport 7779 -m comment --comment "foreign legacy rule" -j ACCEPT'],
    });

    // 4. Stopped; upstream's rules come back (say, a rollback and a second try), and --cleanup
    //    removes them with ours.
    d.signal('SIGTERM');
    t.is((await d.exited).code, 0);
    await loadUpstream(c, { legacy: false });
    const cleanup = await runDaemon(c.node, ['--cleanup']);
    t.is(cleanup.code, 0, cleanup.stderr);
    t.deepEqual(await tables(c), ['ip filter', 'ip mangle', 'ip nat', 'ip6 nat']);
    const cleaned = await saved(c);
    t.deepEqual(kube(cleaned.chains).sort(), [
      'filter KUBE-FIREWALL',
      'filter KUBE-KUBELET-CANARY',
      'mangle KUBE-KUBELET-CANARY',
      'nat KUBE-KUBELET-CANARY',
    ]);
    // The fixture's foreign rules in built-in chains were loaded twice (a user chain's
    // declaration flushes it, so kubelet's KUBE-FIREWALL rule is there once): none went.
    t.is(cleaned.rules.filter((r) => r.includes('foreign')).length, 8);
    t.deepEqual([...new Set(foreign(cleaned.rules))], foreign(before.rules));
    t.deepEqual(kube((await saved(c, 'ip6tables-nft-save')).chains), []);
  },
);

/** Upstream's IPVS-mode ipsets that its companion rules (kube-proxy-ipvs.rules) match. */
const IPVS_SETS: readonly string[][] = [
  ['KUBE-CLUSTER-IP', 'hash:ip,port'],
  ['KUBE-LOOP-BACK', 'hash:ip,port,ip'],
  ['KUBE-LOAD-BALANCER', 'hash:ip,port'],
  ['KUBE-IPVS-IPS', 'hash:ip'],
  ['KUBE-NODE-PORT-TCP', 'bitmap:port', 'range', '0-65535'],
  ['KUBE-HEALTH-CHECK-NODE-PORT', 'bitmap:port', 'range', '0-65535'],
  ['KUBE-6-CLUSTER-IP', 'hash:ip,port', 'family', 'inet6'],
];

/** Upstream IPVS mode's sets (one entry) and companion rules, as upstream's ipset and iptables-restore write them. */
async function loadIpvsState(c: Cluster): Promise<void> {
  for (const [name, ...spec] of IPVS_SETS) await c.node.run('ipset', 'create', name!, ...spec);
  await c.node.run('ipset', 'add', 'KUBE-CLUSTER-IP', `${VIP},tcp:80`);
  const r = await c.node.exec('iptables-nft-restore', ['--noflush'], { input: await fixture('kube-proxy-ipvs.rules') });
  if (r.code !== 0) throw new Error(`iptables-nft-restore < kube-proxy-ipvs.rules: ${r.stderr}`);
}

// The machine's kernel has no IPVS and no dummy links (the VM test upstream-ipvs-leftovers
// covers virtual servers and kube-ipvs0): here, upstream IPVS mode's companion rules, which
// keep its ipsets busy, and the sets themselves.
test.serial(
  "upstream IPVS mode's companion rules go first, then its ipsets; a foreign set and rules stay",
  async (t) => {
    const c = await makeCluster(t, 'upv', 1);
    const dir = await tempDir(t, 'upstream-ipvs');
    await writeFile(
      join(dir, 'web.yaml'),
      serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
    );
    await c.node.run('ipset', 'create', 'someone-elses', 'hash:ip');
    await loadIpvsState(c);
    t.not((await c.node.exec('ipset', ['destroy', 'KUBE-CLUSTER-IP'])).code, 0, 'the rules keep the set busy');
    const before = await saved(c);

    const d = await startServing(t, c, dir);
    t.deepEqual((await c.node.run('ipset', 'list', '-n')).trim().split('\n'), ['someone-elses'], d.log());
    const after = await saved(c);
    t.deepEqual(kube(after.chains), []);
    t.deepEqual(
      after.rules,
      before.rules.filter((x) => !x.includes('KUBE-')),
    );
    t.deepEqual(after.rules, [
      'filter -A FORWARD -p tcp -m tcp --dport 5555 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
      'nat -A PREROUTING -p tcp -m tcp --dport 7777 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
    ]);
    const sets =
      'KUBE-LOOP-BACK,KUBE-CLUSTER-IP,KUBE-6-CLUSTER-IP,KUBE-LOAD-BALANCER,KUBE-NODE-PORT-TCP,KUBE-HEALTH-CHECK-NODE-PORT,KUBE-IPVS-IPS';
    t.true(d.log().includes(`Removed upstream kube-proxy ipsets sets=${sets}\n`), d.log());
    t.notRegex(d.log(), /Could not remove/);
    d.signal('SIGTERM');
    t.is((await d.exited).code, 0);

    // --cleanup: the same state again goes too (rules first, then the sets once released).
    await loadIpvsState(c);
    const cleanup = await runDaemon(c.node, ['--cleanup']);
    t.is(cleanup.code, 0, cleanup.stderr);
    t.deepEqual((await c.node.run('ipset', 'list', '-n')).trim().split('\n'), ['someone-elses']);
    t.deepEqual(kube((await saved(c)).chains), []);
  },
);
