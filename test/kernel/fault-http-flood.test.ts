// Bounded serving (issue 18): 1,000 local keep-alive clients looping on /metrics must not
// starve the sync loop. The real daemon in a namespace cluster, fed from a manifest
// directory; a Service added under the flood still lands, /healthz still answers, on the health
// port and on the metrics port the flood is on. The measured figures (idle and flooded change
// latency, /healthz latencies, the daemon's RSS and fds) are logged.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const FLOOD = new URL('./scenarios/http-flood.ts', import.meta.url).href;
const CLIENTS = 1000;

const rssMiB = async (pid: number): Promise<number> =>
  Math.round(Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);

test.serial('a /metrics flood of 1,000 clients: a change lands, /healthz answers on both ports', async (t) => {
  t.timeout(300_000);
  const c = await makeCluster(t, 'flood', 1);
  const dir = await tempDir(t, 'flood');
  const svc = (name: string, vip: string) =>
    writeFile(
      join(dir, `${name}.yaml`),
      serviceYAML({ name, clusterIP: vip, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
    );
  await svc('web', '10.96.0.10');
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }));
  const answers = (vip: string) => async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 100)).startsWith('pod1 ') ? true : undefined;
  const failWithLog = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  await pollUntil('the first ClusterIP to answer', answers('10.96.0.10'), 90_000).catch(failWithLog);

  const timedGet = (port: number, path: string) =>
    c.nodeAgent.call<{ status: number; ms: number }>(AGENT, 'timedGet', `http://127.0.0.1:${port}${path}`, 5000);
  /** Adds a Service and waits for its ClusterIP to answer; returns the ms it took. */
  const land = async (name: string, vip: string): Promise<number> => {
    const start = Date.now();
    await svc(name, vip);
    await pollUntil(`${name}'s ClusterIP to answer`, answers(vip), 60_000, 20).catch(failWithLog);
    return Date.now() - start;
  };

  // Past --min-sync-period after the last sync, so that each change is synced when it is seen.
  const settle = () => new Promise((r) => setTimeout(r, 2000));
  await settle();
  const idleChange = await land('idle', '10.96.0.11');
  const idleHealthz = await timedGet(10256, '/healthz');
  t.is(idleHealthz.status, 200);
  const idleRss = await rssMiB(d.pid);

  const flooder = await c.node.agent();
  await flooder.call(FLOOD, 'startFlood', 'http://127.0.0.1:10249/metrics', CLIENTS);
  t.teardown(() => flooder.call(FLOOD, 'stopFlood').then(() => undefined));
  // The flood is on once many requests have been answered.
  await pollUntil(
    'the flood to be answered',
    async () => ((await flooder.call<{ ok: number }>(FLOOD, 'floodCount')).ok >= 20 ? true : undefined),
    60_000,
  );

  await settle();
  const floodChange = await land('flooded', '10.96.0.12');
  const healthz = await timedGet(10256, '/healthz');
  t.is(healthz.status, 200, '/healthz answers under the flood');
  // The flood's clients wait in the render line on their connections; a health check on the
  // same port is answered at once, every time.
  const onMetricsPort: number[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await timedGet(10249, '/healthz');
    t.is(r.status, 200, '/healthz on the metrics port answers under the flood');
    onMetricsPort.push(r.ms);
  }
  const floodRss = await rssMiB(d.pid);
  const fds = (await readdir(`/proc/${d.pid}/fd`)).length;
  const counts = await flooder.call<{ ok: number; failed: number }>(FLOOD, 'stopFlood');
  t.log(
    `idle: change lands in ${idleChange} ms, /healthz ${idleHealthz.ms} ms, RSS ${idleRss} MiB; ` +
      `under ${CLIENTS} clients on /metrics: change lands in ${floodChange} ms, /healthz (10256) ${healthz.ms} ms, ` +
      `/healthz on the metrics port (10249) ${onMetricsPort.join(', ')} ms, RSS ${floodRss} MiB, ${fds} fds; ` +
      `flood: ${counts.ok} answered, ${counts.failed} failed or cut at its end`,
  );
  t.true(counts.ok > 0);
  t.is(d.log().match(/Rendering metrics failed/g), null);
});
