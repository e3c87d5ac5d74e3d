// A hung API server (issue 18): it accepts connections and never answers, for longer than any
// time-out, then recovers. The real daemon keeps the programmed rules meanwhile (traffic
// flows), and a change made while it hung lands after the recovery; the time from recovery to
// the change answering is logged (the daemon's request deadlines bound it, not Node's 300 s).
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, startDaemon } from '../helpers/standalone.ts';

const API = new URL('./apiserver-agent.ts', import.meta.url).href;
const HUNG_MS = 20_000;

const service = (name: string, vip: string) => [
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

test.serial('a hung API server: rules stay, a change made meanwhile lands soon after it recovers', async (t) => {
  t.timeout(300_000);
  const c = await makeCluster(t, 'apihung', 1);
  const node = {
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: { addresses: [{ type: 'InternalIP', address: '10.1.0.1' }] },
  };
  const port = await c.nodeAgent.call<number>(API, 'startPlainApiServer', [node, ...service('web', '10.96.0.10')]);
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { master: `http://127.0.0.1:${port}` }));
  const failWithLog = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  const answers = (vip: string) => async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 100)).startsWith('pod1 ') ? true : undefined;
  await pollUntil('the first ClusterIP to answer', answers('10.96.0.10'), 90_000).catch(failWithLog);

  await c.nodeAgent.call(API, 'apiHung', true);
  // Written to the server's store while it hangs: nobody can read it until it recovers.
  for (const o of service('late', '10.96.0.11')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await new Promise((r) => setTimeout(r, HUNG_MS));
  t.truthy(await answers('10.96.0.10')(), 'the programmed rules stay while the server hangs');
  t.regex(d.log(), /no response within/, 'the hung requests hit their deadline');
  const recovered = Date.now();
  await c.nodeAgent.call(API, 'apiHung', false);
  await pollUntil('the change to land after the recovery', answers('10.96.0.11'), 60_000, 50).catch(failWithLog);
  t.log(`hung for ${HUNG_MS} ms; after the recovery, the change answered in ${Date.now() - recovered} ms`);
});
