// `kube-proxy-ts explain` and `trace` against the real daemon (bin/kube-proxy-ts.js in the
// node namespace of a namespace cluster, fed from a manifest directory), through its control
// socket: what trace predicts is what real packets meet (endpoints, masquerade, reject);
// explain reads the kernel back and shows drift after an element is deleted behind the
// daemon's back; with the daemon stopped both say so and exit non-zero.
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import type { PortExplanation } from '../../src/explain/explain.ts';
import type { TraceResult } from '../../src/explain/trace.ts';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { liveTraceOfConnect, traceTables } from '../helpers/trace-tables.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.10';
const EMPTY_VIP = '10.96.0.20';

/**
 * Tampers behind the daemon until the tampering stays. The sync runner is upstream's token
 * bucket with a burst of 2: under --min-sync-period 1h the drift watch's repair may still run at
 * once, on the run left after the first sync, and then none is left for an hour. So: tamper,
 * and if the repair comes (bounded wait), tamper again; either way it now stays.
 */
async function driftThatStays(tamper: () => Promise<unknown>, inSync: () => Promise<boolean>): Promise<void> {
  await tamper();
  for (let i = 0; i < 20; i++) {
    if (await inSync()) {
      await tamper();
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

test.serial('explain and trace through the control socket match the kernel and real packets', async (t) => {
  const c = await makeCluster(t, 'xpl', 3);
  const dir = await tempDir(t, 'explain');
  const sock = join(dir, 'run', 'control.sock');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({
      name: 'web',
      clusterIP: VIP,
      port: 80,
      nodePort: 30080,
      targetPort: 8080,
      nodeName: 'node-a',
      endpoints: [podIP(0), podIP(1), podIP(2)],
    }),
  );
  await writeFile(
    join(dir, 'empty.yaml'),
    serviceYAML({ name: 'empty', clusterIP: EMPTY_VIP, port: 80, targetPort: 8080, endpoints: [] }),
  );
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, [
      '--control-socket',
      sock,
      // No sync after the first one: the drift made below must still be there when asked (a
      // periodic resync or an event-driven repair would fix it first).
      '--min-sync-period',
      '1h',
      '--sync-period',
      '1h',
    ]),
  );
  const cli = async (...args: string[]) => runDaemon(c.node, [...args, '--control-socket', sock]);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '-o', 'json');
    if (r.code !== 0) throw new Error(`${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as T;
  };
  try {
    await pollUntil(
      'the ClusterIP to answer',
      async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod') ? true : undefined),
      20_000,
    );
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  t.is((await stat(sock)).mode & 0o777, 0o600, 'the socket is root only');

  // explain, all Services: a table, both in sync with the kernel.
  const table = await cli('explain');
  t.is(table.code, 0, table.stderr);
  t.regex(
    table.stdout,
    /default\/web:http\/TCP\s+IPv4\s+NodePort\s+10\.96\.0\.10:80,node:30080\s+iTP=Cluster eTP=Cluster\s+3\/3\s+in sync/,
  );
  t.regex(table.stdout, /default\/empty:http\/TCP .* 0\/0\s+in sync/);
  t.regex(table.stdout, /mode nftables; last sync: IPv4 \d{4}-/);

  const web = (await json<{ ports: PortExplanation[] }>('explain', 'default/web')).ports;
  t.is(web.length, 1);
  t.true(web[0]!.kernel!.agrees);
  t.true(
    web[0]!.kernel!.kernel.some(
      (e) => e.where === 'service-ips' && e.key === `${VIP} . tcp . 80` && e.value === 'goto pick-internal-3',
    ),
  );

  // trace from the client: three endpoints at 1/3, masqueraded (not from the pod network); real packets agree.
  const fromClient = await json<TraceResult>('trace', '--from', CLIENT_IP, '--to', `${VIP}:80/tcp`);
  t.is(fromClient.verdict, 'dnat');
  t.deepEqual(
    fromClient.endpoints.map((e) => e.endpoint).sort(),
    [podIP(0), podIP(1), podIP(2)].map((ip) => `${ip}:8080`),
  );
  t.true(fromClient.endpoints.every((e) => Math.abs(e.probability - 1 / 3) < 1e-9));
  t.true(fromClient.masquerade!.yes, fromClient.masquerade!.why);
  const answers = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', VIP, 80, 12);
  for (const a of answers) {
    const [pod, peer] = a.split(' ');
    t.true(
      fromClient.endpoints.some((e) => e.endpoint === `${podIP(Number(pod!.slice(3)) - 1)}:8080`),
      `${a} is an endpoint trace listed`,
    );
    t.not(peer, CLIENT_IP, `${a}: masqueraded as trace said`);
  }

  // trace from a pod: not masqueraded (pod network), except to itself (hairpin).
  const fromPod = await json<TraceResult>('trace', '--from', podIP(0), '--to', `${VIP}:80`);
  t.false(fromPod.masquerade!.yes, fromPod.masquerade!.why);
  t.deepEqual(
    fromPod.endpoints.filter((e) => e.hairpin).map((e) => e.endpoint),
    [`${podIP(0)}:8080`],
  );
  for (const a of await c.podAgents[0]!.call<string[]>(ECHO, 'tcpMany', VIP, 80, 9)) {
    const [pod, peer] = a.split(' ');
    if (pod === 'pod1') t.not(peer, podIP(0), `${a}: hairpin is masqueraded`);
    else t.is(peer, podIP(0), `${a}: the pod's own address is kept`);
  }

  // A node port from the client: the same endpoints.
  const np = await json<TraceResult>('trace', '--from', `${CLIENT_IP}:40000`, '--to', `${NODE_IP}:30080`);
  t.is(np.frontend?.kind, 'node-port');
  t.is(np.endpoints.length, 3);
  t.true((await c.clientAgent.call<string>(ECHO, 'tcp', NODE_IP, 30080)).startsWith('pod'));

  // No endpoints: trace says reject, and the connection is refused.
  const empty = await json<TraceResult>('trace', '--from', CLIENT_IP, '--to', `${EMPTY_VIP}:80`);
  t.is(empty.verdict, 'reject');
  t.is(await c.clientAgent.call<string>(ECHO, 'tcp', EMPTY_VIP, 80), 'ECONNREFUSED');
  const text = await cli('trace', '--from', CLIENT_IP, '--to', `${EMPTY_VIP}:80`);
  t.regex(text.stdout, /verdict: REJECT: default\/empty has no ready/);

  // Drift: an endpoint slot deleted behind the daemon's back.
  await driftThatStays(
    () => c.node.run('nft', 'delete', 'element', 'ip', 'kube-proxy-ts', 'endpoints-3', `{ ${VIP} . tcp . 80 . 0 }`),
    async () => (await json<{ ports: PortExplanation[] }>('explain', 'default/web:http')).ports[0]!.kernel!.agrees,
  );
  const drifted = (await json<{ ports: PortExplanation[] }>('explain', 'default/web:http')).ports[0]!;
  t.false(drifted.kernel!.agrees);
  t.deepEqual(
    drifted.kernel!.drift.missing.map((e) => `${e.where} ${e.key}`),
    [`endpoints-3 ${VIP} . tcp . 80 . 0`],
  );
  const report = await cli('explain', 'default/web');
  t.regex(report.stdout, /Kernel \(nftables\): DRIFT \(1 missing, 0 unexpected\)/);
  t.regex(report.stdout, /MISSING endpoints-3: 10\.96\.0\.10 \. tcp \. 80 \. 0/);

  const unknown = await cli('explain', 'default/nope');
  t.is(unknown.code, 1);
  t.regex(unknown.stderr, /no Service port default\/nope/);

  // Stopped: the socket is gone, and the CLI says there is no daemon.
  d.signal('SIGTERM');
  t.is((await d.exited).code, 0);
  await t.throwsAsync(stat(sock));
  for (const args of [['explain'], ['trace', '--from', CLIENT_IP, '--to', `${VIP}:80`]]) {
    const r = await cli(...args);
    t.is(r.code, 3, r.stderr);
    t.regex(
      r.stderr,
      /cannot reach the kube-proxy-ts daemon on .*control\.sock: no such socket; is the daemon running/,
    );
  }
});

test.serial(
  'trace --live: the real path of the next matching packet, and the arming table removed after',
  async (t) => {
    const c = await makeCluster(t, 'xlv', 2);
    const dir = await tempDir(t, 'live');
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
    const d = startDaemon(
      t,
      c.node,
      nodeDaemonArgs('nftables', { manifestDir: dir }, ['--control-socket', sock, '--min-sync-period', '100ms']),
    );
    await pollUntil(
      'the ClusterIP to answer',
      async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod') ? true : undefined),
      20_000,
    );

    // Nothing matches within the time-out: said so, and nothing is left armed.
    const idle = await runDaemon(c.node, [
      'trace',
      '--from',
      CLIENT_IP,
      '--to',
      `${VIP}:80`,
      '--live',
      '--live-timeout',
      '1',
      '--control-socket',
      sock,
    ]);
    t.is(idle.code, 0, idle.stderr);
    t.regex(idle.stdout, /live: no matching packet within 1\.\d s/);
    t.deepEqual(await traceTables(c.node), [], 'the arming table is gone');

    // A packet while it waits: the CLI runs until it has seen one; the client connects until then (bounded).
    const r = await liveTraceOfConnect(c.node, c.clientAgent, {
      from: CLIENT_IP,
      vip: VIP,
      port: 80,
      sock,
      echo: ECHO,
    });
    t.is(r.code, 0, r.stderr);
    t.true(r.seen);
    const path = r.path;
    t.log(path.join('\n'));
    t.true(path.includes('kube-proxy-ts nat-prerouting rule jump services'), path.join('\n'));
    t.true(
      path.some((p) => p === 'kube-proxy-ts services rule goto pick-internal-2'),
      path.join('\n'),
    );
    t.true(
      path.some((p) => p.startsWith('kube-proxy-ts pick-internal-2 rule')),
      path.join('\n'),
    );
    t.deepEqual(await traceTables(c.node), [], 'the arming table is gone');

    // A daemon killed mid-trace leaves its arming table: --cleanup removes it with the rest
    // (fault-trace-sessions: the next start removes it too).
    await c.node.run('nft', 'add', 'table', 'ip', 'kube-proxy-ts-trace-1-1-1');
    await c.node.run('nft', 'add', 'table', 'ip', 'kube-proxy-ts-trace');
    await d.kill();
    const cl = await runDaemon(c.node, ['--cleanup']);
    t.is(cl.code, 0, cl.stderr);
    t.deepEqual(await traceTables(c.node), [], '--cleanup removed the arming tables');
  },
);

test.serial(
  "explain in iptables mode: the port's chains and shared rules read back, then drift after a rule is deleted behind the daemon",
  async (t) => {
    const c = await makeCluster(t, 'xip', 2);
    const dir = await tempDir(t, 'explain-ipt');
    const sock = join(dir, 'control.sock');
    await writeFile(
      join(dir, 'web.yaml'),
      serviceYAML({
        name: 'web',
        clusterIP: VIP,
        port: 80,
        nodePort: 30080,
        targetPort: 8080,
        nodeName: 'node-a',
        endpoints: [podIP(0), podIP(1)],
      }),
    );
    // No resync after the first: the rule deleted below must still be missing when asked.
    const d = startDaemon(
      t,
      c.node,
      nodeDaemonArgs('iptables', { manifestDir: dir }, [
        '--control-socket',
        sock,
        '--iptables-min-sync-period',
        '1h',
        '--iptables-sync-period',
        '1h',
      ]),
    );
    try {
      await pollUntil(
        'the ClusterIP to answer',
        async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod') ? true : undefined),
        20_000,
      );
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const explain = async () => {
      const r = await runDaemon(c.node, ['explain', 'default/web:http', '-o', 'json', '--control-socket', sock]);
      if (r.code !== 0) throw new Error(`explain: exit ${r.code}: ${r.stderr}`);
      return (JSON.parse(r.stdout) as { ports: PortExplanation[] }).ports[0]!;
    };
    const port = await explain();
    t.is(port.kernel!.mode, 'iptables');
    t.true(port.kernel!.agrees, JSON.stringify(port.kernel!.drift));
    const where = (w: string) => port.kernel!.kernel.filter((e) => e.where === w).map((e) => e.key);
    const portal = where('nat KUBE-SERVICES');
    t.is(portal.length, 1, portal.join('\n'));
    t.regex(
      portal[0]!,
      /^-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-/,
    );
    // The node port's rule, and upstream's localhost one before it that counts in nfacct.
    const nodePorts = where('nat KUBE-NODEPORTS');
    t.is(nodePorts.length, 2, nodePorts.join('\n'));
    t.regex(
      nodePorts[0]!,
      /^-A KUBE-NODEPORTS -d 127\.0\.0\.0\/8 .*--nfacct-name +localhost_nps_accepted_pkts -j KUBE-EXT-/,
    );
    t.is(port.kernel!.kernel.filter((e) => e.where === 'chain' && / KUBE-SEP-/.test(e.key)).length, 2);
    const text = await runDaemon(c.node, ['explain', 'default/web', '--control-socket', sock]);
    t.regex(text.stdout, /Kernel \(iptables\): in sync/);

    // The portal rule deleted as an operator would: explain shows it missing.
    const deletePortal = async (): Promise<void> => {
      const lines = (await c.node.run('iptables-nft', '-t', 'nat', '-S', 'KUBE-SERVICES'))
        .split('\n')
        .filter((l) => l.startsWith('-A '));
      const index = lines.findIndex((l) => l.includes('default/web:http cluster IP'));
      if (index < 0) throw new Error(`no portal rule to delete:\n${lines.join('\n')}`);
      await c.node.run('iptables-nft', '-t', 'nat', '-D', 'KUBE-SERVICES', String(index + 1));
    };
    await driftThatStays(deletePortal, async () => (await explain()).kernel!.agrees);
    const drifted = await explain();
    t.false(drifted.kernel!.agrees);
    t.deepEqual(
      drifted.kernel!.drift.missing.map((e) => e.key),
      [portal[0]],
    );
    t.deepEqual(drifted.kernel!.drift.unexpected, []);
    const report = await runDaemon(c.node, ['explain', 'default/web', '--control-socket', sock]);
    t.regex(report.stdout, /Kernel \(iptables\): DRIFT \(1 missing, 0 unexpected\)/);
    t.regex(report.stdout, /MISSING nat KUBE-SERVICES: -A KUBE-SERVICES -d 10\.96\.0\.10\/32/);
    d.signal('SIGTERM');
    t.is((await d.exited).code, 0);
    const cl = await runDaemon(c.node, ['--cleanup']);
    t.is(cl.code, 0, cl.stderr);
  },
);
