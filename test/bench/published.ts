// Upstream kube-proxy's own published figures, shown in the summary beside ours for the same
// cluster shape: published, not measured here. Each was read at its link; the conditions are
// theirs (their hardware, their API server, their versions), so they set the scale, not a ratio.

import type { Metric, Mode } from './figures.ts';

export interface Published {
  mode: Mode;
  metric: Metric;
  /** The reading of the metric it stands beside (figures.ts), e.g. 'peak'. */
  variant: string;
  services: number;
  endpoints: number;
  /** The figure as its source states it. */
  figure: string;
  /** What exactly was timed, and on what. */
  conditions: string;
  link: string;
}

const PR_126013 = 'https://github.com/kubernetes/kubernetes/pull/126013';
const ISSUE_135639 = 'https://github.com/kubernetes/kubernetes/issues/135639';
const ISSUE_139513 = 'https://github.com/kubernetes/kubernetes/issues/139513';
const KEP_3453 =
  'https://github.com/kubernetes/enhancements/blob/master/keps/sig-network/3453-minimize-iptables-restore/README.md';

export const PUBLISHED: readonly Published[] = [
  {
    mode: 'nftables',
    metric: 'coldStart',
    variant: 'last Service',
    services: 10_000,
    endpoints: 2,
    figure: '≈ 9 min',
    conditions: 'creating all 10,000 Services × 2 endpoints in a kind cluster until programmed, with partial syncs',
    link: PR_126013,
  },
  {
    mode: 'nftables',
    metric: 'changeE2E',
    variant: 'new Service',
    services: 10_000,
    endpoints: 2,
    figure: '≈ 141 ms',
    conditions: 'one new Service with 10,000 existing, kind cluster, with partial syncs',
    link: PR_126013,
  },
  {
    mode: 'nftables',
    metric: 'rss',
    variant: 'peak',
    services: 10_000,
    endpoints: 2,
    figure: '260 MiB peak',
    conditions: 'maximum memory while creating 10,000 Services × 2 endpoints, kind cluster',
    link: PR_126013,
  },
  {
    mode: 'nftables',
    metric: 'coldStart',
    variant: 'last Service',
    services: 5_000,
    endpoints: 50,
    figure: '13 min 15 s',
    conditions: 'one sync (SyncProxyRules) at 5,006 Services / 250,011 endpoints, m6i.8xlarge (32 vCPU), kernel 6.1',
    link: ISSUE_135639,
  },
  {
    mode: 'nftables',
    metric: 'coldStart',
    variant: 'last Service',
    services: 44_000,
    endpoints: 1,
    figure: '16 min 44 s',
    conditions: 'one full sync at 44,125 Services / 44,152 endpoints, kube-proxy v1.36.1',
    link: ISSUE_139513,
  },
  {
    mode: 'iptables',
    metric: 'changeE2E',
    variant: 'endpoint move',
    services: 0,
    endpoints: 0,
    figure: 'p50 ≈ 5 s (≈ 13 s with --iptables-min-sync-period 10s)',
    conditions:
      'network_programming_duration_seconds in the 5,000-node scalability test with partial restores (MinimizeIPTablesRestore); Service count not stated',
    link: KEP_3453,
  },
];
