// IP families as upstream decides them, with the real daemon: a dual-stack node (namespace)
// given only an IPv4 --cluster-cidr still serves its IPv6 Services (the IPv6 ClusterIP
// answers from the client namespace), and the daemon says which families it serves.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP, podIP6 } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const VIP4 = '10.96.0.10';
const VIP6 = 'fd00:96::10';

/** An IPv6 single-stack Service with its IPv6 EndpointSlice. */
function ipv6ServiceYAML(name: string, clusterIP: string, endpoints: readonly string[]): string {
  const eps = endpoints.map((ip) => `  - addresses: ["${ip}"]\n    conditions: {ready: true}`).join('\n');
  return `apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: default}
spec:
  type: ClusterIP
  clusterIP: ${clusterIP}
  clusterIPs: ["${clusterIP}"]
  ipFamilies: [IPv6]
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${name}-1
  namespace: default
  labels: {kubernetes.io/service-name: ${name}}
addressType: IPv6
ports:
- {name: http, protocol: TCP, port: 8080}
endpoints:
${eps}
`;
}

test('an IPv4 --cluster-cidr on a dual-stack node: the IPv6 Service answers too, and the families are logged', async (t) => {
  const c = await makeCluster(t, 'dfam', 2);
  const dir = await tempDir(t, 'families');
  await writeFile(
    join(dir, 'web4.yaml'),
    serviceYAML({ name: 'web4', clusterIP: VIP4, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  await writeFile(join(dir, 'web6.yaml'), ipv6ServiceYAML('web6', VIP6, [podIP6(1)]));

  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, ['--min-sync-period', '100ms'], { healthz: '', metrics: '' }),
  );
  const tcp = (ip: string) => c.clientAgent.call<string>(ECHO, 'tcp', ip, 80);
  try {
    await pollUntil(
      'the IPv4 ClusterIP to answer',
      async () => ((await tcp(VIP4)).startsWith('pod1 ') ? true : undefined),
      20_000,
    );
    await pollUntil(
      'the IPv6 ClusterIP to answer',
      async () => ((await tcp(VIP6)).startsWith('pod2 ') ? true : undefined),
      10_000,
    );
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  t.true((await tcp(VIP6)).startsWith('pod2 '), 'IPv6 Service reached its IPv6 endpoint');
  t.regex(d.log(), /kube-proxy running in dual-stack mode/);
  t.regex(d.log(), /IPv4,IPv6/);
  d.signal('SIGTERM');
  t.is((await d.exited).code, 0);
});
