// The userspace proxy's descriptor budget: the real daemon in userspace mode, started with a
// low RLIMIT_NOFILE (prlimit: soft 1024, hard 6400), raises its soft limit to the hard one and
// gives the proxy the limit less its reserve. Long-lived connections from a client past a
// Service port's share (half the budget), then past the whole budget: the excess is reset at
// once and counted; /healthz, another Service and syncs keep working throughout (no EMFILE);
// once the connections close, the budget is free again.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { BIN, pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { systemTool } from '../helpers/netns.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const HOLD = new URL('./scenarios/conn-hold.ts', import.meta.url).href;
const SOFT = 1024;
const HARD = 6400;
const STREAM_PORT = 9000;

test.serial(
  'connections past the budget are refused and counted; health, other Services and syncs go on',
  async (t) => {
    t.timeout(180_000);
    const c = await makeCluster(t, 'usbud', 2);
    await c.podAgents[0]!.call(ECHO, 'serveStream', 'pod1', STREAM_PORT);
    const dir = await tempDir(t, 'usbud');
    const svc = (name: string, vip: string, pod: number, targetPort: number) =>
      writeFile(
        join(dir, `${name}.yaml`),
        serviceYAML({ name, clusterIP: vip, port: 80, targetPort, endpoints: [podIP(pod)] }),
      );
    await svc('hold1', '10.96.0.30', 0, STREAM_PORT);
    await svc('hold2', '10.96.0.32', 0, STREAM_PORT);
    await svc('other', '10.96.0.31', 1, 8080);
    const args = nodeDaemonArgs('userspace', { manifestDir: dir }, ['--iptables-min-sync-period', '100ms'], {
      clusterCIDR: false,
    });
    const d = startDaemon(t, c.node, args, {
      command: [systemTool('prlimit'), `--nofile=${SOFT}:${HARD}`, process.execPath, BIN],
    });
    const answers = (vip: string) => async (): Promise<true | undefined> =>
      (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80)).startsWith('pod') ? true : undefined;
    await pollUntil('the other Service to answer', answers('10.96.0.31'), 60_000).catch((e: unknown) => {
      t.log(d.log().slice(-5000));
      throw e;
    });

    const limits = await readFile(`/proc/${d.pid}/limits`, 'utf8');
    t.regex(limits, new RegExp(`Max open files\\s+${HARD}\\s+${HARD}`), 'the soft limit raised to the hard one');
    const metrics = async (): Promise<Map<string, number>> => {
      const r = await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics');
      const m = new Map<string, number>();
      for (const line of r.body.split('\n'))
        if (line.startsWith('kubeproxyts_userspace_')) m.set(line.split(' ')[0]!, Number(line.split(' ')[1]));
      return m;
    };
    const healthz = async () =>
      (await c.nodeAgent.call<{ status: number }>(AGENT, 'httpGet', 'http://127.0.0.1:10256/healthz')).status;
    const before = await metrics();
    const budget = before.get('kubeproxyts_userspace_descriptor_budget')!;
    // The reserve wanted (4,096 HTTP connections, 1,024 others) is more than half of 6,400: half each.
    t.is(budget, HARD / 2);
    t.regex(d.log(), /The open file limit is low/);
    const share = Math.floor(budget / 2 / 2); // connections one port may hold: half the budget, 2 descriptors each
    const refusedOf = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0) - (o['proxied'] ?? 0);

    // Past one port's share: the rest of the budget stays for the others.
    const first = await c.clientAgent.call<Record<string, number>>(HOLD, 'holdMany', '10.96.0.30', 80, share + 150);
    t.teardown(() => c.clientAgent.call(HOLD, 'releaseAll').then(() => undefined));
    t.is(first['proxied'], share, JSON.stringify(first));
    t.is(await healthz(), 200);
    t.true(await answers('10.96.0.31')(), 'another Service answers');

    // Past the whole budget.
    // Read once the check's connection above has closed: the same figure twice, 200 ms apart.
    let inUse = (await metrics()).get('kubeproxyts_userspace_descriptors_in_use')!;
    for (let i = 0; i < 25; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const now = (await metrics()).get('kubeproxyts_userspace_descriptors_in_use')!;
      if (now === inUse) break;
      inUse = now;
    }
    const second = await c.clientAgent.call<Record<string, number>>(HOLD, 'holdMany', '10.96.0.32', 80, share + 150);
    t.is(second['proxied'], Math.floor((budget - inUse) / 2), JSON.stringify(second));
    t.is(await healthz(), 200, '/healthz answers with the budget spent');
    // With the whole budget spent, any Service's new connection is refused at once, and counted.
    t.is(await c.clientAgent.call<string>(ECHO, 'tcp', '10.96.0.31', 80), 'ECONNRESET');
    const spent = await metrics();
    const overBudget = spent.get('kubeproxyts_userspace_over_budget_connections_total{ip_family="IPv4"}');
    t.is(overBudget, refusedOf(first) + refusedOf(second) + 1);

    // A sync with the budget spent: a new Service gets its socket and rules.
    await svc('late', '10.96.0.33', 1, 8080);
    await pollUntil(
      'the new Service to be programmed',
      async () => ((await c.node.run('iptables-nft-save', '-t', 'nat')).includes('10.96.0.33/32') ? true : undefined),
      30_000,
    );
    t.is(
      await c.clientAgent.call<number>(HOLD, 'heldCount'),
      first['proxied']! + second['proxied']!,
      'held connections live on',
    );

    // Released: the budget is free again, the new Service answers.
    await c.clientAgent.call(HOLD, 'releaseAll');
    await pollUntil('the new Service to answer', answers('10.96.0.33'), 30_000);
    await pollUntil(
      'the held connections to be gone',
      async () =>
        (await metrics()).get('kubeproxyts_userspace_active_connections{ip_family="IPv4"}') === 0 ? true : undefined,
      30_000,
    );
    t.notRegex(d.log(), /EMFILE|ENFILE/);
    t.log(
      `RLIMIT_NOFILE ${SOFT}:${HARD} -> soft ${HARD}; budget ${budget} descriptors, one port's share ${share} connections; ` +
        `${share + 150} to one port: ${JSON.stringify(first)}; ${share + 150} to another: ${JSON.stringify(second)}; ` +
        `over budget counted ${overBudget}`,
    );
  },
);
