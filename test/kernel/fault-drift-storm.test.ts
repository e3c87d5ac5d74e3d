// A repair storm is bounded (issue 18): someone deleting our nftables table over and over
// must not make the daemon sync more often than --min-sync-period allows (as upstream's
// BoundedFrequencyRunner bounds every sync), and the table is repaired once the tampering
// stops. Syncs are counted through the daemon's own metrics.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const VIP = '10.96.0.10';
const MIN_SYNC_MS = 1000;
const TAMPERS = 40;

test.serial('repeated tampering: repairs bounded by --min-sync-period, the table repaired at the end', async (t) => {
  t.timeout(240_000);
  const c = await makeCluster(t, 'storm', 1);
  const dir = await tempDir(t, 'storm');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, ['--sync-period', '10m', '--min-sync-period', `${MIN_SYNC_MS}ms`]),
  );
  const failWithLog = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  const answers = async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80, 100)).startsWith('pod1 ') ? true : undefined;
  await pollUntil('the ClusterIP to answer', answers, 90_000).catch(failWithLog);
  const fullSyncs = async (): Promise<number> => {
    const r = await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics');
    const m = /^kubeproxy_sync_full_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\d+)$/m.exec(r.body);
    if (!m) throw new Error('no full sync count in /metrics');
    return Number(m[1]);
  };

  const before = await fullSyncs();
  const start = Date.now();
  let deleted = 0;
  for (let i = 0; i < TAMPERS; i++) {
    // The table may be gone already (deleted again before the repair): only a deletion counts.
    if ((await c.node.exec('nft', ['delete', 'table', 'ip', 'kube-proxy-ts'])).code === 0) deleted++;
    await new Promise((r) => setTimeout(r, 50));
  }
  await pollUntil('the ClusterIP to answer after the storm', answers, 20_000, 20).catch(failWithLog);
  const after = await fullSyncs();
  const elapsed = Date.now() - start;
  const syncs = after - before;
  // One sync at once, then at most one per min-sync-period (the runner's bound), plus the one in flight.
  const bound = Math.ceil(elapsed / MIN_SYNC_MS) + 2;
  t.log(`${deleted} of ${TAMPERS} deletions took effect over ${elapsed} ms; ${syncs} full syncs (bound ${bound})`);
  t.true(deleted >= 2, 'the table was deleted again after a repair');
  t.true(syncs >= 1, 'repaired');
  t.true(syncs <= bound, `${syncs} syncs in ${elapsed} ms exceed one per --min-sync-period`);
  t.regex(d.log(), /changed by someone else; repairing now/);
});
