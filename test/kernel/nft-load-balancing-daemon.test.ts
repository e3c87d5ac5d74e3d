// --load-balancing through the daemon (standalone mode, nftables): the node default reaches
// the proxier, `trace` says the algorithm, and `trace --live` shows the picking rule of the
// port's own chain that the packet met.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { CLIENT_IP, ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { liveTraceOfConnect, traceTables } from '../helpers/trace-tables.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.10';

test.serial('--load-balancing round-robin: trace names it, trace --live shows the picking rule', async (t) => {
  const c = await makeCluster(t, 'lbd', 2);
  const dir = await tempDir(t, 'lb');
  const sock = join(dir, 'control.sock');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({
      name: 'web',
      clusterIP: VIP,
      port: 80,
      targetPort: 8080,
      nodeName: 'node-a',
      endpoints: [podIP(0), podIP(1)],
    }),
  );
  startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, [
      '--control-socket',
      sock,
      '--min-sync-period',
      '100ms',
      '--load-balancing',
      'round-robin',
    ]),
  );
  await pollUntil(
    'the ClusterIP to answer',
    async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod') ? true : undefined),
    20_000,
  );
  t.regex(await c.node.run('nft', 'list', 'table', 'ip', 'kube-proxy-ts'), /numgen inc mod 2 map @balance-cluster-/);

  const plain = await runDaemon(c.node, ['trace', '--from', CLIENT_IP, '--to', `${VIP}:80`, '--control-socket', sock]);
  t.is(plain.code, 0, plain.stderr);
  t.regex(
    plain.stdout,
    /note: load balancing round-robin \(node default\): the port's own chain: numgen inc mod n into its endpoints/,
  );

  const r = await liveTraceOfConnect(c.node, c.clientAgent, { from: CLIENT_IP, vip: VIP, port: 80, sock, echo: ECHO });
  t.is(r.code, 0, r.stderr);
  t.true(r.seen);
  const path = r.path;
  t.log(path.join('\n'));
  t.true(
    path.some((p) => /^kube-proxy-ts services rule goto service-[A-Z0-9]{8}-default\/web\/tcp\//.test(p)),
    path.join('\n'),
  );
  t.true(
    path.some((p) => /^kube-proxy-ts service-[A-Z0-9]{8}-default\/web\/tcp\/\S+ rule/.test(p)),
    path.join('\n'),
  );
  t.deepEqual(await traceTables(c.node), [], 'the arming table is gone');
});
