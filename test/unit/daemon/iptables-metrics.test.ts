// Upstream's iptables-mode metrics: the rule gauges from the SyncReport, and a failed sync
// counted as a restore failure (the kernel refused a transaction) and, when it was partial, as
// a partial-restore failure. The proxier's counting (SyncTally) is checked on its own.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { makeSync } from '../../../src/daemon/sync.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { IptRule } from '../../../src/netlink/nftables/iptables/rule.ts';
import { Plan } from '../../../src/proxier/iptables-nft/groups.ts';
import { SyncTally } from '../../../src/proxier/iptables/sync-tally.ts';
import { SyncFailedError } from '../../../src/proxier/types.ts';
import type { Proxier, SyncReport } from '../../../src/proxier/types.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

const rule = (table: IptRule['table'], chain: string): IptRule => ({
  table,
  chain,
  matches: [],
  target: { t: 'accept' } as never,
});

function pipeline(sync: Proxier['sync']) {
  const clock = new FakeClock(0);
  const logger = memoryLogger([]);
  const tracker = new ChangeTracker({ nodeName: 'n', family: 'IPv4' }, { logger, clock });
  const proxier: Proxier = { mode: 'iptables', sync, cleanup: () => Promise.resolve() };
  const metrics = createMetrics({ processMetrics: false, mode: 'iptables', groups: MODES.iptables.metrics.groups });
  const run = makeSync({ pipelines: [{ family: 'IPv4', tracker, proxier }], metrics, logger, now: () => clock.now() });
  const value = async (name: string, labels: Record<string, string>): Promise<number | undefined> => {
    const m = await metrics.registry.getSingleMetric(name)!.get();
    return m.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
  };
  return { run: () => run({ full: true, reason: 'kick', signal: new AbortController().signal }), value };
}

test('the rule gauges follow the report', async (t) => {
  const report: SyncReport = {
    full: true,
    servicesChanged: 1,
    kernelMs: 0,
    planMs: 0,
    errors: [],
    iptables: { total: { filter: 4, nat: 12 }, written: { filter: 0, nat: 5 } },
  };
  const p = pipeline(() => Promise.resolve(report));
  await p.run();
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_total', { ip_family: 'IPv4', table: 'nat' }), 12);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_total', { ip_family: 'IPv4', table: 'filter' }), 4);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_last', { ip_family: 'IPv4', table: 'nat' }), 5);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_last', { ip_family: 'IPv4', table: 'filter' }), 0);
});

test('a failed partial sync whose commit the kernel refused counts both failures; a failed read only the partial one', async (t) => {
  let fail = new SyncFailedError(new Error('EINVAL'), true, true);
  const p = pipeline(() => Promise.reject(fail));
  await t.throwsAsync(p.run(), { message: 'EINVAL' });
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_restore_failures_total', { ip_family: 'IPv4' }), 1);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', { ip_family: 'IPv4' }), 1);
  fail = new SyncFailedError(new Error('listing failed'), true, false);
  await t.throwsAsync(p.run());
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_restore_failures_total', { ip_family: 'IPv4' }), 1);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', { ip_family: 'IPv4' }), 2);
  fail = new SyncFailedError(new Error('EPERM'), false, true);
  await t.throwsAsync(p.run());
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_restore_failures_total', { ip_family: 'IPv4' }), 2);
  t.is(await p.value('kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total', { ip_family: 'IPv4' }), 2);
});

test('SyncTally: totals per owner without the built-in chains; written = rules sent; gone ports leave the total', (t) => {
  const tally = new SyncTally();
  tally.begin(true);
  tally.skeleton({
    chains: [],
    rules: [rule('nat', 'KUBE-SERVICES'), rule('nat', 'PREROUTING'), rule('filter', 'KUBE-FORWARD')],
  });
  tally.keep('a');
  tally.unit('a', {
    chains: [],
    rules: [rule('nat', 'KUBE-SVC-A'), rule('nat', 'KUBE-SEP-A'), rule('nat', 'KUBE-SERVICES')],
  });
  tally.keep('b');
  tally.unit('b', { chains: [], rules: [rule('nat', 'KUBE-SVC-B'), rule('filter', 'KUBE-EXTERNAL-SERVICES')] });
  const plan = new Plan();
  plan.rule('nat', 'add', { kind: 'rule', chain: 'KUBE-SVC-A', exprs: [] });
  plan.rule('nat', 'insert', { kind: 'rule', chain: 'KUBE-SERVICES', exprs: [] });
  plan.rule('nat', 'add', { kind: 'rule', chain: 'PREROUTING', exprs: [] });
  plan.rule('nat', 'delete', { kind: 'rule', chain: 'KUBE-SVC-X', exprs: [] });
  tally.plan(plan.groups);
  t.deepEqual(tally.commit(), { total: { filter: 2, nat: 5 }, written: { filter: 0, nat: 2 } });
  // A partial sync drops b; a full one keeps a unmade.
  tally.begin(false);
  tally.drop('b');
  t.deepEqual(tally.commit(), { total: { filter: 1, nat: 4 }, written: { filter: 0, nat: 0 } });
  tally.begin(true);
  tally.keep('a');
  t.deepEqual(tally.commit().total, { filter: 1, nat: 4 });
  tally.begin(true);
  t.deepEqual(tally.commit().total, { filter: 1, nat: 1 }, 'a port not in the desired state any more');
});

test('SyncTally: the watched sender notes a refused transaction, not an aborted one', async (t) => {
  const tally = new SyncTally();
  tally.begin(false);
  const sender = tally.watch({ runMessages: () => Promise.reject(new Error('EINVAL')) });
  const ac = new AbortController();
  ac.abort();
  await t.throwsAsync(sender.runMessages([], ac.signal));
  t.false(tally.commitFailed);
  await t.throwsAsync(sender.runMessages([]));
  t.true(tally.commitFailed);
  tally.begin(true);
  t.false(tally.commitFailed);
});
