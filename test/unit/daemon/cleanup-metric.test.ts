// A sync whose separate clean-up failed counts kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { makeSync } from '../../../src/daemon/sync.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { Proxier } from '../../../src/proxier/types.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

test('cleanupFailed in a report increments the nftables cleanup-failure counter of that family', async (t) => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const tracker = new ChangeTracker({ nodeName: 'n', family: 'IPv6' }, { logger, clock });
  let failed = true;
  const proxier: Proxier = {
    mode: 'nftables',
    sync: () =>
      Promise.resolve({
        full: true,
        servicesChanged: 0,
        kernelMs: 0,
        planMs: 0,
        errors: [],
        ...(failed ? { cleanupFailed: true } : {}),
      }),
    cleanup: () => Promise.resolve(),
  };
  const metrics = createMetrics({ processMetrics: false, mode: 'nftables', groups: MODES.nftables.metrics.groups });
  const sync = makeSync({ pipelines: [{ family: 'IPv6', tracker, proxier }], metrics, logger, now: () => clock.now() });
  const signal = new AbortController().signal;
  await sync({ full: true, reason: 'kick', signal });
  failed = false;
  await sync({ full: true, reason: 'kick', signal });
  const text = await metrics.registry.metrics();
  t.regex(text, /kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total\{ip_family="IPv6"\} 1\n/);
});
