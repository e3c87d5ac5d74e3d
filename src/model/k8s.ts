// The parts of Kubernetes objects that kube-proxy semantics read, as plain JSON-shaped types
// with the API's field names (core/v1 Service and Node, discovery.k8s.io/v1 EndpointSlice,
// networking.k8s.io/v1 ServiceCIDR). Sources convert whatever they read (the client
// library's classes, YAML manifests) into these; the model never sees the client library.
// Every field is optional because input is untrusted: the model validates.

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** RFC 3339; set when the object is being deleted. */
  deletionTimestamp?: string;
}

export interface ServicePort {
  name?: string;
  protocol?: string; // TCP | UDP | SCTP
  port?: number;
  targetPort?: number | string;
  nodePort?: number;
  appProtocol?: string;
}

export interface Service {
  kind?: 'Service';
  apiVersion?: string;
  metadata?: ObjectMeta;
  spec?: {
    type?: string; // ClusterIP | NodePort | LoadBalancer | ExternalName
    clusterIP?: string;
    clusterIPs?: string[];
    ipFamilies?: string[]; // IPv4 | IPv6
    ipFamilyPolicy?: string;
    ports?: ServicePort[];
    externalIPs?: string[];
    loadBalancerIP?: string;
    loadBalancerSourceRanges?: string[];
    externalTrafficPolicy?: string; // Cluster | Local
    internalTrafficPolicy?: string; // Cluster | Local
    healthCheckNodePort?: number;
    sessionAffinity?: string; // None | ClientIP
    sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number } };
    trafficDistribution?: string;
    externalName?: string;
    selector?: Record<string, string>;
  };
  status?: {
    loadBalancer?: {
      ingress?: { ip?: string; hostname?: string; ipMode?: string }[];
    };
  };
}

export interface EndpointConditions {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

export interface Endpoint {
  addresses?: string[];
  conditions?: EndpointConditions;
  hostname?: string;
  nodeName?: string;
  zone?: string;
  hints?: {
    forZones?: { name?: string }[];
    forNodes?: { name?: string }[];
  };
}

export interface EndpointPort {
  name?: string;
  protocol?: string;
  port?: number;
  appProtocol?: string;
}

export interface EndpointSlice {
  kind?: 'EndpointSlice';
  apiVersion?: string;
  metadata?: ObjectMeta;
  addressType?: string; // IPv4 | IPv6 | FQDN
  endpoints?: Endpoint[];
  ports?: EndpointPort[];
}

export interface Node {
  kind?: 'Node';
  apiVersion?: string;
  metadata?: ObjectMeta;
  spec?: {
    podCIDR?: string;
    podCIDRs?: string[];
    unschedulable?: boolean;
    taints?: { key?: string; value?: string; effect?: string }[];
  };
  status?: {
    addresses?: { type?: string; address?: string }[];
  };
}

export interface ServiceCIDR {
  kind?: 'ServiceCIDR';
  apiVersion?: string;
  metadata?: ObjectMeta;
  spec?: { cidrs?: string[] };
}

/** Labels kube-proxy's informers filter on (upstream pkg/proxy and discovery/v1). */
export const LABEL_SERVICE_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
export const LABEL_HEADLESS = 'service.kubernetes.io/headless';
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const LABEL_HOSTNAME = 'kubernetes.io/hostname';
