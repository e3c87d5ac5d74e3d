// The real daemon (bin/kube-proxy-ts.js, a child process) in the node namespace of a
// namespace cluster, fed from a manifest directory: traffic via ClusterIP and NodePort,
// /healthz and /metrics, a manifest change applied, SIGTERM leaving the rules, --cleanup
// removing exactly ours (twice).
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import { normaliseNftJson } from '../helpers/nft-json.ts';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const VIP = '10.96.0.10';

test.serial(
  'standalone daemon: traffic, healthz, metrics, manifest changes, SIGTERM keeps rules, --cleanup twice',
  async (t) => {
    const c = await makeCluster(t, 'dmn', 3);
    const dir = await tempDir(t, 'manifests');
    const web = { name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, nodeName: 'node-a' };
    await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0), podIP(1), podIP(2)] }));

    // Something that is not ours, which --cleanup must leave alone.
    await c.node.run('nft', 'add', 'table', 'ip', 'someone-else');
    await c.node.run('nft', 'add', 'chain', 'ip', 'someone-else', 'input', '{ type filter hook input priority 0; }');
    await c.node.run('nft', 'add', 'rule', 'ip', 'someone-else', 'input', 'tcp dport 9 counter accept');
    const before = normaliseNftJson(await c.node.nftJson());

    const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }, ['--min-sync-period', '100ms']));
    const tcp = (ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
    const tcpMany = (ip: string, port: number, n: number) => c.clientAgent.call<string[]>(ECHO, 'tcpMany', ip, port, n);
    const get = (path: string, port = 10256) =>
      c.nodeAgent.call<{ status: number; type: string; body: string }>(
        AGENT,
        'httpGet',
        `http://127.0.0.1:${port}${path}`,
      );

    try {
      await pollUntil(
        'the ClusterIP to answer',
        async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined),
        20_000,
      );
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const viaVip = await tcpMany(VIP, 80, 15);
    t.true(
      viaVip.every((a) => /^pod[123] /.test(a)),
      `ClusterIP answers: ${viaVip.join(', ')}`,
    );
    t.true(new Set(viaVip.map((a) => a.split(' ')[0])).size >= 2, 'spread over more than one backend');
    const viaNodePort = await tcpMany(NODE_IP, 30080, 6);
    t.true(
      viaNodePort.every((a) => /^pod[123] /.test(a)),
      `NodePort answers: ${viaNodePort.join(', ')}`,
    );

    const healthz = await get('/healthz');
    t.is(healthz.status, 200);
    t.regex(healthz.type, /application\/json/);
    const body = JSON.parse(healthz.body) as { lastUpdated: string; currentTime: string; nodeEligible: boolean };
    t.true(body.nodeEligible);
    t.truthy(body.lastUpdated);
    const metrics = await get('/metrics', 10249);
    t.is(metrics.status, 200);
    t.regex(metrics.body, /kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]/);

    // A manifest change: only pod3 is left.
    await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(2)] }));
    await pollUntil(
      'the new endpoint set to be programmed',
      async () => ((await tcpMany(VIP, 80, 8)).every((a) => a.startsWith('pod3 ')) ? true : undefined),
      10_000,
      200,
    );

    // SIGTERM: exit 0, rules stay, traffic keeps flowing.
    d.signal('SIGTERM');
    const exit = await d.exited;
    t.deepEqual(exit, { code: 0, signal: null }, d.log());
    t.is((await c.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy-ts'])).code, 0, 'the table survives a stop');
    t.true((await tcp(VIP, 80)).startsWith('pod3 '), 'traffic still flows with the daemon stopped');

    // --cleanup removes ours and nothing else; twice is fine.
    const first = await runDaemon(c.node, ['--cleanup']);
    t.is(first.code, 0, first.stderr);
    t.not((await c.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy-ts'])).code, 0, 'our table is gone');
    t.is((await c.node.exec('nft', ['list', 'table', 'ip', 'someone-else'])).code, 0, 'a foreign table stays');
    // One summary line, last, of what was there: not a line per step.
    const lastLine = (r: { stdout: string; stderr: string }): string =>
      `${r.stdout}\n${r.stderr}`
        .split('\n')
        .filter((l) => l.trim() !== '')
        .at(-1) ?? '';
    t.regex(lastLine(first), /Cleanup done: removed nftables tables ip kube-proxy-ts, ip6 kube-proxy-ts/, first.stderr);
    t.notRegex(`${first.stdout}${first.stderr}`, /Cleaned up/);
    const second = await runDaemon(c.node, ['--cleanup']);
    t.is(second.code, 0, second.stderr);
    t.regex(lastLine(second), /Cleanup done: nothing to clean$/, second.stderr);
    const rest = await c.node.nftJson();
    t.deepEqual(
      rest.filter((o) => 'table' in o).map((o) => `${String(o['table']!['family'])} ${String(o['table']!['name'])}`),
      ['ip someone-else'],
    );
    t.deepEqual(normaliseNftJson(rest), before, 'the ruleset is exactly as it was before the daemon started');
  },
);

// Under systemd (Type=notify): a unix datagram NOTIFY_SOCKET, bound by a python3 child (Node
// has no unix datagram sockets), sees STATUS while waiting, READY=1 only after the first full
// sync (the Service already answers), then STOPPING=1 on SIGTERM.
const LISTENER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("LISTENING", flush=True)
while True:
    print(s.recv(65536).decode("utf-8", "replace").rstrip("\\n").replace("\\n", "|"), flush=True)
`;

test.serial('sd-notify: READY=1 after the first full sync, STATUS lines, STOPPING=1 on SIGTERM', async (t) => {
  const c = await makeCluster(t, 'dsd', 1);
  const dir = await tempDir(t, 'notify');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  const sock = join(dir, 'notify.sock');
  const py = spawn('python3', ['-c', LISTENER, sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void py.kill());
  const lines: string[] = [];
  const readyToListen = new Promise<void>((resolve) =>
    createInterface({ input: py.stdout }).on('line', (l) => (l === 'LISTENING' ? resolve() : lines.push(l))),
  );
  await readyToListen;

  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }, [], { clusterCIDR: false }), {
    env: { NOTIFY_SOCKET: sock, WATCHDOG_USEC: '2000000' },
  });
  await pollUntil('READY=1', () => Promise.resolve(lines.includes('READY=1') ? true : undefined), 20_000).catch(
    (e: unknown) => {
      t.log(d.log(), lines);
      throw e;
    },
  );
  t.true(
    (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod1 '),
    'the rules are in place once READY is sent',
  );
  const readyAt = lines.indexOf('READY=1');
  t.true(
    lines.slice(0, readyAt).some((l) => l.startsWith('STATUS=nftables: waiting')),
    lines.join('\n'),
  );
  t.true(
    lines.slice(0, readyAt).some((l) => l.startsWith('STATUS=nftables: 1 services, 1 endpoints')),
    lines.join('\n'),
  );
  await pollUntil('a watchdog ping', () => Promise.resolve(lines.includes('WATCHDOG=1') ? true : undefined), 5_000);

  d.signal('SIGTERM');
  t.is((await d.exited).code, 0);
  await pollUntil('STOPPING=1', () => Promise.resolve(lines.includes('STOPPING=1') ? true : undefined), 2_000);
  t.is(lines.filter((l) => l === 'READY=1').length, 1);
});
