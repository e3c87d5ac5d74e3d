// Every kubeproxy_* metric upstream kube-proxy 1.3x registers (pkg/proxy/metrics, documented
// in kubernetes.io's metrics reference) for the modes we implement, plus the component-base
// ones dashboards read (kubernetes_build_info, rest_client_*). Mode-specific metrics are
// registered as upstream's RegisterMetrics(mode) does: the iptables ones in iptables mode only,
// but for the restore failures, which its IPVS mode registers too (its companion rules go through
// iptables-restore); the nftables sync and cleanup failures in nftables mode only.
import test from 'ava';
import { createMetrics, kubernetesBuildLabels } from '../../../src/metrics/metrics.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';
import type { ProxyMode } from '../../../src/proxier/types.ts';

const COMMON = [
  'kubeproxy_sync_proxy_rules_duration_seconds',
  'kubeproxy_sync_full_proxy_rules_duration_seconds',
  'kubeproxy_sync_partial_proxy_rules_duration_seconds',
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
  'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds',
  'kubeproxy_network_programming_duration_seconds',
  'kubeproxy_sync_proxy_rules_endpoint_changes_pending',
  'kubeproxy_sync_proxy_rules_endpoint_changes_total',
  'kubeproxy_sync_proxy_rules_service_changes_pending',
  'kubeproxy_sync_proxy_rules_service_changes_total',
  'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
  'kubeproxy_proxy_healthz_total',
  'kubeproxy_proxy_livez_total',
  'kubeproxy_conntrack_reconciler_sync_duration_seconds',
  'kubeproxy_conntrack_reconciler_deleted_entries_total',
  'kubernetes_build_info',
  'rest_client_requests_total',
  'rest_client_request_duration_seconds',
  'rest_client_rate_limiter_duration_seconds',
];
const NFTABLES = [
  'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
  'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total',
];
const IPTABLES = [
  'kubeproxy_sync_proxy_rules_iptables_total',
  'kubeproxy_sync_proxy_rules_iptables_last',
  'kubeproxy_sync_proxy_rules_iptables_restore_failures_total',
  'kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total',
];
// Registered once the kernel's nfacct objects exist (nfacct.test.ts), as upstream's collectors
// export nothing without them.
const NFACCT = [
  'kubeproxy_iptables_ct_state_invalid_dropped_packets_total',
  'kubeproxy_iptables_localhost_nodeports_accepted_packets_total',
];

const names = async (mode: ProxyMode): Promise<Set<string>> => {
  const text = await createMetrics({
    processMetrics: false,
    mode,
    groups: MODES[mode].metrics.groups,
    version: 'v1.2.3',
  }).registry.metrics();
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
};

const RESTORE_FAILURES = 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total';
const BY_MODE: Record<string, string[]> = {
  nftables: NFTABLES,
  ipvs: [RESTORE_FAILURES],
  iptables: IPTABLES,
};

for (const mode of ['nftables', 'ipvs', 'iptables'] as const) {
  test(`${mode} mode exports upstream's metrics`, async (t) => {
    const have = await names(mode);
    const own = BY_MODE[mode]!;
    for (const n of [...COMMON, ...own]) t.true(have.has(n), n);
    for (const n of [...IPTABLES, ...NFTABLES]) if (!own.includes(n)) t.false(have.has(n), `${n} not in ${mode} mode`);
    for (const n of NFACCT) t.false(have.has(n), `${n} only with the nfacct objects`);
  });
}

test("kubernetes_build_info carries upstream's labels, our version as git_version", async (t) => {
  const text = await createMetrics({
    processMetrics: false,
    mode: 'nftables',
    groups: MODES.nftables.metrics.groups,
    version: 'v1.2.3',
  }).registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith('kubernetes_build_info{'));
  t.truthy(line);
  for (const label of [
    'major="1"',
    'minor="2"',
    'git_version="v1.2.3"',
    'compiler="node"',
    'go_version=',
    'platform=',
    'build_date=',
    'git_commit=',
    'git_tree_state=',
  ]) {
    t.true(line!.includes(label), `${label} in ${line}`);
  }
  t.true(line!.endsWith(' 1'));
  t.is(kubernetesBuildLabels('not-a-version').major, '');
});
