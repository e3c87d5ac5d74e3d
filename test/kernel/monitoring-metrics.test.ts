// deploy/monitoring/ against the real daemon: every metric the alerting rules and the dashboard
// read is on a running daemon's /metrics in nftables, iptables and userspace mode (each in a
// namespace of its own, fed from a manifest directory, with --service-traffic-metrics), except
// those the README's table (ONLY_IN) gives to other modes, which must then be absent. IPVS mode
// needs the QEMU kernel; the unit test holds its metrics to the code's registration instead.
// The nftables daemon's other ops pages (/statusz, /flagz, /metrics/slis) are read too.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import type { Mode } from '../helpers/monitoring.ts';
import { familiesNamed, familiesOnPage, ONLY_IN } from '../helpers/monitoring.ts';
import { netnsFor } from '../helpers/netns.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const RUN: readonly Mode[] = ['nftables', 'iptables', 'userspace'];

type Get = (path: string) => Promise<{ status: number; type: string; body: string }>;

/** The daemon in `mode` in a fresh namespace; its /metrics once the first sync is counted, and a getter. */
async function scrape(t: ExecutionContext, mode: Mode): Promise<{ page: string; get: Get }> {
  const ns = await netnsFor(t, `mon-${mode.slice(0, 4)}`);
  const dir = await tempDir(t, `mon-${mode}`);
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: '10.96.0.10', port: 80, targetPort: 8080, endpoints: ['10.244.1.2'] }),
  );
  const d = startDaemon(
    t,
    ns,
    nodeDaemonArgs(mode, { manifestDir: dir }, ['--service-traffic-metrics', '--proxy-port-range', '40000-40009']),
  );
  const agent = await ns.agent();
  const get: Get = (path) => agent.call(AGENT, 'httpGet', `http://127.0.0.1:10249${path}`);
  try {
    const page = await pollUntil(
      `${mode} mode's first sync on /metrics`,
      async () => {
        const { body } = await get('/metrics');
        return /^kubeproxy_sync_proxy_rules_duration_seconds_count\{[^}]*\} [1-9]/m.test(body) ? body : undefined;
      },
      20_000,
    );
    return { page, get };
  } catch (e) {
    t.log(d.log());
    throw e;
  }
}

test('every metric of the dashboard and the alerting rules is on /metrics in nftables, iptables and userspace mode; the ops pages', async (t) => {
  const daemons = await Promise.all(RUN.map(async (mode) => [mode, await scrape(t, mode)] as const));
  const pages = daemons.map(([mode, d]) => [mode, familiesOnPage(d.page)] as const);
  const union = new Set(pages.flatMap(([, f]) => [...f]));
  const named = familiesNamed(union);
  t.true(named.size > 30, `${named.size} metrics named`);
  for (const [mode, families] of pages)
    for (const [family, where] of named) {
      const expected = (ONLY_IN[family] ?? [mode]).includes(mode);
      t.is(families.has(family), expected, `${family} (read by ${where[0]}) on ${mode} mode's /metrics`);
    }

  // The ops pages of the nftables daemon, as upstream's metrics port serves them.
  const { page, get } = daemons[0]![1];
  t.regex(page, /^kubernetes_feature_enabled\{name="ComponentStatusz",stage="BETA"\} 1$/m);
  const statusz = await get('/statusz');
  t.regex(statusz.body, /^\nkube-proxy statusz\nWarning: This endpoint is not meant to be machine parseable/);
  t.regex(statusz.body, /^Paths(:|: |=| ) \/configz \/flagz \/healthz \/metrics \/proxyMode$/m);
  const flagz = await get('/flagz');
  t.regex(flagz.body, /^proxy-mode(:|: |=| )nftables$/m);
  t.regex(flagz.body, /^service-traffic-metrics(:|: |=| )true$/m);
  await get('/healthz');
  t.regex(
    (await get('/metrics/slis')).body,
    /^kubernetes_healthchecks_total\{name="ping",type="healthz",status="success"\} [1-9]/m,
  );
});
