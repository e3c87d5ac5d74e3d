// What the model hands to proxiers, health checks and the conntrack flusher. Everything is
// plain readonly data; IPs and CIDRs are canonical text (parseIP/parseCIDR of src/base give
// bytes when a proxier needs them), so values compare and print cheaply.
//
// Values are never mutated once published: when something changes, the tracker puts a new
// value into the map. A proxier may therefore keep the values it last programmed and diff.

import type { IPFamily } from '../base/ip.ts';
import type { Protocol, ServiceKey, ServicePortId } from './ids.ts';

export type ServiceType = 'ClusterIP' | 'NodePort' | 'LoadBalancer';

/** One port of one Service in one IP family (upstream BaseServicePortInfo). */
export interface ServicePortInfo {
  readonly id: ServicePortId;
  readonly service: ServiceKey;
  readonly namespace: string;
  readonly name: string;
  /** spec.ports[].name; '' for the single unnamed port. */
  readonly portName: string;
  readonly family: IPFamily;
  readonly protocol: Protocol;
  readonly type: ServiceType;
  readonly clusterIP: string;
  readonly port: number;
  /** 0 when the port has none (ClusterIP Services). */
  readonly nodePort: number;
  /** Of this family, in spec order, deduplicated. */
  readonly externalIPs: readonly string[];
  /** status.loadBalancer.ingress IPs of this family whose ipMode is VIP (or unset); Proxy-mode ones are not ours. */
  readonly loadBalancerVIPs: readonly string[];
  /** Of this family; empty means no restriction (as upstream, ranges of the other family do not count). */
  readonly loadBalancerSourceRanges: readonly string[];
  readonly sessionAffinity: 'None' | 'ClientIP';
  /** ClientIP affinity timeout; 0 when sessionAffinity is None. */
  readonly stickyMaxAgeSeconds: number;
  /**
   * The Service's kube-proxy-ts.io/load-balancing annotation, trimmed (undefined: not set).
   * Raw: each proxier resolves it for its mode with the node default (model/load-balancing.ts).
   */
  readonly loadBalancingAsked: string | undefined;
  /** externalTrafficPolicy=Local on an externally reachable Service. */
  readonly externalPolicyLocal: boolean;
  /** internalTrafficPolicy=Local. */
  readonly internalPolicyLocal: boolean;
  /** 0 unless type LoadBalancer with externalTrafficPolicy=Local. */
  readonly healthCheckNodePort: number;
  /** Reachable by something other than the cluster IP (node port, external IP, load balancer). */
  readonly externallyAccessible: boolean;
  /** Some traffic goes to endpoints anywhere in the cluster (upstream UsesClusterEndpoints). */
  readonly usesClusterEndpoints: boolean;
  /** Some traffic goes to this node's endpoints only (upstream UsesLocalEndpoints). */
  readonly usesLocalEndpoints: boolean;
}

/** One endpoint of one service port: an address and the slice port it resolved to. */
export interface EndpointInfo {
  /** "ip:port" ("[ip]:port" for IPv6): unique within a service port. */
  readonly key: string;
  readonly ip: string;
  readonly port: number;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  /** '' when the slice does not say. */
  readonly nodeName: string;
  readonly zone: string;
  /** Runs on this node. */
  readonly isLocal: boolean;
  /** hints.forZones names, sorted; empty when the endpoint has none. */
  readonly zoneHints: readonly string[];
  /** hints.forNodes names, sorted; empty when the endpoint has none. */
  readonly nodeHints: readonly string[];
}

export type TopologyMode = '' | 'PreferSameZone' | 'PreferSameNode';

/** The endpoints this node uses for a service port (upstream CategorizeEndpoints). */
export interface EndpointSelection {
  /** Usable for Cluster traffic policy, topology applied; empty when the port never uses it. */
  readonly cluster: readonly EndpointInfo[];
  /** Usable for Local traffic policy; empty when the port never uses it. */
  readonly local: readonly EndpointInfo[];
  /** Union of the two: every endpoint this node may send to (for affinity, conntrack). */
  readonly allReachable: readonly EndpointInfo[];
  /** Some endpoint is usable somewhere in the cluster (false: reject rather than drop silently). */
  readonly hasAnyEndpoints: boolean;
  readonly topologyMode: TopologyMode;
}

/** For a Service's healthCheckNodePort server. */
export interface HealthCheckInfo {
  readonly service: ServiceKey;
  readonly namespace: string;
  readonly name: string;
  readonly nodePort: number;
  /** Distinct local, ready endpoint IPs over all ports of the Service (upstream LocalReadyEndpoints). */
  readonly localEndpoints: number;
}

export interface NodeInfo {
  readonly name: string;
  /** The Node object has been seen (and not deleted). */
  readonly known: boolean;
  /** topology.kubernetes.io/zone; '' when unlabelled. */
  readonly zone: string;
  /** First InternalIP of this family, else first ExternalIP (upstream GetNodeHostIPs); '' when none. */
  readonly primaryIP: string;
  /** spec.podCIDRs (or podCIDR) of this family. */
  readonly podCIDRs: readonly string[];
}

export interface NodePortAddresses {
  /** Node ports answer on every local address of this family. */
  readonly matchAll: boolean;
  /** Local addresses inside these CIDRs (of this family) answer; ["0.0.0.0/0"] or ["::/0"] with matchAll. */
  readonly cidrs: readonly string[];
  /** The selection came from "primary": cidrs are the node's primary IP as a /32 or /128. */
  readonly primary: boolean;
  /** Some CIDR covers 127.0.0.0/8, so node ports on localhost need route_localnet (IPv4 only). */
  readonly containsIPv4Loopback: boolean;
  /**
   * A CIDR other than the zero one covers this family's loopback address ("localhost",
   * 127.0.0.1/32, ...): loopback node ports were asked for on purpose (nftables mode serves them
   * with a userspace proxy behind KubeProxyNFTablesLocalhostNodePorts; "all" alone does not ask).
   */
  readonly localhost: boolean;
}

export type DetectLocalMode = 'ClusterCIDR' | 'NodeCIDR' | 'BridgeInterface' | 'InterfaceNamePrefix' | 'None';

/** How "traffic from a pod on this node's pod network" is recognised (upstream LocalTrafficDetector). */
export interface LocalDetector {
  readonly mode: DetectLocalMode;
  /**
   * ClusterCIDR/NodeCIDR: a source inside one of these is local. At most one: the first CIDR
   * of this family, as upstream (later ones of the same family are ignored).
   */
  readonly cidrs: readonly string[];
  /** BridgeInterface: the bridge name; InterfaceNamePrefix: the prefix. */
  readonly interfaceName: string;
  /** False when the mode has nothing to match on yet (no CIDR of this family, no interface). */
  readonly implemented: boolean;
}

export interface MasqueradePolicy {
  /** --masquerade-all: SNAT every packet sent to a service IP. */
  readonly all: boolean;
  readonly detectLocal: LocalDetector;
}

export interface DesiredState {
  readonly family: IPFamily;
  readonly node: NodeInfo;
  readonly nodePortAddresses: NodePortAddresses;
  readonly masquerade: MasqueradePolicy;
  /** From ServiceCIDR objects, else from the options: the ranges cluster IPs come from. */
  readonly serviceCIDRs: readonly string[];
  readonly services: ReadonlyMap<ServicePortId, ServicePortInfo>;
  /** Every endpoint of each service port (deduplicated, sorted by key); absent or empty: none. */
  readonly endpoints: ReadonlyMap<ServicePortId, readonly EndpointInfo[]>;
  /** What this node uses, per service port present in services. */
  readonly selections: ReadonlyMap<ServicePortId, EndpointSelection>;
  /** Services with a healthCheckNodePort. */
  readonly healthChecks: ReadonlyMap<ServiceKey, HealthCheckInfo>;
  /** Increases on every checkout that changed something. */
  readonly generation: number;
}

/** The state of a changed service port as of the previous checkout. */
export interface PreviousPort {
  readonly info: ServicePortInfo | undefined;
  readonly endpoints: readonly EndpointInfo[];
  readonly selection: EndpointSelection | undefined;
}

export type StaleReason = 'endpoint-removed' | 'newly-active' | 'service-deleted';

/**
 * Conntrack entries to delete for a UDP or SCTP service port (upstream conntrack cleanup):
 * - endpoint-removed: flows to serviceIPs:port (and nodePort) DNATed to endpointIP;
 * - newly-active: flows to serviceIPs:port (and nodePort), cached while there was no endpoint;
 * - service-deleted: flows to serviceIPs:port (and nodePort).
 */
export interface StaleTarget {
  readonly reason: StaleReason;
  readonly service: ServicePortId;
  readonly family: IPFamily;
  readonly protocol: 'UDP' | 'SCTP';
  /** Cluster IP, external IPs and load-balancer VIPs. */
  readonly serviceIPs: readonly string[];
  readonly port: number;
  /** 0 when none. */
  readonly nodePort: number;
  /** Set for endpoint-removed. */
  readonly endpointIP?: string;
  readonly endpointPort?: number;
}

export interface ChangeSet {
  /** Rebuild everything: first checkout, node or configuration change, or requested. */
  readonly full: boolean;
  /**
   * Service ports whose info, endpoints or selection changed, added and removed included (a
   * removed one is absent from desired.services). Also when full: then it lists what changed,
   * while a full sync rebuilds from desired anyway.
   */
  readonly services: ReadonlySet<ServicePortId>;
  /** For each id in services: what it was before. */
  readonly previous: ReadonlyMap<ServicePortId, PreviousPort>;
  /** The Services whose inputs changed (for health-check servers and events). */
  readonly serviceKeys: ReadonlySet<ServiceKey>;
  /** Empty on the first checkout: after a restart there is no "before" to compare with. */
  readonly stale: readonly StaleTarget[];
  /** endpoints.kubernetes.io/last-change-trigger-time values (ms) per Service, for network-programming latency. */
  readonly triggerTimes: ReadonlyMap<ServiceKey, readonly number[]>;
  /** Node facts (zone, primary IP, pod CIDRs) or ServiceCIDRs changed. */
  readonly nodeChanged: boolean;
}

export interface Limits {
  /** Ports per Service or EndpointSlice beyond which the object is rejected (API allows 100). */
  readonly maxPorts: number;
  /** Endpoints per EndpointSlice beyond which it is rejected (API allows 1000). */
  readonly maxEndpointsPerSlice: number;
}

export const DEFAULT_LIMITS: Limits = { maxPorts: 1000, maxEndpointsPerSlice: 100_000 };

/** The model's configuration: what kube-proxy's flags/config say about semantics. */
export interface ModelOptions {
  /** This node's name (hostname override): endpoints with this nodeName are local. */
  readonly nodeName: string;
  /** A tracker serves one family; a dual-stack node runs two. */
  readonly family: IPFamily;
  /** --cluster-cidr (both families allowed; the other family is ignored). */
  readonly clusterCIDRs?: readonly string[];
  /** Default: ClusterCIDR (as upstream), which is unimplemented without a CIDR of this family. */
  readonly detectLocalMode?: DetectLocalMode;
  readonly bridgeInterface?: string;
  readonly interfaceNamePrefix?: string;
  readonly masqueradeAll?: boolean;
  /**
   * --bind-address when it is a specific IP of this family: this node's primary IP whatever
   * the Node object says (upstream detectNodeIPs), and the only one before the Node is known.
   */
  readonly nodeIP?: string;
  /** CIDRs and/or "primary"; empty or absent: every local address. */
  readonly nodePortAddresses?: readonly string[];
  /** Service CIDRs until ServiceCIDR objects say otherwise. */
  readonly serviceCIDRs?: readonly string[];
  /** Honour node hints (PreferSameTrafficDistribution feature gate, on by default upstream). Default true. */
  readonly preferSameNodeHints?: boolean;
  readonly limits?: Partial<Limits>;
}
