// Test objects as the API server would hold them.

import type { KObject } from '../../helpers/fake-apiserver.ts';

export const NODE = 'node-a';

export function svc(ns: string, name: string, labels: Record<string, string> = {}, port = 80): KObject {
  return {
    kind: 'Service',
    metadata: { name, namespace: ns, labels },
    spec: {
      type: 'ClusterIP',
      clusterIP: '10.96.0.10',
      ports: [{ name: 'http', port, protocol: 'TCP', targetPort: 8080 }],
    },
  };
}

export function slice(
  ns: string,
  name: string,
  service: string,
  ips: string[],
  labels: Record<string, string> = {},
): KObject {
  return {
    kind: 'EndpointSlice',
    metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': service, ...labels } },
    addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: NODE })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

export function node(name: string, zone = 'z1'): KObject {
  return {
    kind: 'Node',
    metadata: { name, labels: { 'topology.kubernetes.io/zone': zone } },
    spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
    status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }], images: [{ names: ['big'] }] },
  };
}
