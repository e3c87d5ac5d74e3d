// Names of the kernel objects the nftables proxier owns. Per-service-port chains follow
// upstream's shape, `service-HASH8-ns/name/proto/port`, so operators recognise them; the
// hash keeps names unique after truncation to nf_tables' 256-byte limit.
//
// The readable part comes from Kubernetes names, which are untrusted here (a manifest file or
// a test server is not the API server): anything outside a small ASCII set becomes '_'. The
// kernel cuts a name at a NUL byte, and its limit is in bytes, not characters, so a raw
// "é"×200 or "a\0b" would name a different object than the one we asked for; the next full
// sync would then not recognise its own set and fail on every run. Sanitized, one character
// is one byte, and the hash (of the raw id) keeps distinct ports apart.

import { createHash } from 'node:crypto';
import type { ServicePortInfo } from '../../model/index.ts';

export const TABLE = 'kube-proxy-ts';
const MAX_NAME = 200;

/** The fixed sets and maps: their number does not grow with the number of Services. */
export const SET = {
  clusterIPs: 'cluster-ips',
  serviceIPs: 'service-ips',
  serviceNodePorts: 'service-nodeports',
  noEndpointServices: 'no-endpoint-services',
  noEndpointNodePorts: 'no-endpoint-nodeports',
  firewallProtected: 'firewall-protected',
  firewallAllow: 'firewall-allow',
  nodePortIPs: 'nodeport-ips',
  podCIDRs: 'pod-cidrs',
  serviceCIDRs: 'service-cidrs',
  hairpin: 'hairpin',
  /** KubeProxyNFTablesLocalhostNodePorts with loopback node ports only: every node port (protocol . port). */
  localhostNodePorts: 'localhost-nodeports',
  /** --service-traffic-metrics only: frontend -> goto its counting chain (traffic.ts). */
  trafficServices: 'traffic-services',
  trafficNodePorts: 'traffic-nodeports',
  connectionsServices: 'connections-services',
  connectionsNodePorts: 'connections-nodeports',
} as const;

/** --service-traffic-metrics only: the counting sets (traffic.ts). */
export const TRAFFIC_SETS: ReadonlySet<string> = new Set([
  SET.trafficServices,
  SET.trafficNodePorts,
  SET.connectionsServices,
  SET.connectionsNodePorts,
]);

/**
 * The fixed sets and maps whose elements belong to service ports (diffed per port; hairpin is
 * shared by endpoint address, so left out).
 */
export const PORT_SETS: ReadonlySet<string> = new Set([
  SET.clusterIPs,
  SET.serviceIPs,
  SET.serviceNodePorts,
  SET.noEndpointServices,
  SET.noEndpointNodePorts,
  SET.firewallProtected,
  SET.firewallAllow,
  ...TRAFFIC_SETS,
]);

/** Of PORT_SETS, those keyed by `proto . nodePort` (2 fields) rather than `address . proto . port` (3). */
export const NODE_PORT_SETS: ReadonlySet<string> = new Set([
  SET.serviceNodePorts,
  SET.noEndpointNodePorts,
  SET.trafficNodePorts,
  SET.connectionsNodePorts,
]);

/** The fixed chains. */
export const CHAIN = {
  markForMasquerade: 'mark-for-masquerade',
  masquerading: 'masquerading',
  services: 'services',
  serviceEndpointsCheck: 'service-endpoints-check',
  nodePortEndpointsCheck: 'nodeport-endpoints-check',
  firewallCheck: 'firewall-check',
  clusterIPsCheck: 'cluster-ips-check',
  reject: 'reject-chain',
  natPrerouting: 'nat-prerouting',
  natOutput: 'nat-output',
  natPostrouting: 'nat-postrouting',
  filterPrerouting: 'filter-prerouting',
  filterInput: 'filter-input',
  filterForward: 'filter-forward',
  filterOutput: 'filter-output',
  filterOutputPostDNAT: 'filter-output-post-dnat',
  /** --service-traffic-metrics only (traffic.ts). */
  countConnections: 'count-connections',
  countTraffic: 'count-traffic',
} as const;

/** Characters kept in the readable part of a name; each is one byte. */
const UNSAFE = /[^A-Za-z0-9._:/-]/g;
const readablePart = (s: string): string => s.replace(UNSAFE, '_');

const hash8 = (s: string): string =>
  createHash('sha256').update(s).digest('base64url').slice(0, 8).toUpperCase().replace(/[-_]/g, 'X');

function portChain(prefix: string, p: ServicePortInfo): string {
  const readable = `${p.namespace}/${p.name}/${p.protocol.toLowerCase()}/${p.portName || p.port}`;
  return `${prefix}-${hash8(`${p.id}|${p.family}`)}-${readablePart(readable)}`.slice(0, MAX_NAME);
}

/** Entry for traffic to the cluster IP (internal traffic policy). */
export const serviceChain = (p: ServicePortInfo): string => portChain('service', p);
/** Entry for node ports, external IPs and load-balancer IPs (external traffic policy). */
export const externalChain = (p: ServicePortInfo): string => portChain('external', p);

/** The frontend kinds a Service port's traffic is counted by (the metrics' `frontend` label). */
export type TrafficFrontend = 'cluster-ip' | 'external' | 'node-port';
/** --service-traffic-metrics only: the chain whose counter counts one frontend kind's packets (or connections). */
export const trafficChain = (p: ServicePortInfo, kind: TrafficFrontend, what: 'traffic' | 'connections'): string =>
  portChain(`${what}-${kind}`, p);

const endpointPart = (p: ServicePortInfo, ep: { ip: string; port: number }): string =>
  `${p.namespace}/${p.name}/${p.protocol.toLowerCase()}/${p.portName || p.port}__${ep.ip}/${ep.port}`;

/** Session affinity only: the clients recently sent to one endpoint. */
// The timeout is part of the hash: a new timeout makes a new set (a set's timeout is fixed
// at creation), and the Service chains that use it are rewritten.
export const affinitySet = (p: ServicePortInfo, ep: { ip: string; port: number }): string =>
  `affinity-${hash8(`${p.id}|${p.family}|${ep.ip}|${ep.port}|${p.stickyMaxAgeSeconds}`)}-${readablePart(endpointPart(p, ep))}`.slice(
    0,
    MAX_NAME,
  );

/** Round-robin and consistent-hash only (balancing.ts): slot -> endpoint of one endpoint list of the port. */
export const balancingMap = (p: ServicePortInfo, role: 'cluster' | 'local'): string => portChain(`balance-${role}`, p);

/** Per-service-port chains (session affinity only) carry one of these prefixes. */
export const isPortChain = (name: string): boolean =>
  /^(service|external|endpoint|(traffic|connections)-(cluster-ip|external|node-port))-[A-Z0-9]{8}-/.test(name);
/** The shared chains that pick one of N endpoints (pickers.ts): `pick-internal-3`, `pick-nodeport-local-1-3`. */
export const isPickChain = (name: string): boolean => /^pick-[a-z-]+-\d+(-\d+)?$/.test(name);
/**
 * The shared endpoint maps, one per endpoint count (pickers.ts): `endpoints-3`, `nodeport-short-circuit-endpoints-2`.
 */
export const isEndpointsMap = (name: string): boolean => /^(nodeport-)?(short-circuit-)?endpoints-\d+$/.test(name);
export const isAffinitySet = (name: string): boolean => /^affinity-[A-Z0-9]{8}-/.test(name);
export const isBalancingMap = (name: string): boolean => /^balance-(cluster|local)-[A-Z0-9]{8}-/.test(name);
