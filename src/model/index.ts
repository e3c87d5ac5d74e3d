// The model's public surface: pure Kubernetes semantics, no I/O.

export type { ServiceKey, ServicePortId, Protocol } from './ids.ts';
export { serviceKey, servicePortId, serviceKeyOf, endpointKey } from './ids.ts';
export type * from './types.ts';
export { DEFAULT_LIMITS } from './types.ts';
export { ChangeTracker, type TrackerDeps, type Checkout } from './tracker.ts';
export { RejectLog, type RejectKind, type RejectReason, type RejectCallback } from './issues.ts';
export { categorizeEndpoints, topologyModeFromHints, type TopologyContext } from './topology.ts';
export {
  decideRoute,
  isLocalTraffic,
  masqueradeMark,
  type TrafficKind,
  type TrafficSource,
  type RouteDecision,
} from './masquerade.ts';
export { nodePortAddressMatches, nodePortIPsOf, NODE_PORT_ADDRESSES_PRIMARY } from './nodeport.ts';
export { DEFAULT_AFFINITY_TIMEOUT_SECONDS } from './service.ts';
export { TRIGGER_TIME_ANNOTATION } from './slice.ts';
export {
  IPVS_SCHEDULER_OF,
  LOAD_BALANCING_ANNOTATION,
  LOAD_BALANCING_VALUES,
  isLoadBalancing,
  resolveLoadBalancing,
  type LoadBalancing,
  type LoadBalancingSupport,
  type ResolvedLoadBalancing,
} from './load-balancing.ts';
