// Drift nobody announces is still repaired: with the periodic sync partial (it rewrites only
// what changed), a change to our table that the daemon never hears of (here: no drift watch
// at all) must be undone by the full sync that comes at most every full-sync period (an hour;
// shortened here). Real packets before, after the tampering and after the repair.
import test from 'ava';
import { ECHO, makeCluster, podGateway, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';

const Q = new URL('./scenarios/quiet-drift.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
const VIP = '10.96.0.77';
const TABLE_NAME = 'kube-proxy-ts';

test.serial(
  'an unannounced change to our table is repaired by the next full sync, not by the partial periodic ones',
  async (t) => {
    const c = await makeCluster(t, 'quiet', 1);
    t.teardown(() => c.nodeAgent.call(Q, 'stop'));
    await c.nodeAgent.call(
      Q,
      'start',
      MODEL,
      {
        services: [svc('web', { clusterIP: VIP, ports: [{ name: 'p', protocol: 'TCP', port: 80 }] })],
        slices: [slice('web-1', 'web', [ep(podIP(0))])],
      },
      { syncPeriodMs: 200, fullSyncPeriodMs: 3_000 },
    );
    const answer = `pod1 ${podGateway(0)}`;
    const tcp = () => c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80, 300);
    t.is(await tcp(), answer);

    const from = (await c.nodeAgent.call<unknown[]>(Q, 'runsSince', 0)).length;
    const r = await c.node.exec('nft', ['flush', 'map', 'ip', TABLE_NAME, 'service-ips']);
    t.is(r.code, 0, r.stderr);
    t.not(await tcp(), answer, 'the tampering took effect');
    await pollUntil('the ClusterIP to answer again', async () => ((await tcp()) === answer ? true : undefined), 20_000);

    const runs = await c.nodeAgent.call<{ full: boolean; reason: string }[]>(Q, 'runsSince', from);
    const firstFull = runs.findIndex((x) => x.full);
    t.true(firstFull >= 0, `a full sync repaired it: ${JSON.stringify(runs)}`);
    t.true(
      runs.slice(0, firstFull).some((x) => x.reason === 'periodic' && !x.full),
      `partial periodic runs came before it: ${JSON.stringify(runs)}`,
    );
  },
);
