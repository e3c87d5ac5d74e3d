// A service port the kernel refused is counted in kubeproxyts_service_ports_refused_total and
// logged; the sync itself succeeds.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger, type LogRecord } from '../../../src/base/logger.ts';
import { makeSync } from '../../../src/daemon/sync.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { Proxier } from '../../../src/proxier/types.ts';

test('refused service ports reach the metric and the log', async (t) => {
  const clock = new FakeClock(0);
  const records: LogRecord[] = [];
  const logger = memoryLogger(records);
  const tracker = new ChangeTracker({ nodeName: 'n', family: 'IPv4' }, { logger, clock });
  const problem = {
    what: 'service port "default/x:p/TCP" refused, skipped until it changes',
    cause: new Error('ENFILE'),
  };
  const proxier: Proxier = {
    mode: 'nftables',
    sync: () =>
      Promise.resolve({ full: true, servicesChanged: 0, kernelMs: 0, planMs: 0, errors: [problem], refused: 1 }),
    cleanup: () => Promise.resolve(),
  };
  const metrics = createMetrics({ processMetrics: false });
  const sync = makeSync({ pipelines: [{ family: 'IPv4', tracker, proxier }], metrics, logger, now: () => clock.now() });
  await sync({ full: true, reason: 'kick', signal: new AbortController().signal });
  const m = await metrics.registry.getSingleMetric('kubeproxyts_service_ports_refused_total')!.get();
  t.is(m.values.find((v) => v.labels['ip_family'] === 'IPv4')?.value, 1);
  t.truthy(records.find((r) => r.level === 'warn' && JSON.stringify(r).includes('ENFILE')));
});
