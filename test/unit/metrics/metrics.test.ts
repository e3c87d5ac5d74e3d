import test from 'ava';
import { register as globalRegistry } from 'prom-client';
import { createMetrics, NETWORK_PROGRAMMING_BUCKETS, SYNC_DURATION_BUCKETS } from '../../../src/metrics/metrics.ts';
import { startMetricsServer } from '../../../src/metrics/server.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

/** A deliberately small Prometheus text-format reader (not prom-client's). */
interface Scrape {
  types: Map<string, string>;
  help: Map<string, string>;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

function parseExposition(text: string): Scrape {
  const out: Scrape = { types: new Map(), help: new Map(), samples: [] };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) {
      out.types.set(m[1]!, m[2]!);
      continue;
    }
    m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) {
      out.help.set(m[1]!, m[2]!);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    const v = m[3]!;
    out.samples.push({ name: m[1]!, labels, value: v === '+Inf' ? Infinity : Number(v) });
  }
  return out;
}

const sample = (s: Scrape, name: string, labels: Record<string, string> = {}): number | undefined =>
  s.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;

test('upstream buckets: sync durations 1ms x2^n (15), network programming 0..300s (81)', (t) => {
  t.is(SYNC_DURATION_BUCKETS.length, 15);
  t.is(SYNC_DURATION_BUCKETS[0], 0.001);
  t.is(SYNC_DURATION_BUCKETS[14], 16.384);
  t.is(NETWORK_PROGRAMMING_BUCKETS.length, 1 + 2 + 59 + 12 + 7);
  t.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(0, 5), [0, 0.25, 0.5, 1, 2]);
  t.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(-3), [240, 270, 300]);
});

test('two instances do not collide and the global registry stays empty', (t) => {
  const a = createMetrics({ processMetrics: false });
  const b = createMetrics({ processMetrics: false });
  a.serviceChangesTotal.inc();
  t.not(a.registry, b.registry);
  t.is(globalRegistry.getMetricsAsArray().length, 0);
});

test('scraped over HTTP: upstream names, types, labels and values; ours prefixed', async (t) => {
  const m = createMetrics({ version: 'v0.1.0', mode: 'nftables', groups: MODES.nftables.metrics.groups });
  m.syncProxyRulesDuration.observe({ ip_family: 'IPv4' }, 0.0123);
  m.syncFullProxyRulesDuration.observe({ ip_family: 'IPv4' }, 0.0123);
  m.syncPartialProxyRulesDuration.observe({ ip_family: 'IPv4' }, 0.002);
  m.syncProxyRulesLastTimestamp.set({ ip_family: 'IPv4' }, 1_763_866_000.5);
  m.syncProxyRulesLastQueuedTimestamp.set({ ip_family: 'IPv4' }, 1_763_866_000);
  m.networkProgrammingDuration.observe({ ip_family: 'IPv6' }, 1.7);
  m.endpointChangesPending.set(3);
  m.endpointChangesTotal.inc(7);
  m.serviceChangesPending.set(1);
  m.serviceChangesTotal.inc(2);
  m.proxyHealthzTotal.inc({ code: '200' });
  m.proxyHealthzTotal.inc({ code: '503' }, 2);
  m.proxyLivezTotal.inc({ code: '200' });
  m.noLocalEndpointsTotal.set({ ip_family: 'IPv4', traffic_policy: 'external' }, 4);
  m.conntrackReconcilerSyncDuration.observe({ ip_family: 'IPv4' }, 0.004);
  m.conntrackReconcilerDeletedEntriesTotal.inc({ ip_family: 'IPv4' }, 5);
  m.netlinkErrorsTotal.inc({ subsystem: 'nftables', op: 'add chain ip kube-proxy services' });
  m.objectsRejectedTotal.inc({ kind: 'Service', reason: 'invalid clusterIP' });
  m.conntrackEntriesDeletedTotal.inc({ ip_family: 'IPv4', protocol: 'UDP' }, 5);

  const server = await startMetricsServer({
    address: '127.0.0.1:0',
    metrics: m,
    proxyMode: 'nftables',
    configz: () => ({ mode: 'nftables' }),
  });
  t.teardown(() => server.close());
  const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const s = parseExposition(await res.text());

  const types: [string, string][] = [
    ['kubeproxy_sync_proxy_rules_duration_seconds', 'histogram'],
    ['kubeproxy_sync_full_proxy_rules_duration_seconds', 'histogram'],
    ['kubeproxy_sync_partial_proxy_rules_duration_seconds', 'histogram'],
    ['kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'gauge'],
    ['kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'gauge'],
    ['kubeproxy_network_programming_duration_seconds', 'histogram'],
    ['kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'gauge'],
    ['kubeproxy_sync_proxy_rules_endpoint_changes_total', 'counter'],
    ['kubeproxy_sync_proxy_rules_service_changes_pending', 'gauge'],
    ['kubeproxy_sync_proxy_rules_service_changes_total', 'counter'],
    ['kubeproxy_proxy_healthz_total', 'counter'],
    ['kubeproxy_proxy_livez_total', 'counter'],
    ['kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'gauge'],
    ['kubeproxy_conntrack_reconciler_sync_duration_seconds', 'histogram'],
    ['kubeproxy_conntrack_reconciler_deleted_entries_total', 'counter'],
    ['kubeproxyts_netlink_errors_total', 'counter'],
    ['kubeproxyts_objects_rejected_total', 'counter'],
    ['kubeproxyts_conntrack_entries_deleted_total', 'counter'],
    ['kubeproxyts_build_info', 'gauge'],
  ];
  for (const [name, type] of types) t.is(s.types.get(name), type, name);
  t.is(s.help.get('kubeproxy_sync_proxy_rules_duration_seconds'), 'SyncProxyRules latency in seconds');
  t.true(s.types.has('process_cpu_seconds_total'), 'process metrics, as upstream exports');

  t.is(sample(s, 'kubeproxy_sync_proxy_rules_duration_seconds_count', { ip_family: 'IPv4' }), 1);
  t.is(sample(s, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket', { ip_family: 'IPv4', le: '0.008' }), 0);
  t.is(sample(s, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket', { ip_family: 'IPv4', le: '0.016' }), 1);
  t.is(sample(s, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket', { ip_family: 'IPv4', le: '+Inf' }), 1);
  t.is(sample(s, 'kubeproxy_network_programming_duration_seconds_bucket', { ip_family: 'IPv6', le: '1' }), 0);
  t.is(sample(s, 'kubeproxy_network_programming_duration_seconds_bucket', { ip_family: 'IPv6', le: '2' }), 1);
  t.is(sample(s, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', { ip_family: 'IPv4' }), 1_763_866_000.5);
  t.is(sample(s, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 7);
  t.is(sample(s, 'kubeproxy_proxy_healthz_total', { code: '503' }), 2);
  t.is(sample(s, 'kubeproxy_proxy_livez_total', { code: '200' }), 1);
  t.is(
    sample(s, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total', { ip_family: 'IPv4', traffic_policy: 'external' }),
    4,
  );
  t.is(sample(s, 'kubeproxy_conntrack_reconciler_deleted_entries_total', { ip_family: 'IPv4' }), 5);
  t.is(
    sample(s, 'kubeproxyts_netlink_errors_total', { subsystem: 'nftables', op: 'add chain ip kube-proxy services' }),
    1,
  );
  t.is(sample(s, 'kubeproxyts_objects_rejected_total', { kind: 'Service', reason: 'invalid clusterIP' }), 1);
  t.is(sample(s, 'kubeproxyts_build_info', { version: 'v0.1.0', mode: 'nftables' }), 1);

  // The other paths upstream serves on the metrics port.
  const mode = await fetch(`http://127.0.0.1:${server.port}/proxyMode`);
  t.is(await mode.text(), 'nftables');
  const healthz = await fetch(`http://127.0.0.1:${server.port}/healthz`);
  t.is(await healthz.text(), 'ok');
  // healthz.InstallHandler also serves each check under /healthz/<name>: the default "ping".
  t.is(await (await fetch(`http://127.0.0.1:${server.port}/healthz/ping`)).text(), 'ok');
  const configz = await fetch(`http://127.0.0.1:${server.port}/configz`);
  t.deepEqual(await configz.json(), { kubeproxy: { mode: 'nftables' } });
  t.is((await fetch(`http://127.0.0.1:${server.port}/nope`)).status, 404);
});

test('a taken metrics port rejects start (the daemon decides whether that is fatal)', async (t) => {
  const m = createMetrics({ processMetrics: false });
  const first = await startMetricsServer({ address: '127.0.0.1:0', metrics: m, proxyMode: 'ipvs' });
  t.teardown(() => first.close());
  await t.throwsAsync(startMetricsServer({ address: `127.0.0.1:${first.port}`, metrics: m, proxyMode: 'ipvs' }), {
    code: 'EADDRINUSE',
  });
});
