// The churn benchmark's readings of the daemon's log and /metrics text.
import test from 'ava';
import { bucketOf, histogramOf, syncsOf } from '../../bench/churn.ts';

test('syncsOf reads every "Synced proxy rules" line: full or not, its duration, and how long its change waited', (t) => {
  const log = [
    '2026-11-28T18:17:49.340Z debug Synced proxy rules component=sync mode=nftables full=true reason=kick ms=2635',
    '2026-11-28T18:17:50.340Z info  First full sync done; ready',
    '2026-11-28T18:17:51.340Z debug Synced proxy rules component=sync mode=nftables full=false reason=kick ms=12 waitedMs=340',
  ].join('\n');
  t.deepEqual(syncsOf(log), [
    { full: true, ms: 2635, waitedMs: 0 },
    { full: false, ms: 12, waitedMs: 340 },
  ]);
});

test('histogramOf and bucketOf: the bucket a quantile of the change between two scrapes falls in', (t) => {
  const scrape = (b: number[], sum: number): string =>
    [
      '# TYPE kubeproxy_network_programming_duration_seconds histogram',
      ...['0', '0.25', '0.5', '1', '+Inf'].map(
        (le, i) => `kubeproxy_network_programming_duration_seconds_bucket{le="${le}",ip_family="IPv4"} ${b[i]}`,
      ),
      `kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} ${sum}`,
      `kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} ${b[4]}`,
      'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 7',
    ].join('\n');
  const before = histogramOf(scrape([0, 10, 10, 10, 10], 1));
  const after = histogramOf(scrape([0, 108, 109, 110, 110], 6));
  t.is(after.count, 110);
  t.is(after.sum, 6);
  t.is(bucketOf(before.buckets, after.buckets, 0.5), '≤ 250 ms');
  t.is(bucketOf(before.buckets, after.buckets, 0.99), '≤ 500 ms');
  t.is(bucketOf(before.buckets, before.buckets, 0.5), '-', 'no change observed');
});
