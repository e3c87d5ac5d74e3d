// A 410 storm (issue 18): the API server answers every watch "too old resource version" (here
// after a bookmark, so that each watch looks healthy, the case that once relisted in a hot
// loop). The real daemon (nftables mode) relists, the first time at once and then with a
// growing back-off; what it programmed keeps answering; a Service created during the storm
// lands at the next relist; after the storm the watch holds again. The relist gaps, the log
// lines and the daemon's open files are logged.
import { readdirSync, readFileSync } from 'node:fs';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import type { LoggedRequest } from '../helpers/fake-apiserver.ts';
import { nodeDaemonArgs, startDaemon } from '../helpers/standalone.ts';

const API = new URL('./apiserver-agent.ts', import.meta.url).href;
/** The daemon's back-off (client-go's reflector defaults): 800 ms doubling up to 30 s, jitter on top. */
const BACKOFF = { initialMs: 800, maxMs: 30_000, factor: 2 };
/** Relists to see during the storm (the last gaps are 3.2 s and 6.4 s at least). */
const RELISTS = 5;

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

test.serial('a 410 storm: relists back off, rules keep answering, a change made meanwhile lands', async (t) => {
  t.timeout(300_000);
  const c = await makeCluster(t, 'api410', 1);
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
  const openFiles = () => readdirSync(`/proc/${d.pid}/fd`).length;
  const rssMiB = () =>
    Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${d.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
  const fdsBefore = openFiles();
  const rssBefore = rssMiB();

  const serviceLists = async () =>
    (await c.nodeAgent.call<LoggedRequest[]>(API, 'apiRequests')).filter(
      (r) => r.path === '/api/v1/services' && !r.watch && r.query['continue'] === undefined,
    );
  const before = (await serviceLists()).length;
  const logBefore = d.log().split('\n').length;
  await c.nodeAgent.call(API, 'apiGoneStorm', { as: 'event', bookmarkFirst: true });
  const relisted = (n: number) => async () => ((await serviceLists()).length >= before + n ? true : undefined);
  await pollUntil('the first relists of the storm', relisted(2), 60_000).catch(failWithLog);
  // Written during the storm: only a relist can bring it.
  for (const o of service('late', '10.96.0.11')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await pollUntil('the change made during the storm to land', answers('10.96.0.11'), 60_000, 50).catch(failWithLog);
  t.truthy(await answers('10.96.0.10')(), 'the programmed rules keep answering during the storm');
  await pollUntil(`${RELISTS} relists`, relisted(RELISTS), 120_000).catch(failWithLog);
  t.truthy(await answers('10.96.0.10')(), 'and still, later in the storm');
  const at = (await serviceLists()).slice(before).map((r) => r.at);
  const gaps = at.slice(1).map((a, i) => a - at[i]!);
  const sent = await c.nodeAgent.call<number>(API, 'apiGoneSent');
  const fdsDuring = openFiles();
  const rssDuring = rssMiB();
  const lines = d.log().split('\n').slice(logBefore);
  const retries = lines.filter((l) => /list\/watch failed; retrying|too old, relisting/.test(l));

  // The first 410 relists at once, each later one waits at least its back-off step: lower
  // bounds, which load cannot break.
  for (let i = 0; i < gaps.length; i++) {
    const floor = Math.min(BACKOFF.initialMs * BACKOFF.factor ** i, BACKOFF.maxMs);
    t.true(gaps[i]! >= floor, `gap ${i}: ${gaps[i]} ms, the back-off step is ${floor} ms`);
  }
  t.true(retries.length <= sent + 4, `${retries.length} log lines for ${sent} 410s`);
  t.regex(retries.join('\n'), /410 Expired: too old resource version/);

  const atEnd = (await serviceLists()).length;
  await c.nodeAgent.call(API, 'apiGoneStorm', null);
  await pollUntil('a relist after the storm', relisted(atEnd - before + 1), 120_000).catch(failWithLog);
  // The watch holds again: a change comes by it, not by a relist.
  await new Promise((r) => setTimeout(r, 1500));
  const listsAfter = (await serviceLists()).length;
  for (const o of service('after', '10.96.0.12')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await pollUntil('a change after the storm to land', answers('10.96.0.12'), 60_000, 50).catch(failWithLog);
  t.is((await serviceLists()).length, listsAfter, 'delivered by the watch, no relist');
  t.log(
    `gaps between relists (ms): ${gaps.join(', ')}; ${sent} 410s (every kind), ${retries.length} log lines; ` +
      `daemon fds: ${fdsBefore} before, ${fdsDuring} during the storm, ${openFiles()} after; ` +
      `RSS ${rssBefore}, ${rssDuring}, ${rssMiB()} MiB`,
  );
  t.log(retries.slice(0, 2).join('\n'));
});
