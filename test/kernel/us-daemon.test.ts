// The real daemon (bin/kube-proxy-ts.js, a child process) in userspace mode, in the node
// namespace of a namespace cluster, fed from a manifest directory: traffic via ClusterIP and
// NodePort through the daemon's own sockets, its metrics, SIGTERM closing the sockets (and so
// ending the Service's traffic: the rules point at ports nobody listens on any more), a
// restart, --cleanup removing exactly ours (twice), rules of others untouched throughout.
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
const portals = (text: string) => text.split('\n').filter((l) => /KUBE-(PORTALS|NODEPORT)/.test(l));

test.serial(
  'userspace mode daemon: traffic through its sockets, metrics, SIGTERM, restart, --cleanup twice',
  async (t) => {
    const c = await makeCluster(t, 'usdmn', 3);
    const dir = await tempDir(t, 'us-manifests');
    const web = { name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, nodeName: 'node-a' };
    await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0), podIP(1), podIP(2)] }));
    await c.node.run('iptables-nft', '-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.1/32', '-j', 'ACCEPT');
    await c.node.run('iptables-nft', '-A', 'INPUT', '-s', '192.0.2.2/32', '-j', 'DROP');
    const theirs = foreign(await save(c));
    const sock = join(dir, 'control.sock');
    const args = nodeDaemonArgs(
      'userspace',
      { manifestDir: dir },
      [
        '--control-socket',
        sock,
        '--bind-address',
        '0.0.0.0',
        '--proxy-port-range',
        '40000-40099',
        '--iptables-min-sync-period',
        '100ms',
      ],
      { clusterCIDR: false },
    );
    let d = spawnDaemon(c.node, args);
    t.teardown(() => d.kill());
    const tcp = (ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
    const tcpMany = (ip: string, port: number, n: number) => c.clientAgent.call<string[]>(ECHO, 'tcpMany', ip, port, n);
    try {
      await pollUntil(
        'the ClusterIP to answer',
        async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined),
        20_000,
      );
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const answers = await tcpMany(VIP, 80, 6);
    t.deepEqual([...new Set(answers.map((a) => a.split(' ')[0]))].sort(), ['pod1', 'pod2', 'pod3'], answers.join(', '));
    t.regex(await tcp(NODE_IP, 30080), /^pod[123] /, 'node port');
    t.regex(await c.nodeAgent.call<string>(ECHO, 'tcp', VIP, 80), /^pod[123] /, 'from the node itself');
    const text = await save(c);
    const m =
      /-A KUBE-PORTALS-CONTAINER -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/web:http" -m tcp --dport 80 -j REDIRECT --to-ports (\d+)/.exec(
        text,
      );
    t.truthy(m, text);
    const port = Number(m![1]);
    t.true(port >= 40000 && port <= 40099, `--proxy-port-range: ${port}`);
    t.deepEqual(foreign(text), theirs);

    const metrics = (
      await c.nodeAgent.call<{ status: number; body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics')
    ).body;
    const accepted = Number(
      /^kubeproxyts_userspace_accepted_connections_total\{ip_family="IPv4"\} (\d+)$/m.exec(metrics)?.[1],
    );
    t.true(
      accepted >= 9,
      `accepted ${accepted}\n${metrics
        .split('\n')
        .filter((l) => l.includes('userspace'))
        .join('\n')}`,
    );

    // explain: the proxy socket and the rules, read back, agree with the last sync.
    const ex = await runDaemon(c.node, ['explain', 'default/web', '-o', 'json', '--control-socket', sock]);
    t.is(ex.code, 0, ex.stderr);
    type Explained = { ports: { kernel: { agrees: boolean; kernel: { where: string; key: string }[] } }[] };
    const kernel = (JSON.parse(ex.stdout) as Explained).ports[0]!.kernel;
    t.true(kernel.agrees, ex.stdout);
    t.true(
      kernel.kernel.some((e) => e.where === 'proxy socket' && e.key === `TCP 0.0.0.0:${port}`),
      ex.stdout,
    );
    t.true(
      kernel.kernel.some((e) => e.where === 'nat KUBE-NODEPORT-HOST'),
      ex.stdout,
    );

    d.signal('SIGTERM');
    t.deepEqual(await d.exited, { code: 0, signal: null }, d.log());
    t.notRegex(await tcp(VIP, 80), /^pod/, 'the sockets closed with the daemon: a restart ends Service traffic');

    d = spawnDaemon(c.node, args);
    await pollUntil(
      'the restarted daemon to answer',
      async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined),
      20_000,
    );
    t.is(portals(await save(c)).filter((l) => l.startsWith('-A KUBE-PORTALS-CONTAINER')).length, 1);
    d.signal('SIGTERM');
    await d.exited;

    for (let i = 0; i < 2; i++) {
      const r = await runDaemon(c.node, ['--cleanup']);
      t.is(r.code, 0, r.stderr);
    }
    const after = await save(c);
    t.deepEqual(portals(after), [], after);
    t.deepEqual(foreign(after), theirs);
  },
);
