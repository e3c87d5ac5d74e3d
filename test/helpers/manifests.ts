// Service and EndpointSlice manifests as YAML, for the manifest-directory source (standalone
// mode) in kernel tests and the demo.

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
