// The iptables proxier against the machine's kernel, proven with real packets: a node
// namespace runs the model and the proxier, pods answer with their name and the source they
// saw, an external client connects. iptables-nft-save (an independent reader) shows the rules.
// What every mode does alike (ClusterIP, NodePort, no endpoints, external IPs and load balancers,
// eTP=Local, affinity, IPv6) is proxier-semantics.ts, run here with this mode's own rule checks.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, NODE_IP, podGateway, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';
import { driver, MODEL, pods, proxierSemantics, tcpPort } from './proxier-semantics.ts';

/** `iptables -t nat -D` of our jump from PREROUTING to KUBE-SERVICES, as an operator types it. */
const DELETE_OUR_PREROUTING_JUMP = [
  '-t',
  'nat',
  '-D',
  'PREROUTING',
  '-m',
  'comment',
  '--comment',
  'kubernetes service portals',
  '-j',
  'KUBE-SERVICES',
];

const P = new URL('./scenarios/ipt-proxier.ts', import.meta.url).href;
const { cluster, apply, tcp, tcpMany } = driver(P);

/** iptables-nft-save of the node, without counters and comments lines. */
async function save(c: Cluster, tool = 'iptables-nft-save'): Promise<string> {
  const r = await c.node.exec(tool, []);
  if (r.code !== 0) throw new Error(`${tool}: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/, ''))
    .join('\n');
}

proxierSemantics({
  label: 'ipt-',
  scenario: P,
  inspect: {
    async clusterIPAndNodePort(t, c) {
      const text = await save(c);
      t.regex(
        text,
        /-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/web:p cluster IP" -m tcp --dport 80 -j KUBE-SVC-/,
      );
      t.regex(text, /-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/);
      t.deepEqual(await c.nodeAgent.call<string[]>(P, 'warnings'), []);
    },
    async affinity(t, c) {
      t.regex(await save(c), /-m recent --rcheck --seconds 600 --reap --name KUBE-SEP-/);
    },
    async ipv6(t, c) {
      t.regex(
        await save(c, 'ip6tables-nft-save'),
        /-A KUBE-SERVICES -d fd96::10\/128 -p tcp -m comment --comment "default\/web6:p cluster IP"/,
      );
    },
  },
});

const web3 = {
  services: [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) })],
  slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
};

test.serial(
  'localhost node ports (IPv4): route_localnet set, 127.0.0.1:nodePort answered from the node, martians dropped',
  async (t) => {
    const c = await cluster(t, 'ipt-lo', 1);
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    t.deepEqual(await c.nodeAgent.call(P, 'sysctlValues'), { 'net/ipv4/conf/all/route_localnet': 1 });
    t.is((await c.node.run('cat', '/proc/sys/net/ipv4/conf/all/route_localnet')).trim(), '1');
    t.regex(await c.nodeAgent.call<string>(ECHO, 'tcp', '127.0.0.1', 30080), /^pod1 /);
    t.regex(
      await save(c),
      /-A KUBE-FIREWALL ! -s 127\.0\.0\.0\/8 -d 127\.0\.0\.0\/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP/,
    );
  },
);

/** The rules of others (and ours) in a chain, in order, as iptables-nft-save prints them. */
const linesOf = (text: string, chain: string) => text.split('\n').filter((l) => l.startsWith(`-A ${chain} `));
const foreign = (text: string) => text.split('\n').filter((l) => l.startsWith('-A ') && !l.includes('KUBE-'));
/**
 * KUBE-* lines left after a cleanup, less kubelet's KUBE-FIREWALL (its chain, jumps and martian
 * drop): like upstream's cleanup, ours leaves that chain to kubelet even when we created it.
 */
const kubeLeft = (text: string) => text.split('\n').filter((l) => l.includes('KUBE-') && !l.includes('KUBE-FIREWALL'));

test.serial(
  'rules of others in nat PREROUTING/OUTPUT and filter FORWARD survive syncs, a restart, a removed jump and --cleanup',
  async (t) => {
    const c = await cluster(t, 'ipt-share', 3);
    const ipt = (...args: string[]) => c.node.run('iptables-nft', ...args);
    await ipt('-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.1/32', '-j', 'ACCEPT');
    await ipt('-t', 'nat', '-A', 'OUTPUT', '-d', '192.0.2.2/32', '-j', 'RETURN');
    await ipt('-A', 'FORWARD', '-s', '192.0.2.3/32', '-j', 'DROP');
    await ipt('-N', 'SOMEONE-ELSE');
    await ipt('-A', 'SOMEONE-ELSE', '-p', 'tcp', '--dport', '22', '-j', 'ACCEPT');
    await ipt('-P', 'FORWARD', 'DROP');
    const before = foreign(await save(c));
    t.is(before.length, 4);

    await apply(c, web3);
    await ipt('-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.4/32', '-j', 'ACCEPT'); // added after us
    const theirs = foreign(await save(c));
    t.deepEqual(
      theirs.filter((l) => !l.includes('192.0.2.4')),
      before,
    );
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod[123] /);
    t.deepEqual(
      linesOf(await save(c), 'PREROUTING')[0],
      '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      'our jump first',
    );

    // Partial sync, full sync, restart: nothing of theirs moves, our jumps stay single.
    await apply(c, { slices: [slice('web-1', 'web', [ep(podIP(0))])] });
    await apply(c, {}, true);
    await c.nodeAgent.call(P, 'start', MODEL);
    await apply(c, web3);
    let text = await save(c);
    t.deepEqual(foreign(text), theirs);
    t.is(linesOf(text, 'PREROUTING').filter((l) => l.includes('KUBE-SERVICES')).length, 1);
    t.regex(text, /:FORWARD DROP/, 'the policy of FORWARD is theirs');

    // Someone deletes our jump: the next full sync puts it back, once, at the top.
    await ipt(...DELETE_OUR_PREROUTING_JUMP);
    t.is(await tcp(c, 'client', '10.96.0.10', 80), 'ETIMEDOUT');
    await apply(c, {}, true);
    text = await save(c);
    t.is(
      linesOf(text, 'PREROUTING')[0],
      '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    );
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod[123] /);

    await c.nodeAgent.call(P, 'cleanup');
    await c.nodeAgent.call(P, 'cleanup');
    text = await save(c);
    t.deepEqual(kubeLeft(text), [], text);
    t.deepEqual(foreign(text), theirs);
    t.regex(text, /:SOMEONE-ELSE/);
  },
);

/** Rule handles per chain of a table, read with nft (an independent reader). */
async function handles(c: Cluster, table: string): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  for (const o of await c.node.nftJson()) {
    const r = o.rule as { table?: string; family?: string; chain?: string; handle?: number } | undefined;
    if (!r || r.table !== table || r.family !== 'ip') continue;
    out.set(r.chain!, [...(out.get(r.chain!) ?? []), r.handle!]);
  }
  return out;
}

test.serial(
  'a partial sync touches only the changed Service: other chains and the shared chains keep their rules (handles)',
  async (t) => {
    const c = await cluster(t, 'ipt-part', 3);
    const services = [0, 1, 2].map((i) =>
      svc(`s${i}`, { clusterIP: `10.96.0.${20 + i}`, type: 'NodePort', ports: tcpPort(80, 30090 + i) }),
    );
    const slices = [0, 1, 2].map((i) => slice(`s${i}-1`, `s${i}`, [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))]));
    await apply(c, { services, slices });
    const before = await handles(c, 'nat');
    const r = await apply(c, { slices: [slice('s1-1', 's1', [ep(podIP(0)), ep(podIP(2))])] });
    t.false(r.full);
    const after = await handles(c, 'nat');
    const svcOf = (text: string, name: string) =>
      new RegExp(`-A KUBE-SERVICES .*default/${name}:p cluster IP.* -j (KUBE-SVC-\\w+)`).exec(text)![1]!;
    const text = await save(c);
    const changed = svcOf(text, 's1');
    for (const [chain, hs] of before) {
      if (chain === changed || chain.startsWith('KUBE-SEP-')) continue;
      t.deepEqual(after.get(chain), hs, `${chain} untouched`);
    }
    t.notDeepEqual(after.get(changed), before.get(changed), 'the changed Service chain was rewritten');
    t.is(before.size - after.size, 1, 'one endpoint chain fewer');
    t.false(pods(await tcpMany(c, 'client', '10.96.0.21', 80, 10)).has('pod2'));
  },
);

test.serial(
  'canary: `iptables-nft -t nat -F` and `-X` by someone else is repaired by a full resync (measured)',
  async (t) => {
    const c = await makeCluster(t, 'ipt-can', 1);
    await c.nodeAgent.call(P, 'start', { ...MODEL, canaryIntervalMs: 200 });
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10' })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
    const flushedAt = Date.now();
    await c.node.run('iptables-nft', '-t', 'nat', '-F');
    await c.node.run('iptables-nft', '-t', 'nat', '-X');
    let done: { at: number; done?: number; error?: string } | undefined;
    for (let i = 0; i < 100 && !done?.done; i++) {
      await new Promise((r) => setTimeout(r, 100));
      done = (await c.nodeAgent.call<{ at: number; done?: number; error?: string }[]>(P, 'driftSyncs'))[0];
      t.falsy(done?.error);
    }
    t.truthy(done?.done, 'a full resync ran');
    t.log(`flush to repaired: ${done!.done! - flushedAt} ms (canary polled every 200 ms)`);
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
    await c.nodeAgent.call(P, 'stop');
  },
);

test.serial(
  'a cold start cut into many batches converges; a second full sync writes nothing; a restart keeps the shared rules',
  async (t) => {
    const c = await makeCluster(t, 'ipt-cold', 3);
    await c.nodeAgent.call(P, 'start', { ...MODEL, maxBatchBytes: 65536 });
    const n = 40;
    const services = Array.from({ length: n }, (_, i) =>
      svc(`s${i}`, { clusterIP: `10.96.1.${i + 1}`, type: 'NodePort', ports: tcpPort(80, 30100 + i) }),
    );
    const slices = Array.from({ length: n }, (_, i) =>
      slice(`s${i}-1`, `s${i}`, [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))]),
    );
    const r = await apply(c, { services, slices });
    t.true(r.batches > 1, `batches: ${r.batches}`);
    t.deepEqual(r.errors, []);
    for (const i of [0, n - 1]) t.regex(await tcp(c, 'client', `10.96.1.${i + 1}`, 80), /^pod[123] /);
    const again = await apply(c, {}, true);
    t.true(again.full);
    t.is(again.batches, 0, 'nothing differs, nothing is sent');
    // A restarted proxier (no memory) refills the service chains (their rules are not listed)
    // but keeps the rules of the shared chains, handles and all.
    const shared = (await handles(c, 'nat')).get('KUBE-SERVICES');
    await c.nodeAgent.call(P, 'start', MODEL);
    const restarted = await apply(c, { services, slices });
    t.true(restarted.full);
    t.deepEqual((await handles(c, 'nat')).get('KUBE-SERVICES'), shared);
    const again2 = await apply(c, {}, true);
    t.is(again2.batches, 0, 'and then trusts what it wrote');
    for (const i of [0, n - 1]) t.regex(await tcp(c, 'client', `10.96.1.${i + 1}`, 80), /^pod[123] /);
  },
);

test.serial(
  'chains upstream kube-proxy left (iptables-nft form) for Services that are gone are removed; its jumps are adopted',
  async (t) => {
    const c = await cluster(t, 'ipt-upst', 1);
    const restore = [
      '*nat',
      ':KUBE-SERVICES - [0:0]',
      ':KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]',
      ':KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]',
      '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      '-A KUBE-SERVICES -d 10.96.0.99/32 -p tcp -m comment --comment "old/gone:p cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA',
      '-A KUBE-SVC-AAAAAAAAAAAAAAAA -j KUBE-SEP-BBBBBBBBBBBBBBBB',
      '-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080',
      'COMMIT',
      '',
    ].join('\n');
    const r = await c.node.exec('iptables-nft-restore', ['--noflush'], { input: restore });
    t.is(r.code, 0, r.stderr);
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10' })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    const text = await save(c);
    t.false(text.includes('AAAAAAAAAAAAAAAA'), 'the stale service chain is gone');
    t.false(text.includes('BBBBBBBBBBBBBBBB'), 'the stale endpoint chain is gone');
    t.is(
      linesOf(text, 'PREROUTING').filter((l) => l.includes('KUBE-SERVICES')).length,
      1,
      'the jump upstream inserted is ours now, not doubled',
    );
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
  },
);

test.serial(
  'masqueradeAll: pod-to-ClusterIP traffic is masqueraded too (restart with the option: a full sync rewrites the Service)',
  async (t) => {
    const c = await cluster(t, 'ipt-masq', 2);
    const objects = {
      services: [svc('m', { clusterIP: '10.96.0.150' })],
      slices: [slice('m-1', 'm', [ep(podIP(0)), ep(podIP(1))])],
    };
    await apply(c, objects);
    const kept = await tcpMany(c, 0, '10.96.0.150', 80, 12);
    t.true(
      kept.every((a) => (a.startsWith('pod1 ') ? a.endsWith(podGateway(0)) : a.endsWith(` ${podIP(0)}`))),
      `default: pod source kept: ${kept.join(', ')}`,
    );
    await c.nodeAgent.call(P, 'start', { ...MODEL, masqueradeAll: true });
    await apply(c, objects);
    const masq = await tcpMany(c, 0, '10.96.0.150', 80, 12);
    t.true(
      pods(masq).size === 2 && masq.every((a) => / 10\.244\.[12]\.1$/.test(a)),
      `masqueradeAll: every answer saw the node: ${masq.join(', ')}`,
    );
  },
);

test.serial(
  '--iptables-localhost-nodeports=false: no route_localnet, no martian rule, 127.0.0.1 node ports do not answer',
  async (t) => {
    const c = await makeCluster(t, 'ipt-nolo', 1);
    await c.nodeAgent.call(P, 'start', { ...MODEL, localhostNodePorts: false });
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    t.deepEqual(await c.nodeAgent.call(P, 'sysctlValues'), {});
    const text = await save(c);
    t.false(text.includes('block incoming localnet connections'));
    t.regex(
      text,
      /-A KUBE-SERVICES ! -d 127\.0\.0\.0\/8 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS/,
    );
    t.notRegex(await c.nodeAgent.call<string>(ECHO, 'tcp', '127.0.0.1', 30080), /^pod/);
    t.regex(await tcp(c, 'client', NODE_IP, 30080), /^pod1 /);
  },
);

test.serial(
  'mode switches: nftables or ipvs mode starting removes the iptables mode chains; iptables mode starting removes the nftables table',
  async (t) => {
    const c = await cluster(t, 'ipt-switch', 1);
    await c.node.run('iptables-nft', '-A', 'FORWARD', '-s', '192.0.2.3/32', '-j', 'DROP');
    const objects = {
      services: [svc('web', { clusterIP: '10.96.0.10' })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    };
    await apply(c, objects);
    // A restart in iptables mode keeps its own rules.
    await c.nodeAgent.call(P, 'removeOtherModes', 'iptables');
    t.regex(await save(c), /KUBE-SVC-/);
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
    await c.nodeAgent.call(P, 'removeOtherModes', 'nftables');
    let text = await save(c);
    t.deepEqual(kubeLeft(text), [], text);
    t.deepEqual(foreign(text), ['-A FORWARD -s 192.0.2.3/32 -j DROP']);

    await apply(c, objects, true);
    await c.nodeAgent.call(P, 'removeOtherModes', 'ipvs');
    t.false((await save(c)).includes('KUBE-SVC-'), 'ipvs mode removes the iptables mode chains');

    await c.node.run('nft', 'add', 'table', 'ip', 'kube-proxy-ts');
    await c.node.run('nft', 'add', 'table', 'ip', 'someone-else');
    await c.nodeAgent.call(P, 'removeOtherModes', 'iptables');
    const tables = await c.node.run('nft', 'list', 'tables');
    t.false(tables.includes('kube-proxy-ts'), tables);
    t.true(tables.includes('someone-else'));
    text = await save(c);
    t.deepEqual(foreign(text), ['-A FORWARD -s 192.0.2.3/32 -j DROP']);
  },
);

test.serial(
  '`iptables-nft -t nat -F` alone (the canary chains survive it): the next full sync notices and rewrites every chain',
  async (t) => {
    const c = await cluster(t, 'ipt-flush', 1);
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10' })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    await c.node.run('iptables-nft', '-t', 'nat', '-F');
    t.is(await tcp(c, 'client', '10.96.0.10', 80), 'ETIMEDOUT');
    const r = await apply(c, {}, true);
    t.true(r.full);
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
  },
);

/** Waits (bounded) for the syncs the drift watch asked for to finish; returns how many ran. */
async function driftRepaired(t: ExecutionContext, c: Cluster): Promise<number> {
  type Entry = { at: number; done?: number; error?: string };
  for (let i = 0; i < 200; i++) {
    const syncs = await c.nodeAgent.call<Entry[]>(P, 'driftSyncs');
    for (const s of syncs) t.falsy(s.error);
    if (syncs.length > 0 && syncs.every((s) => s.done !== undefined)) {
      await c.nodeAgent.call(P, 'clearDriftSyncs');
      return syncs.length;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  t.fail('no repair sync finished within 10 s');
  return 0;
}

test.serial(
  "a service port's own chains changed by someone else (-F KUBE-SVC, a KUBE-SEP rule or chain deleted, -F KUBE-SERVICES, our PREROUTING jump deleted, -t nat -F): repaired by the sync the announcement asks for",
  async (t) => {
    const c = await makeCluster(t, 'ipt-drift', 1);
    await c.nodeAgent.call(P, 'start', { ...MODEL, watchDrift: true });
    await apply(c, {
      services: [svc('web', { clusterIP: '10.96.0.10' })],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /);
    const chainOf = async (prefix: string): Promise<string> => {
      const m = new RegExp(`^:(${prefix}-[A-Z0-9]+) `, 'm').exec(await save(c));
      if (!m) throw new Error(`no ${prefix} chain`);
      return m[1]!;
    };
    const svcChain = await chainOf('KUBE-SVC');
    const sepChain = await chainOf('KUBE-SEP');
    const before = await save(c);
    const tamper: [string, string[]][] = [
      [`-F ${svcChain}`, ['-t', 'nat', '-F', svcChain]],
      // The endpoint chain's DNAT rule (its second; the first marks hairpin traffic).
      [`-D ${sepChain} 2`, ['-t', 'nat', '-D', sepChain, '2']],
      ['-F KUBE-SERVICES', ['-t', 'nat', '-F', 'KUBE-SERVICES']],
      // Our jump in a built-in chain: the announcement carries the rule, and so its target.
      ['-D PREROUTING (our jump)', DELETE_OUR_PREROUTING_JUMP],
      ['-t nat -F', ['-t', 'nat', '-F']],
    ];
    // An endpoint chain deleted (after the service chain that jumps to it, in one transaction):
    // nothing of ours is trusted any more, every chain is written again.
    const restore = ['-F', svcChain, '-X', sepChain].join(' ');
    for (const [what, args] of [...tamper, [restore, []] as [string, string[]]]) {
      // (The repair may be done before the tampered state could be read back.)
      if (what === restore) {
        const input = `flush chain ip nat ${svcChain}\ndelete chain ip nat ${sepChain}\n`;
        const r = await c.node.exec('nft', ['-f', '-'], { input });
        t.is(r.code, 0, r.stderr);
      } else await c.node.run('iptables-nft', ...args);
      t.true((await driftRepaired(t, c)) >= 1, what);
      t.is(await save(c), before, `${what}: the rules are back as they were`);
      t.regex(await tcp(c, 'client', '10.96.0.10', 80), /^pod1 /, what);
    }
    // Nothing of ours touched since: a full sync sends nothing.
    t.is((await apply(c, {}, true)).batches, 0);
    await c.nodeAgent.call(P, 'stop');
  },
);
