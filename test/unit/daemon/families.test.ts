// Configuration -> served families, node name and model options.
import test from 'ava';
import {
  badConfigWarnings,
  detectLocalWarning,
  familiesLogLine,
  modelOptionsFor,
  nodeNameOf,
  servedFamilies,
} from '../../../src/daemon/families.ts';
import { config } from './fakes.ts';

const host = (ipv6Kernel: boolean, ...addrs: string[]) => ({
  ipv6Kernel,
  addresses: addrs.map((address) => ({ address, internal: address === '127.0.0.1' || address === '::1' })),
});

test("families as upstream: both whenever the kernel has IPv6, the node IP's family primary; --cluster-cidr plays no part", (t) => {
  t.deepEqual(servedFamilies({ bindAddress: '0.0.0.0' }, host(true, '127.0.0.1', '::1', '10.1.0.1', 'fd01::1')), {
    primary: 'IPv4',
    families: ['IPv4', 'IPv6'],
    nodeIP: '10.1.0.1',
  });
  t.deepEqual(
    servedFamilies({ bindAddress: '0.0.0.0' }, host(false, '10.1.0.1')),
    { primary: 'IPv4', families: ['IPv4'], nodeIP: '10.1.0.1' },
    'no IPv6 in the kernel',
  );
  t.deepEqual(
    servedFamilies({ bindAddress: '0.0.0.0' }, host(true, '::1', 'fe80::1', 'fd01::1')),
    { primary: 'IPv6', families: ['IPv4', 'IPv6'], nodeIP: 'fd01::1' },
    'an IPv6-only node is IPv6-primary',
  );
  t.deepEqual(
    servedFamilies({ bindAddress: 'fd01::9' }, host(true, '10.1.0.1')),
    { primary: 'IPv6', families: ['IPv4', 'IPv6'], nodeIP: 'fd01::9' },
    '--bind-address wins',
  );
  t.deepEqual(
    servedFamilies({ bindAddress: '::' }, host(true)),
    { primary: 'IPv4', families: ['IPv4', 'IPv6'], nodeIP: '' },
    'nothing known: IPv4 primary',
  );
  const single = familiesLogLine(servedFamilies({ bindAddress: '0.0.0.0' }, host(false, '10.1.0.1')));
  t.is(single.msg, 'kube-proxy running in single-stack mode');
  t.is(
    familiesLogLine(servedFamilies({ bindAddress: '0.0.0.0' }, host(true))).msg,
    'kube-proxy running in dual-stack mode',
  );
});

test('--bind-address is the node IP of its family in the model options', (t) => {
  const c = { ...config(), bindAddress: '10.1.0.7' };
  t.is(modelOptionsFor(c, 'IPv4', 'n').nodeIP, '10.1.0.7');
  t.is(modelOptionsFor(c, 'IPv6', 'n').nodeIP, undefined);
  t.is(modelOptionsFor({ ...c, bindAddress: '0.0.0.0' }, 'IPv4', 'n').nodeIP, undefined);
});

test('node name: --hostname-override, else the host name, lower-cased', (t) => {
  t.is(nodeNameOf({ hostnameOverride: '' }, 'Worker-1'), 'worker-1');
  t.is(nodeNameOf({ hostnameOverride: ' Node-A ' }, 'worker-1'), 'node-a');
});

test('nodePortAddresses reach the model as written: the model reads the keywords', (t) => {
  const cfg = config(['--nodeport-addresses', 'primary,localhost,192.168.0.0/16']);
  t.deepEqual(modelOptionsFor(cfg, 'IPv4', 'n1').nodePortAddresses, ['primary', 'localhost', '192.168.0.0/16']);
});

test('model options carry the flags that are about semantics', (t) => {
  const cfg = config([
    '--cluster-cidr',
    '10.244.0.0/16',
    '--masquerade-all',
    '--nodeport-addresses',
    '192.168.0.0/16',
    '--detect-local-mode',
    'ClusterCIDR',
  ]);
  const o = modelOptionsFor(cfg, 'IPv4', 'node-a');
  t.like(o, {
    nodeName: 'node-a',
    family: 'IPv4',
    masqueradeAll: true,
    detectLocalMode: 'ClusterCIDR',
    preferSameNodeHints: true,
  });
  t.deepEqual(o.clusterCIDRs, ['10.244.0.0/16']);
  t.deepEqual(o.nodePortAddresses, ['192.168.0.0/16']);
  t.deepEqual(
    modelOptionsFor(config(['--proxy-mode', 'nftables']), 'IPv4', 'n').nodePortAddresses,
    ['primary'],
    'nftables mode defaults to the primary IP',
  );
  t.deepEqual(
    modelOptionsFor(config(), 'IPv4', 'n').nodePortAddresses,
    ['all'],
    'a blank mode (iptables) means every address, as upstream',
  );
});

test("upstream's detect-local warning: ClusterCIDR without a cluster CIDR of the primary family", (t) => {
  t.is(detectLocalWarning({ detectLocalMode: 'ClusterCIDR', clusterCIDRs: ['10.244.0.0/16'] }, 'IPv4'), undefined);
  t.regex(
    detectLocalWarning({ detectLocalMode: 'ClusterCIDR', clusterCIDRs: ['10.244.0.0/16'] }, 'IPv6') ?? '',
    /no cluster CIDR specified for primary IP family IPv6/,
  );
  t.truthy(detectLocalWarning({ detectLocalMode: 'ClusterCIDR', clusterCIDRs: [] }, 'IPv4'));
  t.is(detectLocalWarning({ detectLocalMode: 'BridgeInterface', clusterCIDRs: [] }, 'IPv4'), undefined);
});

test("upstream's bad-config warnings: unset nodePortAddresses, a family left open, cluster CIDRs of the other family only", (t) => {
  const dual = { primary: 'IPv4' as const, families: ['IPv4', 'IPv6'] as ('IPv4' | 'IPv6')[], nodeIP: '' };
  const base = {
    nodePortAddresses: ['primary'],
    clusterCIDRs: ['10.244.0.0/16'],
    ipvs: { ...config().ipvs, excludeCIDRs: [] },
  };
  t.deepEqual(badConfigWarnings(base, dual), []);
  t.regex(
    badConfigWarnings({ ...base, nodePortAddresses: ['all'] }, dual)[0] ?? '',
    /nodePortAddresses is unset; .*--nodeport-addresses primary/,
  );
  t.regex(
    badConfigWarnings({ ...base, nodePortAddresses: ['fd01::/64'] }, dual)[0] ?? '',
    /IPv4-primary but nodePortAddresses contains only IPv6 addresses/,
  );
  t.regex(
    badConfigWarnings(
      { ...base, clusterCIDRs: ['10.244.0.0/16', 'fd44::/48'], nodePortAddresses: ['10.1.0.0/24'] },
      dual,
    )[0] ?? '',
    /dual-stack but nodePortAddresses contains only IPv4 addresses; NodePort connections will be accepted on all local IPv6 IPs/,
  );
  t.deepEqual(badConfigWarnings({ ...base, clusterCIDRs: ['fd44::/48'] }, dual), [
    'cluster is IPv4-primary but clusterCIDRs contains only IPv6 addresses',
  ]);
});
