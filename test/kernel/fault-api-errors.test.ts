// API errors the operator must be able to read (issue 18): a server certificate the daemon
// does not trust, a wrong token (401) and a forbidding RBAC (403). The real daemon against the
// test API server: each error is named in its log, it keeps retrying, it does not crash, and
// once the server lets it in it programs the Service.
import { selfSignedLoopbackCert } from '../helpers/tls.ts';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { Cluster } from '../helpers/cluster.ts';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const API = new URL('./apiserver-agent.ts', import.meta.url).href;
const VIP = '10.96.0.10';

const objects = [
  {
    kind: 'Node',
    metadata: { name: 'node-a' },
    status: { addresses: [{ type: 'InternalIP', address: '10.1.0.1' }] },
  },
  {
    kind: 'Service',
    metadata: { name: 'web', namespace: 'default' },
    spec: { clusterIP: VIP, clusterIPs: [VIP], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
  },
  {
    kind: 'EndpointSlice',
    metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [podIP(0)], conditions: { ready: true }, nodeName: 'node-a' }],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  },
];

function daemon(t: ExecutionContext, c: Cluster, master: string): DaemonProcess {
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { master }));
  return d;
}

/** Waits until the log has `count` lines matching `re`, the daemon running all along. */
async function logged(t: ExecutionContext, d: DaemonProcess, re: RegExp, count: number): Promise<string[]> {
  let exited = false;
  void d.exited.then(() => (exited = true));
  const lines = await pollUntil(
    `${count} log lines matching ${re}`,
    async () => {
      if (exited) throw new Error('the daemon exited');
      const l = d
        .log()
        .split('\n')
        .filter((x) => re.test(x));
      return l.length >= count ? l : undefined;
    },
    90_000,
  ).catch((e: unknown) => {
    t.log(d.log().slice(-4000));
    throw e;
  });
  t.false(exited, 'still running');
  return lines;
}

const answers = (c: Cluster) => async (): Promise<true | undefined> =>
  (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80, 300)).startsWith('pod1 ') ? true : undefined;

test.serial('401 (a wrong token) and 403 (RBAC) are named in the log, retried, and then it syncs', async (t) => {
  t.timeout(300_000);
  const c = await makeCluster(t, 'apierr', 1);
  const port = await c.nodeAgent.call<number>(API, 'startPlainApiServer', objects, 'the-right-token');
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  // --master without credentials: every request is 401.
  const d = daemon(t, c, `http://127.0.0.1:${port}`);
  const unauthorized = await logged(t, d, /list\/watch failed; retrying.*401/, 3);
  t.regex(unauthorized[0]!, /401 Unauthorized/);
  t.log(unauthorized[0]);
  await d.kill();

  // Authorised but forbidden for a while (RBAC not yet granted), then allowed.
  await c.nodeAgent.call(API, 'stopApiServer');
  const open = await c.nodeAgent.call<number>(API, 'startPlainApiServer', objects);
  await c.nodeAgent.call(API, 'apiFailNext', 12, 403);
  const d2 = daemon(t, c, `http://127.0.0.1:${open}`);
  const forbidden = await logged(t, d2, /list\/watch failed; retrying.*403/, 2);
  t.regex(forbidden[0]!, /403 Forbidden/);
  t.log(forbidden[0]);
  await pollUntil('the ClusterIP to answer once allowed', answers(c), 90_000).catch((e: unknown) => {
    t.log(d2.log().slice(-4000));
    throw e;
  });
});

test.serial('a server certificate the daemon does not trust: named in the log, retried, no crash', async (t) => {
  t.timeout(200_000);
  const c = await makeCluster(t, 'apitls', 1);
  const work = await tempDir(t, 'apitls');
  const tls = selfSignedLoopbackCert(work);
  const port = await c.nodeAgent.call<number>(API, 'startApiServer', tls, 'token', objects);
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  const d = daemon(t, c, `https://127.0.0.1:${port}`);
  const refused = await logged(t, d, /list\/watch failed; retrying/, 3);
  // The cause with its code, the CA it was checked against (--master alone: the system's) and
  // what to change; not Node's advice to run Node.js with --use-system-ca.
  t.regex(refused[0]!, /certificate \(https:\/\/127\.0\.0\.1:\d+\) is refused: self-signed certificate/);
  t.regex(refused[0]!, /\(DEPTH_ZERO_SELF_SIGNED_CERT\); checked against the system's CAs/);
  t.regex(refused[0]!, /certificate-authority or certificate-authority-data of the kubeconfig's cluster/);
  t.notRegex(refused.join('\n'), /use-system-ca|Node\.js/);
  t.log(refused[0]);
  t.is(
    (await c.nodeAgent.call<{ method: string }[]>(API, 'apiRequests')).length,
    0,
    'no request got through the TLS handshake',
  );
});
