// Service and EndpointSlice manifests as YAML, for the manifest-directory source (standalone
// mode) in kernel tests and the demo.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Endpoint, EndpointPort, Service } from '../../src/model/k8s.ts';
import { slice } from '../unit/model/helpers.ts';

export interface WebService {
  name: string;
  namespace?: string;
  clusterIP: string;
  port: number;
  /** Set: type NodePort with this node port. */
  nodePort?: number;
  targetPort: number;
  endpoints: readonly string[];
  /** nodeName of every endpoint. */
  nodeName?: string;
}

export function serviceYAML(s: WebService): string {
  const ns = s.namespace ?? 'default';
  const eps = s.endpoints
    .map(
      (ip) =>
        `  - addresses: ["${ip}"]\n    conditions: {ready: true}${s.nodeName ? `\n    nodeName: ${s.nodeName}` : ''}`,
    )
    .join('\n');
  return `apiVersion: v1
kind: Service
metadata:
  name: ${s.name}
  namespace: ${ns}
spec:
  type: ${s.nodePort ? 'NodePort' : 'ClusterIP'}
  clusterIP: ${s.clusterIP}
  ports:
  - name: http
    protocol: TCP
    port: ${s.port}
    targetPort: ${s.targetPort}${s.nodePort ? `\n    nodePort: ${s.nodePort}` : ''}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${s.name}-1
  namespace: ${ns}
  labels:
    kubernetes.io/service-name: ${s.name}
addressType: IPv4
ports:
- name: http
  protocol: TCP
  port: ${s.targetPort}
endpoints:
${eps === '' ? '  []' : eps}
`;
}

/**
 * Writes each Service with one EndpointSlice of `eps` (target ports `ports`) as a JSON List,
 * and a ServiceCIDR for 10.96.0.0/16, into a manifest directory.
 */
export async function writeServiceManifests(
  dir: string,
  services: readonly { svc: Service; eps: Endpoint[]; ports?: EndpointPort[] }[],
): Promise<void> {
  for (const { svc, eps, ports } of services) {
    const name = svc.metadata!.name!;
    const es = slice(`${name}-1`, name, eps, { ports: ports ?? [{ name: 'http', protocol: 'TCP', port: 8080 }] });
    const items = [
      { apiVersion: 'v1', kind: 'Service', ...svc },
      { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', ...es },
    ];
    await writeFile(join(dir, `${name}.json`), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  }
  const cidr = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'ServiceCIDR',
    metadata: { name: 'kubernetes' },
    spec: { cidrs: ['10.96.0.0/16'] },
  };
  await writeFile(join(dir, 'service-cidr.json'), JSON.stringify(cidr));
}
