import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { normalizeService } from '../../../src/model/service.ts';
import { DEFAULT_LIMITS, type ServicePortInfo } from '../../../src/model/types.ts';
import { svc, type SvcOpts } from './helpers.ts';

interface Row {
  name: string;
  opts: SvcOpts;
  family?: IPFamily;
  /** Expected fields of the single resulting port; null: no port at all. */
  want: Partial<ServicePortInfo> | null;
}

const rows: Row[] = [
  {
    name: 'ClusterIP defaults',
    opts: {},
    want: {
      id: 'default/s:p/TCP' as ServicePortInfo['id'],
      type: 'ClusterIP',
      clusterIP: '10.96.0.10',
      port: 80,
      nodePort: 0,
      sessionAffinity: 'None',
      stickyMaxAgeSeconds: 0,
      externallyAccessible: false,
      usesClusterEndpoints: true,
      usesLocalEndpoints: false,
    },
  },
  { name: 'protocol defaults to TCP', opts: { ports: [{ name: 'p', port: 80 }] }, want: { protocol: 'TCP' } },
  {
    name: 'UDP port',
    opts: { ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] },
    want: { protocol: 'UDP', id: 'default/s:dns/UDP' as ServicePortInfo['id'] },
  },
  { name: 'SCTP port', opts: { ports: [{ name: 'x', protocol: 'SCTP', port: 9 }] }, want: { protocol: 'SCTP' } },
  {
    name: 'NodePort has a node port and is externally accessible',
    opts: { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] },
    want: { type: 'NodePort', nodePort: 30080, externallyAccessible: true },
  },
  {
    name: 'nodePort on a ClusterIP Service is ignored',
    opts: { ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] },
    want: { nodePort: 0, externallyAccessible: false },
  },
  { name: 'ExternalName is skipped', opts: { type: 'ExternalName' }, want: null },
  { name: 'clusterIP None (headless) is skipped', opts: { clusterIP: 'None' }, want: null },
  { name: 'no cluster IP is skipped', opts: { clusterIP: '' }, want: null },
  { name: 'headless label is skipped', opts: { labels: { 'service.kubernetes.io/headless': '' } }, want: null },
  {
    name: 'service-proxy-name label is skipped',
    opts: { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } },
    want: null,
  },
  {
    name: 'dual-stack: IPv4 tracker takes the IPv4 cluster IP',
    opts: { clusterIPs: ['fd00::10', '10.96.0.10'] },
    want: { clusterIP: '10.96.0.10', family: 'IPv4' },
  },
  {
    name: 'dual-stack: IPv6 tracker takes the IPv6 cluster IP (canonical form)',
    opts: { clusterIPs: ['10.96.0.10', 'fd00:0:0::10'] },
    family: 'IPv6',
    want: { clusterIP: 'fd00::10', family: 'IPv6' },
  },
  { name: 'single-stack IPv6 yields nothing for IPv4', opts: { clusterIPs: ['fd00::10'] }, want: null },
  {
    name: 'externalIPs filtered to the family, deduplicated',
    opts: { externalIPs: ['1.2.3.4', '2001:db8::1', '1.2.3.4'] },
    want: { externalIPs: ['1.2.3.4'], externallyAccessible: true },
  },
  {
    name: 'LB ingress: VIP and unset ipMode programmed, Proxy not, hostname ignored',
    opts: {
      type: 'LoadBalancer',
      ingress: [
        { ip: '5.5.5.5' },
        { ip: '6.6.6.6', ipMode: 'VIP' },
        { ip: '7.7.7.7', ipMode: 'Proxy' },
        { hostname: 'lb.example' },
      ],
    },
    want: { loadBalancerVIPs: ['5.5.5.5', '6.6.6.6'] },
  },
  {
    name: 'LB ingress of the other family is not ours',
    opts: { type: 'LoadBalancer', ingress: [{ ip: '2001:db8::5' }] },
    want: { loadBalancerVIPs: [] },
  },
  {
    name: 'loadBalancerSourceRanges trimmed and filtered to the family',
    opts: { type: 'LoadBalancer', ingress: [{ ip: '5.5.5.5' }], sourceRanges: [' 192.168.0.0/16 ', '2001:db8::/32'] },
    want: { loadBalancerSourceRanges: ['192.168.0.0/16'], loadBalancerVIPs: ['5.5.5.5'] },
  },
  {
    name: 'ClientIP affinity defaults to 10800 s',
    opts: { affinity: 'ClientIP' },
    want: { sessionAffinity: 'ClientIP', stickyMaxAgeSeconds: 10800 },
  },
  {
    name: 'ClientIP affinity with a timeout',
    opts: { affinity: 'ClientIP', timeout: 60 },
    want: { sessionAffinity: 'ClientIP', stickyMaxAgeSeconds: 60 },
  },
  {
    name: 'eTP Local on LoadBalancer: health check port, uses local and cluster endpoints',
    opts: { type: 'LoadBalancer', eTP: 'Local', hcPort: 32000, ports: [{ name: 'p', port: 80, nodePort: 30080 }] },
    want: {
      externalPolicyLocal: true,
      healthCheckNodePort: 32000,
      usesLocalEndpoints: true,
      usesClusterEndpoints: true,
    },
  },
  {
    name: 'eTP Local on NodePort: no health check port',
    opts: { type: 'NodePort', eTP: 'Local', hcPort: 32000, ports: [{ name: 'p', port: 80, nodePort: 30080 }] },
    want: { externalPolicyLocal: true, healthCheckNodePort: 0, usesLocalEndpoints: true },
  },
  {
    name: 'eTP Local on a plain ClusterIP Service means nothing',
    opts: { eTP: 'Local' },
    want: { externalPolicyLocal: false, usesLocalEndpoints: false },
  },
  {
    name: 'eTP Local on ClusterIP with external IPs applies',
    opts: { eTP: 'Local', externalIPs: ['1.2.3.4'] },
    want: { externalPolicyLocal: true, usesLocalEndpoints: true, usesClusterEndpoints: true },
  },
  {
    name: 'iTP Local, internal only: local endpoints only',
    opts: { iTP: 'Local' },
    want: { internalPolicyLocal: true, usesLocalEndpoints: true, usesClusterEndpoints: false },
  },
  {
    name: 'iTP Local on a NodePort: both sets',
    opts: { type: 'NodePort', iTP: 'Local', ports: [{ name: 'p', port: 80, nodePort: 30080 }] },
    want: { internalPolicyLocal: true, usesLocalEndpoints: true, usesClusterEndpoints: true },
  },
];

for (const row of rows) {
  test(`service: ${row.name}`, (t) => {
    const res = normalizeService(svc('s', row.opts), row.family ?? 'IPv4', DEFAULT_LIMITS);
    t.deepEqual(res.issues.list, []);
    if (row.want === null) {
      t.is(res.ports.length, 0);
      return;
    }
    t.is(res.ports.length, 1);
    const got = res.ports[0]!;
    for (const [k, v] of Object.entries(row.want)) t.deepEqual(got[k as keyof ServicePortInfo], v, k);
  });
}

test('service: several ports sorted by id, each with the shared Service fields', (t) => {
  const res = normalizeService(
    svc('s', {
      type: 'NodePort',
      ports: [
        { name: 'web', protocol: 'TCP', port: 80, nodePort: 30080 },
        { name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 },
      ],
    }),
    'IPv4',
    DEFAULT_LIMITS,
  );
  t.deepEqual(
    res.ports.map((p) => [p.id, p.port, p.nodePort]),
    [
      ['default/s:dns/UDP', 53, 30053],
      ['default/s:web/TCP', 80, 30080],
    ],
  );
});
