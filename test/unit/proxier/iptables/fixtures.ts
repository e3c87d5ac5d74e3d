// A ServicePortInfo with plain defaults, for tests that need only a few of its fields.
import type { ServicePortInfo } from '../../../../src/model/index.ts';

export function servicePort(
  o: Partial<ServicePortInfo> & { namespace: string; name: string; portName: string },
): ServicePortInfo {
  const protocol = o.protocol ?? 'TCP';
  const service = `${o.namespace}/${o.name}`;
  return {
    id: `${service}:${o.portName}/${protocol}` as ServicePortInfo['id'],
    service: service as ServicePortInfo['service'],
    family: 'IPv4',
    protocol,
    type: 'ClusterIP',
    clusterIP: '172.30.0.41',
    port: 80,
    nodePort: 0,
    externalIPs: [],
    loadBalancerVIPs: [],
    loadBalancerSourceRanges: [],
    sessionAffinity: 'None',
    stickyMaxAgeSeconds: 0,
    loadBalancingAsked: undefined,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
    externallyAccessible: false,
    usesClusterEndpoints: true,
    usesLocalEndpoints: false,
    ...o,
  };
}
