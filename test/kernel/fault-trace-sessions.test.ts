// `trace --live` sessions through the real daemon (nftables mode, a namespace cluster, its
// control socket): two at once each arm their own table (named after the daemon's pid),
// each reports the packet it asked for, the first to finish leaves the other's rules in
// place; a daemon SIGKILLed mid-trace leaves its table, and the next start removes it (and
// the earlier versions' shared table) but keeps a table whose owner still runs.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { CLIENT_IP, ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import type { ExecResult } from '../helpers/netns.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';
import { traceTables } from '../helpers/trace-tables.ts';

const VIP1 = '10.96.0.10';
const VIP2 = '10.96.0.20';

interface LiveAnswer {
  live: { seen: boolean; path: { table: string; chain: string; type: string; verdict?: string }[] };
}

/** The pick chain the services map sent the traced packet to ("pick-internal-2"). */
function pickChain(r: ExecResult): string {
  if (r.code !== 0) throw new Error(`trace exited ${r.code}: ${r.stderr}`);
  const a = JSON.parse(r.stdout) as LiveAnswer;
  if (!a.live.seen) throw new Error('no packet seen');
  const goto = a.live.path.find((e) => e.chain === 'services' && e.verdict?.startsWith('goto pick-'));
  if (goto === undefined) throw new Error(`no services verdict in ${JSON.stringify(a.live.path)}`);
  if (a.live.path.some((e) => e.table.startsWith('kube-proxy-ts-trace'))) throw new Error('arming events in the path');
  return goto.verdict!.slice('goto '.length);
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks), read naively. */
const startOf = (pid: number): string => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]!;

test.serial(
  'concurrent trace --live sessions: own tables, own packets; a SIGKILLed one is cleaned at the next start',
  async (t) => {
    t.timeout(300_000);
    const c = await makeCluster(t, 'trs', 2);
    const dir = await tempDir(t, 'trs');
    const sock = join(dir, 'control.sock');
    await writeFile(
      join(dir, 'web.yaml'),
      serviceYAML({ name: 'web', clusterIP: VIP1, port: 80, targetPort: 8080, endpoints: [podIP(0)] }) +
        '---\n' +
        serviceYAML({ name: 'web2', clusterIP: VIP2, port: 80, targetPort: 8080, endpoints: [podIP(0), podIP(1)] }),
    );
    const args = nodeDaemonArgs('nftables', { manifestDir: dir }, ['--control-socket', sock]);
    let d = startDaemon(t, c.node, args);
    const answers = (vip: string) => async (): Promise<true | undefined> =>
      (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 200)).startsWith('pod') ? true : undefined;
    const fail = (e: unknown): never => {
      t.log(d.log().slice(-5000));
      throw e;
    };
    await pollUntil('both ClusterIPs to answer', async () => (await answers(VIP1)()) && answers(VIP2)(), 90_000).catch(
      fail,
    );
    const trace = (vip: string) => {
      let done = false;
      const result = runDaemon(
        c.node,
        ['trace', '--from', CLIENT_IP, '--to', `${vip}:80/tcp`, '--live', '--live-timeout', '40', '-o', 'json'].concat(
          '--control-socket',
          sock,
        ),
        60_000,
      ).finally(() => (done = true));
      return { result, done: () => done };
    };
    /** Connects to vip until the session has seen a packet (bounded). */
    const feed = async (vip: string, s: { done(): boolean }): Promise<void> => {
      for (let i = 0; i < 40 && !s.done(); i++) {
        await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 200).catch(() => '');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };

    // Two sessions at once: two tables, both named after the daemon.
    const a = trace(VIP1);
    const b = trace(VIP2);
    const both = await pollUntil(
      'two trace tables',
      async () => {
        const names = await traceTables(c.node);
        return names.length === 2 ? names : undefined;
      },
      20_000,
    ).catch(fail);
    t.log(both.join(', '));
    for (const n of both) t.regex(n, new RegExp(`^ip kube-proxy-ts-trace-${d.pid}-\\d+-\\d+$`));

    // A packet to VIP1 only: session A reports it; B saw it too (every session hears every
    // traced packet) but it was not B's, and B's rules are still armed.
    await feed(VIP1, a);
    const pickA = pickChain(await a.result);
    t.false(b.done(), 'B still waits for its own packet');
    t.is((await traceTables(c.node)).length, 1, "A removed its table only, B's stays");
    await feed(VIP2, b);
    const pickB = pickChain(await b.result);
    // The services map sends a Service to the pick chain of its endpoint count: web has one, web2 two.
    t.deepEqual(
      [pickA, pickB],
      ['pick-internal-1', 'pick-internal-2'],
      "each session reported its own Service's packet",
    );
    t.deepEqual(await traceTables(c.node), [], 'both tables gone');

    // SIGKILL mid-trace: the table stays behind.
    const killed = trace(VIP1);
    const left = await pollUntil('the third session armed', async () => {
      const names = await traceTables(c.node);
      return names.length === 1 ? names[0] : undefined;
    }).catch(fail);
    const oldPid = d.pid;
    await d.kill();
    const k = await killed.result;
    t.not(k.code, 0, 'the CLI says the daemon went away');
    t.deepEqual(await traceTables(c.node), [left!]);
    // Beside it: the earlier versions' shared table, a dead owner's IPv6 one, and one whose
    // owner runs (this test process, pid and start time).
    const liveOwned = `kube-proxy-ts-trace-${process.pid}-${startOf(process.pid)}-7`;
    await c.node.run('nft', 'add', 'table', 'ip', 'kube-proxy-ts-trace');
    await c.node.run('nft', 'add', 'table', 'ip6', 'kube-proxy-ts-trace-4194304-1-1');
    await c.node.run('nft', 'add', 'table', 'ip', liveOwned);

    d = startDaemon(t, c.node, args);
    // The killed daemon's rules still answer: wait for the new one's first sync instead.
    await pollUntil(
      'the restarted daemon ready',
      async () => (d.log().includes('First full sync done') ? true : undefined),
      90_000,
    ).catch(fail);
    t.deepEqual(await traceTables(c.node), [`ip ${liveOwned}`], 'only the table whose owner runs is kept');
    t.regex(d.log(), new RegExp(`Removed a trace --live table whose owner is gone .*ownerPid=${oldPid}`));
    t.not(d.pid, oldPid);

    // And --cleanup (daemon stopped) removes every trace table, its owner running or not.
    await d.kill();
    const cl = await runDaemon(c.node, ['--cleanup']);
    t.is(cl.code, 0, cl.stderr);
    t.deepEqual(await traceTables(c.node), []);
  },
);
