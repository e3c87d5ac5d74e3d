// The real daemon (bin/kube-proxy-ts.js, a child process) in iptables mode, in the node
// namespace of a namespace cluster, fed from a manifest directory: traffic via ClusterIP and
// NodePort, a manifest change, SIGTERM leaving the rules, a restart, a flush by someone else
// repaired, --cleanup removing exactly ours (twice), rules of others untouched throughout.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil, runDaemon, spawnDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.10';
const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;

async function save(c: Cluster): Promise<string> {
  return (await c.node.run('iptables-nft-save'))
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/, ''))
    .join('\n');
}
const foreign = (text: string) => text.split('\n').filter((l) => l.startsWith('-A ') && !l.includes('KUBE-'));
/**
 * KUBE-* lines left after a cleanup, less kubelet's KUBE-FIREWALL (its chain, jumps and martian
 * drop): like upstream's cleanup, ours leaves that chain to kubelet even when we created it.
 */
const kubeLeft = (text: string) => text.split('\n').filter((l) => l.includes('KUBE-') && !l.includes('KUBE-FIREWALL'));

test.serial(
  'iptables mode daemon: traffic, manifest change, SIGTERM keeps rules, restart, flush repaired, --cleanup twice',
  async (t) => {
    const c = await makeCluster(t, 'idmn', 3);
    const dir = await tempDir(t, 'ipt-manifests');
    const web = { name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, nodeName: 'node-a' };
    await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0), podIP(1), podIP(2)] }));
    const ipt = (...args: string[]) => c.node.run('iptables-nft', ...args);
    await ipt('-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.1/32', '-j', 'ACCEPT');
    await ipt('-t', 'nat', '-A', 'OUTPUT', '-d', '192.0.2.2/32', '-j', 'RETURN');
    await ipt('-A', 'FORWARD', '-s', '192.0.2.3/32', '-j', 'DROP');
    const theirs = foreign(await save(c));

    const args = nodeDaemonArgs('iptables', { manifestDir: dir }, [
      '--iptables-min-sync-period',
      '100ms',
      '--iptables-sync-period',
      '30s',
      '--iptables-masquerade-bit',
      '13',
    ]);
    let d = spawnDaemon(c.node, args);
    t.teardown(() => d.kill());
    const tcp = (ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
    const tcpMany = (ip: string, port: number, n: number) => c.clientAgent.call<string[]>(ECHO, 'tcpMany', ip, port, n);
    const answers = (what: string) =>
      pollUntil(what, async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined), 20_000);
    try {
      await answers('the ClusterIP to answer');
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const viaVip = await tcpMany(VIP, 80, 15);
    t.true(
      viaVip.every((a) => /^pod[123] 10\.244\.[123]\.1$/.test(a)),
      `ClusterIP answers, masqueraded: ${viaVip.join(', ')}`,
    );
    t.true((await tcpMany(NODE_IP, 30080, 6)).every((a) => /^pod[123] /.test(a)));
    let text = await save(c);
    t.regex(text, /-A KUBE-MARK-MASQ -j MARK --set-xmark 0x2000\/0x2000/, '--iptables-masquerade-bit 13');
    t.deepEqual(foreign(text), theirs);

    // Upstream's iptables metrics: our rules per table as iptables-nft-save lists them (less the
    // jumps in the built-in chains, as upstream counts them), and no failures.
    const metrics = (
      await c.nodeAgent.call<{ status: number; body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics')
    ).body;
    const metric = (name: string, labels: string) =>
      Number(new RegExp(`^${name}\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
    const ours = (table: string) => {
      const body = text.split('*' + table)[1]!.split('COMMIT')[0]!;
      return body.split('\n').filter((l) => /^-A KUBE-/.test(l)).length;
    };
    for (const table of ['nat', 'filter']) {
      t.is(
        metric('kubeproxy_sync_proxy_rules_iptables_total', `ip_family="IPv4",table="${table}"`),
        ours(table),
        `${table} total`,
      );
    }
    t.true(metric('kubeproxy_sync_proxy_rules_iptables_last', 'ip_family="IPv4",table="nat"') >= 0);
    t.is(metric('kubeproxy_sync_proxy_rules_iptables_restore_failures_total', 'ip_family="IPv4"') || 0, 0);
    t.regex(metrics, /kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total/);

    await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(2)] }));
    await pollUntil(
      'the new endpoint set',
      async () => ((await tcpMany(VIP, 80, 8)).every((a) => a.startsWith('pod3 ')) ? true : undefined),
      10_000,
      200,
    );

    d.signal('SIGTERM');
    t.deepEqual(await d.exited, { code: 0, signal: null }, d.log());
    t.true((await tcp(VIP, 80)).startsWith('pod3 '), 'traffic still flows with the daemon stopped');

    // A restart converges without duplicating anything.
    d = spawnDaemon(c.node, args);
    await pollUntil(
      'the restarted daemon to sync',
      () => Promise.resolve(/First full sync done/.test(d.log()) ? true : undefined),
      20_000,
    );
    text = await save(c);
    t.is(
      text
        .split('\n')
        .filter((l) => l === '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES').length,
      1,
    );
    t.deepEqual(foreign(text), theirs);

    // Someone flushes nat and deletes its chains in one transaction (as iptables-restore or a
    // firewalld reload does; `-F` then `-X` races the repair the announcements of `-F` start).
    const flushed = await c.node.exec('iptables-nft-restore', [], { input: '*nat\nCOMMIT\n' });
    t.is(flushed.code, 0, flushed.stderr);
    await answers('the flushed rules to be repaired');
    t.regex(d.log(), /our iptables chains were changed by someone else|Canary chain gone/);
    d.signal('SIGTERM');
    await d.exited;

    const first = await runDaemon(c.node, ['--cleanup']);
    t.is(first.code, 0, first.stderr);
    const second = await runDaemon(c.node, ['--cleanup']);
    t.is(second.code, 0, second.stderr);
    text = await save(c);
    t.deepEqual(kubeLeft(text), [], text);
    // Their nat rules went with their own flush; their filter rule is still there.
    t.deepEqual(
      foreign(text),
      theirs.filter((l) => l.startsWith('-A FORWARD ')),
    );
  },
);
