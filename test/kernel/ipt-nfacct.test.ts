// upstream's nfacct counters in iptables mode, with the real daemon in the node namespace of a
// namespace cluster: the two rules as iptables-nft-save prints upstream's ruleset, the objects
// as the `nfacct` tool (an independent reader) lists them, both metrics rising by exactly the
// packets sent (localhost NodePort connections from the node; forged INVALID segments through
// the node's forward path), and --cleanup deleting our objects only.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { hash16 } from '../../src/proxier/iptables/index.ts';
import { CLIENT_IP, ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil, runDaemon, spawnDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.10';
const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const FORGE = fileURLToPath(new URL('./scenarios/forge-tcp.py', import.meta.url));
const EXT = `KUBE-EXT-${hash16('default/web:httptcp')}`;
const INVALID = 'kubeproxy_iptables_ct_state_invalid_dropped_packets_total';
const LOCALHOST = 'kubeproxy_iptables_localhost_nodeports_accepted_packets_total';

const ourLines = async (c: Cluster): Promise<string[]> =>
  (await c.node.run('iptables-nft-save')).split('\n').filter((l) => l.includes('nfacct'));

async function metric(c: Cluster, name: string): Promise<number | undefined> {
  const r = await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics');
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(r.body);
  return m ? Number(m[1]) : undefined;
}

/** `nfacct list` in the node: name -> packets. */
async function nfacctList(c: Cluster): Promise<Map<string, number>> {
  const out = await c.node.run('nfacct', 'list');
  return new Map([...out.matchAll(/pkts = (\d+), bytes = \d+ \} = (\S+);/g)].map((m) => [m[2]!, Number(m[1])]));
}

test.serial('iptables mode: nfacct rules as upstream prints them, both metrics count exactly, --cleanup', async (t) => {
  const c = await makeCluster(t, 'infa', 1);
  const dir = await tempDir(t, 'ipt-nfacct');
  const web = { name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, nodeName: 'node-a' };
  await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0)] }));
  await c.node.run('nfacct', 'add', 'someone_elses');
  const args = nodeDaemonArgs('iptables', { manifestDir: dir }, ['--iptables-min-sync-period', '100ms']);
  const d = spawnDaemon(c.node, args);
  t.teardown(() => d.kill());
  const tcpMany = (agent: Cluster['nodeAgent'], ip: string, port: number, n: number) =>
    agent.call<string[]>(ECHO, 'tcpMany', ip, port, n);
  await pollUntil(
    'the ClusterIP to answer',
    async () => ((await tcpMany(c.clientAgent, VIP, 80, 1))[0]?.startsWith('pod') ? true : undefined),
    20_000,
  ).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });

  t.deepEqual(await ourLines(c), [
    '-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP',
    `-A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j ${EXT}`,
  ]);
  t.deepEqual([...(await nfacctList(c)).keys()].sort(), [
    'ct_state_invalid_dropped_pkts',
    'localhost_nps_accepted_pkts',
    'someone_elses',
  ]);

  // Localhost NodePort: one packet per connection takes the nat rules (the first; the rest follow conntrack).
  const local0 = (await metric(c, LOCALHOST))!;
  const answers = await tcpMany(c.nodeAgent, '127.0.0.1', 30080, 5);
  t.true(
    answers.every((a) => a.startsWith('pod1 ')),
    answers.join(', '),
  );
  t.is(await metric(c, LOCALHOST), local0 + 5);
  t.is((await nfacctList(c)).get('localhost_nps_accepted_pkts'), local0 + 5, 'the metric is what the kernel counted');

  // INVALID: segments of no connection, forwarded by the node towards the pod, dropped and counted.
  const invalid0 = (await metric(c, INVALID))!;
  t.is((await c.client.run('python3', FORGE, CLIENT_IP, podIP(0), '8080', '7')).trim(), 'sent 7');
  await pollUntil(
    'the forged segments to be counted',
    async () => ((await metric(c, INVALID))! >= invalid0 + 7 ? true : undefined),
    5_000,
    100,
  );
  t.is(await metric(c, INVALID), invalid0 + 7);
  t.is((await nfacctList(c)).get('ct_state_invalid_dropped_pkts'), invalid0 + 7);

  d.signal('SIGTERM');
  await d.exited;
  const cleanup = await runDaemon(c.node, ['--cleanup']);
  t.is(cleanup.code, 0, cleanup.stderr);
  t.deepEqual([...(await nfacctList(c)).keys()], ['someone_elses'], 'only ours deleted');
  t.deepEqual(await ourLines(c), []);
});
