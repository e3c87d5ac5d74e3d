// nftables mode's localhost NodePorts (KubeProxyNFTablesLocalhostNodePorts, upstream 1.37) with
// the real daemon in the node namespace, fed from a manifest directory, nodePortAddresses
// "localhost" and the node's subnet: without the gate nothing answers on 127.0.0.1:<NodePort>;
// with it, connections from the node reach a local and a remote endpoint over 127.0.0.1 and
// [::1], ClientIP affinity pins them, UDP to a loopback node port is rejected by the ruleset,
// a refused endpoint is skipped for the next, and the three kubeproxy_nftables_localhost_nodeport_*
// metrics count exactly what happened.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, NODE_IP, podIP, podIP6 } from '../helpers/cluster.ts';
import { pollUntil, spawnDaemon } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;

interface Svc {
  name: string;
  family: 'IPv4' | 'IPv6';
  clusterIP: string;
  protocol: 'TCP' | 'UDP';
  nodePort: number;
  affinity?: boolean;
  /** [address, nodeName] */
  endpoints: readonly (readonly [string, string])[];
}

function yaml(s: Svc): string {
  const eps = s.endpoints
    .map(([ip, node]) => `  - addresses: ["${ip}"]\n    conditions: {ready: true}\n    nodeName: ${node}`)
    .join('\n');
  const proto = s.protocol;
  return `apiVersion: v1
kind: Service
metadata: {name: ${s.name}, namespace: default}
spec:
  type: NodePort
  clusterIP: ${s.clusterIP}
  clusterIPs: ["${s.clusterIP}"]
  ipFamilies: [${s.family}]
  sessionAffinity: ${s.affinity ? 'ClientIP' : 'None'}
  ports:
  - {name: p, protocol: ${proto}, port: 80, targetPort: 8080, nodePort: ${s.nodePort}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${s.name}-1
  namespace: default
  labels: {kubernetes.io/service-name: ${s.name}}
addressType: ${s.family}
ports:
- {name: p, protocol: ${proto}, port: 8080}
endpoints:
${eps}
`;
}

const SERVICES: Svc[] = [
  // pod1 is this node's (node-a), pod2 another node's: both reachable from the node namespace.
  {
    name: 'web',
    family: 'IPv4',
    clusterIP: '10.96.0.10',
    protocol: 'TCP',
    nodePort: 30080,
    endpoints: [
      [podIP(0), 'node-a'],
      [podIP(1), 'node-b'],
    ],
  },
  {
    name: 'sticky',
    family: 'IPv4',
    clusterIP: '10.96.0.11',
    protocol: 'TCP',
    nodePort: 30081,
    affinity: true,
    endpoints: [
      [podIP(0), 'node-a'],
      [podIP(1), 'node-b'],
      [podIP(2), 'node-b'],
    ],
  },
  // The node's own address refuses port 8080 (nothing listens there): each connection fails over.
  {
    name: 'failover',
    family: 'IPv4',
    clusterIP: '10.96.0.13',
    protocol: 'TCP',
    nodePort: 30083,
    endpoints: [
      [NODE_IP, 'node-a'],
      [podIP(2), 'node-b'],
    ],
  },
  {
    name: 'dns',
    family: 'IPv4',
    clusterIP: '10.96.0.12',
    protocol: 'UDP',
    nodePort: 30053,
    endpoints: [[podIP(0), 'node-a']],
  },
  {
    name: 'web6',
    family: 'IPv6',
    clusterIP: 'fd00:96::10',
    protocol: 'TCP',
    nodePort: 30082,
    endpoints: [[podIP6(1), 'node-b']],
  },
];

test('localhost NodePorts in nftables mode: none without the gate; with it local and remote endpoints over 127.0.0.1 and ::1, affinity, UDP rejected, metrics', async (t) => {
  const c = await makeCluster(t, 'lnp', 3);
  const dir = await tempDir(t, 'localhost-nodeports');
  for (const s of SERVICES) await writeFile(join(dir, `${s.name}.yaml`), yaml(s));
  const args = (gate: boolean) =>
    nodeDaemonArgs('nftables', { manifestDir: dir }, [
      '--min-sync-period',
      '100ms',
      '--nodeport-addresses',
      'localhost,10.1.0.0/24',
      ...(gate ? ['--feature-gates', 'KubeProxyNFTablesLocalhostNodePorts=true'] : []),
    ]);
  const fromNode = (ip: string, port: number) => c.nodeAgent.call<string>(ECHO, 'tcp', ip, port);
  const fromClient = (ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
  const synced = () =>
    pollUntil(
      'the node port to answer',
      async () => ((await fromClient(NODE_IP, 30080)).startsWith('pod') ? true : undefined),
      20_000,
    );

  // Without the gate: the node IP serves the node port, loopback does not.
  let d = spawnDaemon(c.node, args(false));
  t.teardown(() => d.kill());
  try {
    await synced();
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  t.is(await fromNode('127.0.0.1', 30080), 'ECONNREFUSED', 'no listener without the gate');
  t.is(await fromNode('::1', 30082), 'ECONNREFUSED');
  t.regex(d.log(), /localhost NodePorts are not supported in nftables mode/);
  d.signal('SIGTERM');
  t.is((await d.exited).code, 0);

  d = spawnDaemon(c.node, args(true));
  try {
    await synced();
    await pollUntil(
      '127.0.0.1:30080 to answer',
      async () => ((await fromNode('127.0.0.1', 30080)).startsWith('pod') ? true : undefined),
      10_000,
    );
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  const web = await c.nodeAgent.call<string[]>(ECHO, 'tcpMany', '127.0.0.1', 30080, 6);
  t.deepEqual(
    [...new Set(web.map((a) => a.split(' ')[0]))].sort(),
    ['pod1', 'pod2'],
    `local and remote: ${web.join(', ')}`,
  );
  t.true((await fromNode('::1', 30082)).startsWith('pod2 '), 'IPv6 loopback reaches the IPv6 endpoint');
  const sticky = await c.nodeAgent.call<string[]>(ECHO, 'tcpMany', '127.0.0.1', 30081, 6);
  t.is(new Set(sticky.map((a) => a.split(' ')[0])).size, 1, `ClientIP affinity: ${sticky.join(', ')}`);
  t.true(sticky[0]!.startsWith('pod'));

  const failover = await c.nodeAgent.call<string[]>(ECHO, 'tcpMany', '127.0.0.1', 30083, 4);
  t.true(
    failover.every((a) => a.startsWith('pod3 ')),
    `a refused endpoint is skipped for the next: ${failover.join(', ')}`,
  );

  const udp = await c.nodeAgent.call<string[]>(ECHO, 'udpMany', '127.0.0.1', 30053, 3);
  t.false(
    udp.some((a) => a.startsWith('pod')),
    `UDP to a loopback node port is not served: ${udp.join(', ')}`,
  );

  const metrics = (await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics')).body;
  const metric = (name: string, labels: string) =>
    Number(new RegExp(`^kubeproxy_nftables_localhost_nodeport_${name}\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
  t.is(metric('listeners', 'ip_family="IPv4"'), 3, metrics);
  t.is(metric('listeners', 'ip_family="IPv6"'), 1);
  t.is(metric('listener_creation_failures_total', 'ip_family="IPv4"'), 0);
  t.is(metric('rejected_packets_total', 'ip_family="IPv4",protocol="UDP"'), 3, 'every UDP datagram sent was rejected');
  t.is(metric('rejected_packets_total', 'ip_family="IPv4",protocol="SCTP"'), 0);
  d.signal('SIGTERM');
  t.is((await d.exited).code, 0);
  t.is(await fromNode('127.0.0.1', 30080), 'ECONNREFUSED', 'the listeners end with the daemon');
});
