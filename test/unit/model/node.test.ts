import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import {
  decideRoute,
  type RouteDecision,
  type TrafficKind,
  type TrafficSource,
} from '../../../src/model/masquerade.ts';
import { normalizeNode, unknownNode } from '../../../src/model/node.ts';
import { nodePortAddressMatches, nodePortIPsOf, selectNodePortAddresses } from '../../../src/model/nodeport.ts';
import type { DetectLocalMode, ModelOptions, NodeInfo, NodePortAddresses } from '../../../src/model/types.ts';
import { NODE, newTracker, node } from './helpers.ts';

// --- Node facts ---------------------------------------------------------------------------

interface NodeRow {
  name: string;
  family: IPFamily;
  node: Parameters<typeof node>[1];
  want: Partial<NodeInfo>;
}

const nodeRows: NodeRow[] = [
  {
    name: 'first InternalIP of the family',
    family: 'IPv4',
    node: { internal: ['fd00::1', '10.1.0.5', '10.1.0.6'] },
    want: { primaryIP: '10.1.0.5' },
  },
  {
    name: 'ExternalIP when no InternalIP of the family',
    family: 'IPv4',
    node: { internal: ['fd00::1'], external: ['203.0.113.5'] },
    want: { primaryIP: '203.0.113.5' },
  },
  {
    name: 'InternalIP beats an earlier ExternalIP',
    family: 'IPv4',
    node: { external: ['203.0.113.5'], internal: ['10.1.0.5'] },
    want: { primaryIP: '10.1.0.5' },
  },
  {
    name: 'IPv6 primary',
    family: 'IPv6',
    node: { internal: ['10.1.0.5', 'fd00:0::1'] },
    want: { primaryIP: 'fd00::1' },
  },
  { name: 'no address of the family', family: 'IPv6', node: { internal: ['10.1.0.5'] }, want: { primaryIP: '' } },
  { name: 'zone label', family: 'IPv4', node: { zone: 'z1' }, want: { zone: 'z1', known: true } },
  {
    name: 'pod CIDRs of the family',
    family: 'IPv4',
    node: { podCIDRs: ['10.244.1.0/24', 'fd00:244::/64'] },
    want: { podCIDRs: ['10.244.1.0/24'] },
  },
];

for (const row of nodeRows) {
  test(`node: ${row.name}`, (t) => {
    const { info, issues } = normalizeNode(node(NODE, row.node), NODE, row.family);
    t.deepEqual(issues.list, []);
    for (const [k, v] of Object.entries(row.want)) t.deepEqual(info[k as keyof NodeInfo], v, k);
  });
}

// --- nodePortAddresses --------------------------------------------------------------------

interface NpaRow {
  name: string;
  spec: string[] | undefined;
  family?: IPFamily;
  primaryIP?: string;
  want: Pick<NodePortAddresses, 'matchAll' | 'cidrs'> & Partial<NodePortAddresses>;
}

const npaRows: NpaRow[] = [
  { name: 'unset: every address', spec: undefined, want: { matchAll: true, cidrs: ['0.0.0.0/0'] } },
  {
    name: 'CIDRs of the family',
    spec: ['192.168.0.0/16', 'fd00::/8'],
    want: { matchAll: false, cidrs: ['192.168.0.0/16'] },
  },
  { name: 'only the other family: every address', spec: ['fd00::/8'], want: { matchAll: true, cidrs: ['0.0.0.0/0'] } },
  {
    name: 'IPv6 family',
    spec: ['192.168.0.0/16', 'fd00::/8'],
    family: 'IPv6',
    want: { matchAll: false, cidrs: ['fd00::/8'] },
  },
  { name: 'a zero CIDR wins', spec: ['192.168.0.0/16', '0.0.0.0/0'], want: { matchAll: true, cidrs: ['0.0.0.0/0'] } },
  {
    name: 'primary: the node IP as /32',
    spec: ['primary'],
    primaryIP: '10.1.0.5',
    want: { matchAll: false, cidrs: ['10.1.0.5/32'], primary: true },
  },
  {
    name: 'primary, IPv6: /128',
    spec: ['primary'],
    family: 'IPv6',
    primaryIP: 'fd00::5',
    want: { matchAll: false, cidrs: ['fd00::5/128'] },
  },
  {
    name: 'primary with a loopback node IP: every address (as upstream)',
    spec: ['primary'],
    primaryIP: '127.0.0.1',
    want: { matchAll: true, cidrs: ['0.0.0.0/0'] },
  },
  {
    name: 'primary without a node IP: every address (as upstream)',
    spec: ['primary'],
    want: { matchAll: true, cidrs: ['0.0.0.0/0'], primary: true },
  },
  {
    name: 'loopback CIDR flagged',
    spec: ['127.0.0.0/8'],
    want: { matchAll: false, cidrs: ['127.0.0.0/8'], containsIPv4Loopback: true },
  },
  {
    name: 'localhost keyword: the loopback range, asked for on purpose',
    spec: ['localhost'],
    want: { matchAll: false, cidrs: ['127.0.0.0/8'], containsIPv4Loopback: true, localhost: true },
  },
  {
    name: 'localhost keyword in IPv6: ::1',
    spec: ['localhost'],
    family: 'IPv6',
    want: { matchAll: false, cidrs: ['::1/128'], localhost: true, containsIPv4Loopback: false },
  },
  {
    name: 'primary and localhost together: both',
    spec: ['primary', 'localhost'],
    primaryIP: '10.0.0.5',
    want: { matchAll: false, cidrs: ['10.0.0.5/32', '127.0.0.0/8'], primary: true, localhost: true },
  },
  {
    name: 'primary with a CIDR: both',
    spec: ['192.168.0.0/16', 'primary'],
    primaryIP: '10.0.0.5',
    want: { matchAll: false, cidrs: ['192.168.0.0/16', '10.0.0.5/32'], primary: true, localhost: false },
  },
  {
    name: 'all: every address, loopback not asked for',
    spec: ['all'],
    want: { matchAll: true, cidrs: ['0.0.0.0/0'], localhost: false },
  },
  {
    name: 'all in IPv6: ::/0',
    spec: ['all'],
    family: 'IPv6',
    want: { matchAll: true, cidrs: ['::/0'], localhost: false },
  },
  {
    name: 'all with localhost: every address, loopback asked for',
    spec: ['all', 'localhost'],
    want: { matchAll: true, cidrs: ['0.0.0.0/0'], localhost: true },
  },
  {
    name: 'zero CIDR with 127.0.0.1/32: loopback asked for (as upstream)',
    spec: ['0.0.0.0/0', '127.0.0.1/32'],
    want: { matchAll: true, cidrs: ['0.0.0.0/0'], localhost: true },
  },
  {
    name: 'an IPv4 loopback CIDR does not ask for ::1',
    spec: ['127.0.0.1/32'],
    family: 'IPv6',
    want: { matchAll: true, cidrs: ['::/0'], localhost: false },
  },
  {
    name: 'non-loopback CIDR not flagged',
    spec: ['10.0.0.0/8'],
    want: { matchAll: false, cidrs: ['10.0.0.0/8'], containsIPv4Loopback: false },
  },
];

for (const row of npaRows) {
  test(`nodePortAddresses: ${row.name}`, (t) => {
    const family = row.family ?? 'IPv4';
    const n: NodeInfo = { ...unknownNode(NODE), primaryIP: row.primaryIP ?? '' };
    const got = selectNodePortAddresses(row.spec, family, n);
    for (const [k, v] of Object.entries(row.want)) t.deepEqual(got[k as keyof NodePortAddresses], v, k);
  });
}

test('nodePortAddresses: the node IPs taken, primary added to the CIDRs matches', (t) => {
  const node: NodeInfo = { ...unknownNode(NODE), primaryIP: '10.0.0.5' };
  const both = selectNodePortAddresses(['primary', '192.168.0.0/16'], 'IPv4', node);
  t.deepEqual(nodePortIPsOf(both, '10.0.0.5', ['192.168.1.1', '172.16.0.1']), ['10.0.0.5', '192.168.1.1']);
  const cidrOnly = selectNodePortAddresses(['192.168.0.0/16'], 'IPv4', node);
  t.deepEqual(nodePortIPsOf(cidrOnly, '10.0.0.5', ['192.168.1.1', '10.0.0.5']), ['192.168.1.1']);
});

test('nodePortAddresses: matching a local address', (t) => {
  const npa = selectNodePortAddresses(['192.168.0.0/16'], 'IPv4', unknownNode(NODE));
  t.true(nodePortAddressMatches(npa, '192.168.3.4'));
  t.false(nodePortAddressMatches(npa, '10.0.0.1'));
});

test('nodePortAddresses: primary follows the Node object through the tracker', (t) => {
  const { t: tr } = newTracker({ nodePortAddresses: ['primary'] });
  t.true(tr.checkout().desired.nodePortAddresses.matchAll);
  tr.onNode(node(NODE, { internal: ['10.1.0.5'] }));
  const { desired, change } = tr.checkout();
  t.deepEqual(desired.nodePortAddresses.cidrs, ['10.1.0.5/32']);
  t.true(change.nodeChanged);
  t.true(change.full);
});

// --- masquerade / detect-local ------------------------------------------------------------

interface MasqRow {
  name: string;
  opts: Partial<ModelOptions>;
  podCIDRs?: string[];
  policy: { internalPolicyLocal: boolean; externalPolicyLocal: boolean };
  kind: TrafficKind;
  src: TrafficSource;
  want: RouteDecision;
}

const CLUSTER = { internalPolicyLocal: false, externalPolicyLocal: false };
const ELOCAL = { internalPolicyLocal: false, externalPolicyLocal: true };
const ILOCAL = { internalPolicyLocal: true, externalPolicyLocal: false };
const POD = { ip: '10.244.1.7' };
const OUTSIDE = { ip: '192.0.2.1' };
const CC: Partial<ModelOptions> = { clusterCIDRs: ['10.244.0.0/16'] };

const masqRows: MasqRow[] = [
  {
    name: 'cluster IP from a pod: no SNAT',
    opts: CC,
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'cluster IP from outside the cluster CIDR: SNAT',
    opts: CC,
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: OUTSIDE,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'cluster IP, masqueradeAll: SNAT even from a pod',
    opts: { ...CC, masqueradeAll: true },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'cluster IP, no cluster CIDR: cannot tell, no SNAT',
    opts: {},
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: OUTSIDE,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'cluster IP, iTP Local: local endpoints',
    opts: CC,
    policy: ILOCAL,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'local', masquerade: false },
  },
  {
    name: 'NodeCIDR mode: pod CIDR of this node is local',
    opts: { detectLocalMode: 'NodeCIDR' },
    podCIDRs: ['10.244.1.0/24'],
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'NodeCIDR mode: another node pod is not local',
    opts: { detectLocalMode: 'NodeCIDR' },
    podCIDRs: ['10.244.2.0/24'],
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'NodeCIDR mode without pod CIDR: cannot tell',
    opts: { detectLocalMode: 'NodeCIDR' },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: OUTSIDE,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'NodeCIDR mode ignores clusterCIDR',
    opts: { ...CC, detectLocalMode: 'NodeCIDR' },
    podCIDRs: ['10.244.2.0/24'],
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'ClusterCIDR: only the first CIDR of the family counts (as upstream)',
    opts: { clusterCIDRs: ['10.245.0.0/16', '10.244.0.0/16'] },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'NodeCIDR: only the first pod CIDR of the family counts (as upstream)',
    opts: { detectLocalMode: 'NodeCIDR' },
    podCIDRs: ['10.244.2.0/24', '10.244.1.0/24'],
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'BridgeInterface mode matches the bridge',
    opts: { detectLocalMode: 'BridgeInterface', bridgeInterface: 'cbr0' },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: { ip: '1.1.1.1', inInterface: 'cbr0' },
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'InterfaceNamePrefix mode: other interface is not local',
    opts: { detectLocalMode: 'InterfaceNamePrefix', interfaceNamePrefix: 'veth' },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: { ip: '1.1.1.1', inInterface: 'eth0' },
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'detect-local None: never by source',
    opts: { ...CC, detectLocalMode: 'None' },
    policy: CLUSTER,
    kind: 'cluster-ip',
    src: OUTSIDE,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'node port, eTP Cluster: SNAT to any endpoint',
    opts: CC,
    policy: CLUSTER,
    kind: 'node-port',
    src: OUTSIDE,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'load balancer, eTP Cluster, from a pod: still SNAT',
    opts: CC,
    policy: CLUSTER,
    kind: 'load-balancer',
    src: POD,
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'node port, eTP Local: local endpoints, client IP kept',
    opts: CC,
    policy: ELOCAL,
    kind: 'node-port',
    src: OUTSIDE,
    want: { endpoints: 'local', masquerade: false },
  },
  {
    name: 'external IP, eTP Local, from a local pod: short-circuit to cluster',
    opts: CC,
    policy: ELOCAL,
    kind: 'external-ip',
    src: POD,
    want: { endpoints: 'cluster', masquerade: false },
  },
  {
    name: 'load balancer, eTP Local, from this node: SNAT to cluster',
    opts: CC,
    policy: ELOCAL,
    kind: 'load-balancer',
    src: { ip: '10.1.0.5', fromThisNode: true },
    want: { endpoints: 'cluster', masquerade: true },
  },
  {
    name: 'node port, eTP Local, masqueradeAll does not apply',
    opts: { ...CC, masqueradeAll: true },
    policy: ELOCAL,
    kind: 'node-port',
    src: OUTSIDE,
    want: { endpoints: 'local', masquerade: false },
  },
];

for (const row of masqRows) {
  test(`masquerade: ${row.name}`, (t) => {
    const { t: tr } = newTracker(row.opts);
    if (row.podCIDRs) tr.onNode(node(NODE, { podCIDRs: row.podCIDRs }));
    const { desired } = tr.checkout();
    t.deepEqual(decideRoute(desired.masquerade, row.policy, row.kind, row.src), row.want);
  });
}

test('masquerade: the detector states its mode and CIDRs', (t) => {
  const modes: [DetectLocalMode | undefined, string[], boolean][] = [
    [undefined, ['10.244.0.0/16'], true],
    ['ClusterCIDR', ['10.244.0.0/16'], true],
    ['NodeCIDR', [], false],
    ['None', [], false],
  ];
  for (const [mode, cidrs, implemented] of modes) {
    const opts: Partial<ModelOptions> = { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/56'] };
    const { t: tr } = newTracker(mode ? { ...opts, detectLocalMode: mode } : opts);
    const d = tr.checkout().desired.masquerade.detectLocal;
    t.deepEqual([d.cidrs, d.implemented], [cidrs, implemented], String(mode));
  }
});

test('masquerade: the detector takes the first CIDR of its family and ignores the rest', (t) => {
  const clusterCIDRs = ['fd00:244::/56', '10.244.0.0/16', '10.245.0.0/16', 'fd00:245::/56'];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const { t: tr } = newTracker({ family, clusterCIDRs });
    const d = tr.checkout().desired.masquerade.detectLocal;
    t.deepEqual(d.cidrs, family === 'IPv4' ? ['10.244.0.0/16'] : ['fd00:244::/56'], family);
  }
  const { t: tr } = newTracker({ detectLocalMode: 'NodeCIDR' });
  tr.onNode(node(NODE, { podCIDRs: ['10.244.2.0/24', 'fd00:244:2::/64', '10.244.1.0/24'] }));
  t.deepEqual(tr.checkout().desired.masquerade.detectLocal.cidrs, ['10.244.2.0/24']);
});
