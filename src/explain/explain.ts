// `kube-proxy-ts explain`: one service port in Kubernetes' terms, from the model (its
// frontends, policies and the endpoints this node chose, with the reason each other one was
// left out) and from the kernel (what the proxier read back, and whether it is what the last
// sync wrote). Pure: the daemon hands in the model's values and the proxier's description.

import { balancingOf } from './balancing.ts';
import type {
  DesiredState,
  EndpointInfo,
  EndpointSelection,
  LoadBalancing,
  ServicePortInfo,
  TopologyMode,
} from '../model/index.ts';
import type { PortDescription, ProgrammedEntry } from '../proxier/types.ts';

export type FrontendKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

export interface Frontend {
  readonly kind: FrontendKind;
  /** An address, or "*" for a node port (every address nodePortAddresses selects). */
  readonly address: string;
  readonly port: number;
}

export interface EndpointVerdict {
  readonly endpoint: string;
  readonly nodeName: string;
  readonly zone: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly local: boolean;
  /** The endpoint sets of the selection it is in: cluster (Cluster policies), local (Local ones). */
  readonly usedFor: readonly ('cluster' | 'local')[];
  /** Why it is in no set; '' when it is used. */
  readonly notUsedBecause: string;
}

export interface Drift {
  /** What the last sync wrote that the kernel lacks (or holds with other data). */
  readonly missing: readonly ProgrammedEntry[];
  /** What the kernel holds for the port that no sync wrote. */
  readonly unexpected: readonly ProgrammedEntry[];
}

export interface PortExplanation {
  readonly id: string;
  readonly service: string;
  readonly portName: string;
  readonly protocol: string;
  readonly family: string;
  readonly type: string;
  readonly frontends: readonly Frontend[];
  /** loadBalancerSourceRanges (of this family); empty: no restriction. */
  readonly sourceRanges: readonly string[];
  readonly policies: {
    readonly internalTrafficPolicy: 'Cluster' | 'Local';
    readonly externalTrafficPolicy: 'Cluster' | 'Local' | '';
    readonly sessionAffinity: 'None' | 'ClientIP';
    readonly stickySeconds: number;
    /** How new connections pick an endpoint (explain/balancing.ts). */
    readonly loadBalancing: string;
    readonly topology: TopologyMode;
    readonly healthCheckNodePort: number;
  };
  readonly endpoints: readonly EndpointVerdict[];
  /** Absent when the proxier cannot describe itself (a mode without describe). */
  readonly kernel?: PortDescription & { readonly drift: Drift; readonly agrees: boolean };
}

export function frontendsOf(p: ServicePortInfo): Frontend[] {
  const out: Frontend[] = [{ kind: 'cluster-ip', address: p.clusterIP, port: p.port }];
  if (!p.externallyAccessible) return out;
  for (const ip of p.externalIPs) out.push({ kind: 'external-ip', address: ip, port: p.port });
  for (const ip of p.loadBalancerVIPs) out.push({ kind: 'load-balancer', address: ip, port: p.port });
  if (p.nodePort > 0) out.push({ kind: 'node-port', address: '*', port: p.nodePort });
  return out;
}

/** Why the model left an endpoint out of both sets (upstream CategorizeEndpoints' rules, said aloud). */
export function whyNotUsed(
  p: ServicePortInfo,
  sel: EndpointSelection | undefined,
  ep: EndpointInfo,
  nodeName: string,
): string {
  const fallback = ep.serving && ep.terminating;
  if (!ep.ready && !fallback) {
    if (ep.terminating) return 'terminating and not serving';
    return ep.serving ? 'not ready' : 'not ready (not serving)';
  }
  if (!ep.ready) {
    // Serving and terminating: used only when the set it would be in has no ready endpoint.
    return 'terminating (ready endpoints exist, so it only drains)';
  }
  if (!p.usesClusterEndpoints)
    return ep.isLocal ? 'local, but not chosen' : `not on this node (${policyNames(p)}=Local)`;
  const mode = sel?.topologyMode ?? '';
  if (mode === 'PreferSameZone')
    return `in another zone (zone hints ${ep.zoneHints.join(',') || 'none'}; topology PreferSameZone)`;
  if (mode === 'PreferSameNode') return `hinted for other nodes (${ep.nodeHints.join(',') || 'none'}, not ${nodeName})`;
  return 'not chosen';
}

function policyNames(p: ServicePortInfo): string {
  const names: string[] = [];
  if (p.internalPolicyLocal) names.push('internalTrafficPolicy');
  if (p.externalPolicyLocal) names.push('externalTrafficPolicy');
  return names.join(' and ') || 'trafficPolicy';
}

export function endpointVerdicts(
  p: ServicePortInfo,
  sel: EndpointSelection | undefined,
  eps: readonly EndpointInfo[],
  nodeName: string,
): EndpointVerdict[] {
  const inCluster = new Set((sel?.cluster ?? []).map((e) => e.key));
  const inLocal = new Set((sel?.local ?? []).map((e) => e.key));
  return eps.map((ep) => {
    const usedFor: ('cluster' | 'local')[] = [];
    if (inCluster.has(ep.key)) usedFor.push('cluster');
    if (inLocal.has(ep.key)) usedFor.push('local');
    return {
      endpoint: ep.key,
      nodeName: ep.nodeName,
      zone: ep.zone,
      ready: ep.ready,
      serving: ep.serving,
      terminating: ep.terminating,
      local: ep.isLocal,
      usedFor,
      notUsedBecause: usedFor.length > 0 ? '' : whyNotUsed(p, sel, ep, nodeName),
    };
  });
}

const byPlace = (a: ProgrammedEntry, b: ProgrammedEntry): number =>
  a.where.localeCompare(b.where) || a.key.localeCompare(b.key, 'en', { numeric: true });

const entryId = (e: ProgrammedEntry): string => `${e.where}\u0000${e.key}\u0000${e.value}`;

/** Drift: what the last sync wrote against what the kernel holds now. */
export function compareEntries(expected: readonly ProgrammedEntry[], kernel: readonly ProgrammedEntry[]): Drift {
  const have = new Set(kernel.map(entryId));
  const want = new Set(expected.map(entryId));
  return {
    missing: expected.filter((e) => !have.has(entryId(e))),
    unexpected: kernel.filter((e) => !want.has(entryId(e))),
  };
}

export function explainPort(
  state: DesiredState,
  p: ServicePortInfo,
  description?: PortDescription,
  lb: { mode: string; nodeDefault?: LoadBalancing } = { mode: '' },
): PortExplanation {
  const sel = state.selections.get(p.id);
  const eps = state.endpoints.get(p.id) ?? [];
  const out: PortExplanation = {
    id: p.id,
    service: p.service,
    portName: p.portName,
    protocol: p.protocol,
    family: p.family,
    type: p.type,
    frontends: frontendsOf(p),
    sourceRanges: p.loadBalancerSourceRanges,
    policies: {
      internalTrafficPolicy: p.internalPolicyLocal ? 'Local' : 'Cluster',
      externalTrafficPolicy: p.externallyAccessible ? (p.externalPolicyLocal ? 'Local' : 'Cluster') : '',
      sessionAffinity: p.sessionAffinity,
      stickySeconds: p.stickyMaxAgeSeconds,
      loadBalancing: balancingOf(lb.mode, p, lb.nodeDefault).text,
      topology: sel?.topologyMode ?? '',
      healthCheckNodePort: p.healthCheckNodePort,
    },
    endpoints: endpointVerdicts(p, sel, eps, state.node.name),
  };
  if (!description) return out;
  const drift = compareEntries(description.expected, description.kernel);
  const sorted = {
    ...description,
    kernel: [...description.kernel].sort(byPlace),
    expected: [...description.expected].sort(byPlace),
  };
  return { ...out, kernel: { ...sorted, drift, agrees: drift.missing.length === 0 && drift.unexpected.length === 0 } };
}

/** The service ports a NAMESPACE/NAME[:PORT] names (PORT: the port's name or number); all when undefined. */
export function matchPorts(state: DesiredState, target: string | undefined): ServicePortInfo[] {
  const all = [...state.services.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (target === undefined || target === '') return all;
  const colon = target.indexOf(':');
  const svc = colon < 0 ? target : target.slice(0, colon);
  const port = colon < 0 ? undefined : target.slice(colon + 1);
  const key = svc.includes('/') ? svc : `default/${svc}`;
  return all.filter((p) => p.service === key && (port === undefined || p.portName === port || String(p.port) === port));
}
