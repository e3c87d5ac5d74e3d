// Upstream's IPVS mode counts a failed iptables-restore of its companion rules in
// kubeproxy_sync_proxy_rules_iptables_restore_failures_total (ip_family label). Ours writes them
// over nfnetlink: a refused write fails the sync and counts once; other failed kernel calls and
// good syncs do not count. The real IpvsProxier over the fakes, the daemon's sync step.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { makeSync } from '../../../src/daemon/sync.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { IpvsProxier, IpvsSyncError } from '../../../src/proxier/ipvs/index.ts';
import type { CompanionSink } from '../../../src/proxier/ipvs/companion.ts';
import { harness, svc } from '../proxier/ipvs/harness.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

const NAME = 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total';

test('IPVS mode: a refused companion-rule write counts as an iptables restore failure', async (t) => {
  const h = harness();
  let refuse = true;
  const sink: CompanionSink = {
    write: () => (refuse ? Promise.reject(new Error('EINVAL')) : Promise.resolve(1)),
    remove: () => Promise.resolve(),
  };
  const proxier = new IpvsProxier({ family: 'IPv4' }, { ...h.deps, companion: sink });
  const metrics = createMetrics({ processMetrics: false, mode: 'ipvs', groups: MODES.ipvs.metrics.groups });
  const run = makeSync({
    pipelines: [{ family: 'IPv4', tracker: h.tracker, proxier }],
    metrics,
    logger: memoryLogger([]),
    now: () => 0,
  });
  const sync = () => run({ full: false, reason: 'kick', signal: new AbortController().signal });
  const value = async (): Promise<number | undefined> =>
    (await metrics.registry.getSingleMetric(NAME)!.get()).values.find((v) => v.labels.ip_family === 'IPv4')?.value;

  h.tracker.onService(undefined, svc('web'));
  const e = await t.throwsAsync(sync(), { instanceOf: IpvsSyncError });
  t.true(e!.report.companionFailed);
  t.is(await value(), 1);

  // Written again (the next sync is full) and accepted: no count.
  refuse = false;
  await sync();
  t.is(await value(), 1);

  // A failed IPVS call is not a restore failure.
  h.ipvsFake.refuse = () => 22; // EINVAL
  h.tracker.onService(undefined, svc('api', { clusterIP: '10.96.0.11' }));
  const other = await t.throwsAsync(sync(), { instanceOf: IpvsSyncError });
  t.falsy(other!.report.companionFailed);
  t.is(await value(), 1);
});
