// The set-up the API-server fault tests share: a one-pod namespace cluster, the test API server
// (apiserver-agent.ts) on the node holding node-a and one Service "web" (10.96.0.10 → pod1:8080),
// and the real daemon in nftables mode watching it, synced once "web" answers.
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, startDaemon } from '../helpers/standalone.ts';

export const API = new URL('./apiserver-agent.ts', import.meta.url).href;
export const WEB_VIP = '10.96.0.10';

/** A Service with one ready endpoint on pod1, and its slice. */
export const serviceObjects = (name: string, vip: string) => [
  {
    kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: { clusterIP: vip, clusterIPs: [vip], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
  },
  {
    kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [podIP(0)], conditions: { ready: true }, nodeName: 'node-a' }],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  },
];

export interface ApiFaultSetup {
  readonly c: Cluster;
  readonly d: DaemonProcess;
  /** A poll condition: the ClusterIP answers from pod1. */
  answers(vip: string): () => Promise<true | undefined>;
  /** For pollUntil(...).catch(): logs the daemon's last lines, then fails. */
  failWithLog(e: unknown): never;
}

export async function daemonOnTestApi(t: ExecutionContext, name: string): Promise<ApiFaultSetup> {
  const c = await makeCluster(t, name, 1);
  const node = {
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: { addresses: [{ type: 'InternalIP', address: '10.1.0.1' }] },
  };
  const port = await c.nodeAgent.call<number>(API, 'startPlainApiServer', [node, ...serviceObjects('web', WEB_VIP)]);
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { master: `http://127.0.0.1:${port}` }));
  const failWithLog = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  const answers = (vip: string) => async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 100)).startsWith('pod1 ') ? true : undefined;
  await pollUntil('the first ClusterIP to answer', answers(WEB_VIP), 90_000).catch(failWithLog);
  return { c, d, answers, failWithLog };
}
