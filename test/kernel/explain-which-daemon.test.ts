// Which daemon answered: the control socket is a file, so a network namespace does not scope
// it (the CLI in one namespace reaches another namespace's daemon). Two daemons (manifest
// directories, one namespace each, different node names, modes and sockets): explain and
// trace name the daemon that answered on their first line and in -o json, and --node /
// --hostname-override refuse the daemon of another node with one line and exit 4.
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { ExplainAnswer } from '../../src/explain/format.ts';
import { askDaemon } from '../../src/control/client.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { netnsFor } from '../helpers/netns.ts';
import type { Netns } from '../helpers/netns.ts';
import { startDaemon, tempDir } from '../helpers/standalone.ts';
import { writeFile } from 'node:fs/promises';

async function daemonOf(t: ExecutionContext, node: string, mode: string) {
  const ns = await netnsFor(t, `who-${node}`);
  const dir = await tempDir(t, `who-${node}`);
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: '10.96.0.10', port: 80, targetPort: 8080, endpoints: ['10.244.1.2'] }),
  );
  const socket = join(dir, 'control.sock');
  const d = startDaemon(t, ns, [
    '--proxy-mode',
    mode,
    '--manifest-dir',
    dir,
    '--hostname-override',
    node,
    '--healthz-bind-address',
    '',
    '--metrics-bind-address',
    '',
    '--control-socket',
    socket,
  ]);
  try {
    await pollUntil('the daemon to answer', async () => (await askDaemon(socket, { op: 'ping' })) ?? undefined, 20_000);
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  return { ns, socket, pid: d.pid, node, mode };
}

test('two daemons: explain and trace name the one that answered; --node refuses the other', async (t) => {
  const [a, b] = [await daemonOf(t, 'node-a', 'nftables'), await daemonOf(t, 'node-b', 'iptables')];
  // The CLI runs in a's namespace for both: the socket path, not the namespace, picks the daemon.
  const cli = (ns: Netns, socket: string, ...args: string[]) => runDaemon(ns, [...args, '--control-socket', socket]);
  for (const d of [a, b]) {
    const line = `daemon: node ${d.node}, mode ${d.mode}, pid ${d.pid}, socket ${d.socket}`;
    const explain = await cli(a.ns, d.socket, 'explain');
    t.is(explain.code, 0, explain.stderr);
    t.is(explain.stdout.split('\n')[0], line);
    const trace = await cli(a.ns, d.socket, 'trace', '--from', '10.244.1.9', '--to', '10.96.0.10:80');
    t.is(trace.code, 0, trace.stderr);
    t.is(trace.stdout.split('\n')[0], line);
    const json = JSON.parse(
      (await cli(a.ns, d.socket, 'explain', 'default/web', '-o', 'json')).stdout,
    ) as ExplainAnswer;
    t.deepEqual(json.daemon, { nodeName: d.node, mode: d.mode, pid: d.pid, socket: d.socket });
    const traced = JSON.parse(
      (await cli(a.ns, d.socket, 'trace', '--from', '10.244.1.9', '--to', '10.96.0.10:80', '-o', 'json')).stdout,
    ) as { daemon: unknown };
    t.deepEqual(traced.daemon, json.daemon);
    // The guard: the right node passes, the other is refused.
    t.is((await cli(a.ns, d.socket, 'explain', '--node', d.node)).code, 0);
    t.is(
      (
        await cli(
          a.ns,
          d.socket,
          'trace',
          '--from',
          '10.244.1.9',
          '--to',
          '10.96.0.10:80',
          '--hostname-override',
          d.node,
        )
      ).code,
      0,
    );
  }
  for (const [args, what] of [
    [['explain', '--node', 'node-a'], 'explain'],
    [['trace', '--from', '10.244.1.9', '--to', '10.96.0.10:80', '--hostname-override', 'node-a'], 'trace'],
  ] as const) {
    const r = await cli(a.ns, b.socket, ...args);
    t.is(r.code, 4, r.stderr);
    t.is(r.stdout, '');
    t.is(
      r.stderr,
      `kube-proxy-ts ${what}: the daemon on ${b.socket} serves node node-b (mode iptables, pid ${b.pid}), not node-a: is this the right --control-socket?\n`,
    );
  }
});
