// Configuration -> served families, node name and model options.
import test from 'ava';
import { modelNodePortAddresses, modelOptionsFor, nodeNameOf, servedFamilies } from '../../../src/daemon/families.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { applyConntrackSettings, conntrackSysctls } from '../../../src/daemon/conntrack-settings.ts';
import { RecordingSysctl } from '../../../src/proxier/ipvs/index.ts';
import { config } from './fakes.ts';

test('families come from the cluster CIDRs; IPv4 only without one', (t) => {
  t.deepEqual(servedFamilies({ clusterCIDRs: [] }), ['IPv4']);
  t.deepEqual(servedFamilies({ clusterCIDRs: ['10.244.0.0/16'] }), ['IPv4']);
  t.deepEqual(servedFamilies({ clusterCIDRs: ['fd00:10:244::/48'] }), ['IPv6']);
  t.deepEqual(servedFamilies({ clusterCIDRs: ['fd00:10:244::/48', '10.244.0.0/16'] }), ['IPv4', 'IPv6'], 'IPv4 first');
});

test('node name: --hostname-override, else the host name, lower-cased', (t) => {
  t.is(nodeNameOf({ hostnameOverride: '' }, 'Worker-1'), 'worker-1');
  t.is(nodeNameOf({ hostnameOverride: ' Node-A ' }, 'worker-1'), 'node-a');
});

test('nodePortAddresses keywords become CIDRs the model understands; primary passes through', (t) => {
  t.deepEqual(modelNodePortAddresses(['primary']), ['primary']);
  t.deepEqual(modelNodePortAddresses(['all']), ['0.0.0.0/0', '::/0']);
  t.deepEqual(modelNodePortAddresses(['localhost', '192.168.0.0/16']), ['127.0.0.0/8', '::1/128', '192.168.0.0/16']);
});

test('model options carry the flags that are about semantics', (t) => {
  const cfg = config(['--cluster-cidr', '10.244.0.0/16', '--masquerade-all', '--nodeport-addresses', '192.168.0.0/16', '--detect-local-mode', 'ClusterCIDR']);
  const o = modelOptionsFor(cfg, 'IPv4', 'node-a');
  t.like(o, { nodeName: 'node-a', family: 'IPv4', masqueradeAll: true, detectLocalMode: 'ClusterCIDR', preferSameNodeHints: true });
  t.deepEqual(o.clusterCIDRs, ['10.244.0.0/16']);
  t.deepEqual(o.nodePortAddresses, ['192.168.0.0/16']);
  t.deepEqual(modelOptionsFor(config(['--proxy-mode', 'nftables']), 'IPv4', 'n').nodePortAddresses, ['primary'], 'nftables mode defaults to the primary IP');
  t.deepEqual(modelOptionsFor(config(), 'IPv4', 'n').nodePortAddresses, ['0.0.0.0/0', '::/0'], 'a blank mode (iptables) means every address, as upstream');
});

test('conntrack tunables as upstream: max = max(perCore x CPUs, min); 0 leaves a value alone; failures only warn', async (t) => {
  const cfg = config();
  t.deepEqual(conntrackSysctls(cfg.conntrack, 2), [
    ['net/netfilter/nf_conntrack_max', 131072],
    ['net/netfilter/nf_conntrack_tcp_timeout_established', 86400],
    ['net/netfilter/nf_conntrack_tcp_timeout_close_wait', 3600],
  ]);
  t.deepEqual(conntrackSysctls({ ...cfg.conntrack, maxPerCore: 65536 }, 8)[0], ['net/netfilter/nf_conntrack_max', 524288]);
  const none = config(['--conntrack-max-per-core', '0', '--conntrack-tcp-timeout-established', '0s', '--conntrack-tcp-timeout-close-wait', '0s']);
  t.deepEqual(conntrackSysctls(none.conntrack, 8), []);
  t.deepEqual(conntrackSysctls({ ...none.conntrack, tcpBeLiberal: true, udpTimeoutMs: 30_000, udpStreamTimeoutMs: 120_000 }, 8), [
    ['net/netfilter/nf_conntrack_tcp_be_liberal', 1],
    ['net/netfilter/nf_conntrack_udp_timeout', 30],
    ['net/netfilter/nf_conntrack_udp_timeout_stream', 120],
  ]);
  const sysctl = new RecordingSysctl();
  sysctl.fail.add('net/netfilter/nf_conntrack_max');
  const logger = memoryLogger();
  await applyConntrackSettings(cfg.conntrack, 2, sysctl, logger);
  t.deepEqual([...sysctl.values.keys()], ['net/netfilter/nf_conntrack_tcp_timeout_established', 'net/netfilter/nf_conntrack_tcp_timeout_close_wait']);
  t.is(logger.records.filter((r) => r.level === 'warn').length, 1);
});
