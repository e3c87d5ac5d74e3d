// detect-local by interface in nftables mode, with the real daemon and real packets: traffic
// to a ClusterIP from a local pod (arriving on the pod bridge / a pod interface) keeps its
// source, traffic from off the node (the client namespace) or from another interface is
// masqueraded, as upstream's nftables proxier does with `iifname != br0` /
// `iifname != "veth*"` in front of its masquerade mark.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CLIENT_IP, ECHO, makeCluster, podGateway, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.20';

/** One Service whose only endpoint is pod2 (10.244.2.2); the daemon with `flags`. */
async function start(t: ExecutionContext, c: Cluster, flags: string[]) {
  const dir = await tempDir(t, 'detect-local');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(1)] }),
  );
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, ['--min-sync-period', '100ms', ...flags], {
      clusterCIDR: false,
      healthz: '',
      metrics: '',
    }),
  );
  await pollUntil(
    'the ClusterIP to answer',
    async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod2 ') ? true : undefined),
    20_000,
  ).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });
  return d;
}

/** The source address pod2 saw for a connection to the ClusterIP from `agent`. */
async function seenFrom(agent: { call<T>(m: string, f: string, ...a: unknown[]): Promise<T> }): Promise<string> {
  const answer = await agent.call<string>(ECHO, 'tcp', VIP, 80);
  if (!answer.startsWith('pod2 ')) throw new Error(`expected pod2 to answer, got ${answer}`);
  return answer.split(' ')[1]!;
}

test.serial('InterfaceNamePrefix: pod traffic keeps its source, off-node traffic is masqueraded', async (t) => {
  const c = await makeCluster(t, 'dlp', 3);
  // The node's pod links are pod1..pod3: the prefix "pod" covers them, not to-client.
  await start(t, c, ['--detect-local-mode', 'InterfaceNamePrefix', '--pod-interface-name-prefix', 'pod']);
  t.is(await seenFrom(c.clientAgent), podGateway(1), 'off-node client: masqueraded to the node address towards pod2');
  t.is(await seenFrom(c.podAgents[0]!), podIP(0), 'pod1 (arrives on pod1): not masqueraded');
  t.not(await seenFrom(c.clientAgent), CLIENT_IP);
});

test.serial(
  'BridgeInterface: traffic from the bridge keeps its source; from another interface it is masqueraded',
  async (t) => {
    const c = await makeCluster(t, 'dlb', 3);
    // pod3 moves behind a bridge br0 (its gateway address moves to the bridge).
    const gw3 = `${podGateway(2)}/24`;
    await c.node.run('ip', 'addr', 'del', gw3, 'dev', 'pod3');
    await c.node.run('ip', 'link', 'add', 'br0', 'type', 'bridge');
    await c.node.run('ip', 'link', 'set', 'pod3', 'master', 'br0');
    await c.node.run('ip', 'addr', 'add', gw3, 'dev', 'br0');
    await c.node.run('ip', 'link', 'set', 'br0', 'up');
    await start(t, c, ['--detect-local-mode', 'BridgeInterface', '--pod-bridge-interface', 'br0']);
    t.is(await seenFrom(c.podAgents[2]!), podIP(2), 'pod3 (arrives on br0): not masqueraded');
    t.is(await seenFrom(c.podAgents[0]!), podGateway(1), 'pod1 (arrives on pod1, not the bridge): masqueraded');
    t.is(await seenFrom(c.clientAgent), podGateway(1), 'off-node client: masqueraded');
  },
);
