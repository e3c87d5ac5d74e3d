// Readiness as upstream (issue 18): when this node's Node arrives after the Services, the
// daemon waits for it (bounded, logged) before the first full sync, so that sync and READY=1
// come with the node's addresses; node ports then answer on the node IP only, never on every
// local address. The real daemon in API mode against the test API server, which has no Node
// until the test creates it.
import test from 'ava';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, startDaemon } from '../helpers/standalone.ts';

const API = new URL('./apiserver-agent.ts', import.meta.url).href;
const VIP = '10.96.0.10';
/** Another local address of the node (its link towards the gateway), not its Node's address. */
const OTHER_LOCAL_IP = '10.9.0.1';

const objects = [
  {
    kind: 'Service',
    metadata: { name: 'web', namespace: 'default' },
    spec: {
      type: 'NodePort',
      clusterIP: VIP,
      clusterIPs: [VIP],
      ipFamilies: ['IPv4'],
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30080 }],
    },
  },
  {
    kind: 'EndpointSlice',
    metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [podIP(0)], conditions: { ready: true }, nodeName: 'node-a' }],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  },
];

test.serial('a Node that arrives after the Services: the first sync and READY wait for it', async (t) => {
  t.timeout(240_000);
  const c = await makeCluster(t, 'nlate', 1);
  const port = await c.nodeAgent.call<number>(API, 'startPlainApiServer', objects);
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { master: `http://127.0.0.1:${port}` }));
  const failWithLog = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  const READY = 'First full sync done; ready';
  const WAITING = "Waiting for this node's Node";
  await pollUntil(
    'the daemon to wait for its Node (or to sync without it)',
    async () => (d.log().includes(WAITING) || d.log().includes(READY) ? true : undefined),
    90_000,
  ).catch(failWithLog);
  t.false(d.log().includes(READY), 'no sync, no READY before the Node is known');
  // Still waiting a moment later: the wait is for the Node, not for a first event.
  await new Promise((r) => setTimeout(r, 1000));
  t.false(d.log().includes(READY));

  await c.nodeAgent.call(API, 'apiUpsert', {
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
  });
  const tcp = (ip: string, p: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, p, 300);
  await pollUntil(
    'the NodePort to answer on the node IP',
    async () => ((await tcp(NODE_IP, 30080)).startsWith('pod1 ') ? true : undefined),
    60_000,
  ).catch(failWithLog);
  // The rules answer as soon as they are committed, a moment before the sync says so.
  await pollUntil('READY', async () => (d.log().includes(READY) ? true : undefined), 30_000).catch(failWithLog);
  const log = d.log();
  t.true(log.indexOf('Node arrived; starting the first sync') < log.indexOf(READY), 'READY after the Node arrived');
  // The first sync had the node's address: the node port is not open on its other addresses.
  t.false((await tcp(OTHER_LOCAL_IP, 30080)).startsWith('pod1 '), 'the node port is closed on another local address');
  t.true((await tcp(VIP, 80)).startsWith('pod1 '));
});
