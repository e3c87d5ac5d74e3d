// Which endpoints this node sends a service port's traffic to (upstream CategorizeEndpoints).
//
// Cluster policy uses ready endpoints, narrowed by topology hints when every ready endpoint
// carries them and some are meant for this node (or its zone); Local policy uses this node's
// ready endpoints. Each falls back, independently, to serving-and-terminating endpoints when
// it has no ready one, so that connections drain during rollouts instead of failing.

import type { EndpointInfo, EndpointSelection, ServicePortInfo, TopologyMode } from './types.ts';

export interface TopologyContext {
  readonly nodeName: string;
  /** The node's topology.kubernetes.io/zone; '' when unknown (zone hints then unusable). */
  readonly zone: string;
  /** PreferSameTrafficDistribution: honour node hints. */
  readonly nodeHints: boolean;
}

const NOTHING: EndpointSelection = {
  cluster: [],
  local: [],
  allReachable: [],
  hasAnyEndpoints: false,
  topologyMode: '',
};

const usableFallback = (ep: EndpointInfo): boolean => ep.serving && ep.terminating;

/**
 * endpoints.filter(keep), or the list itself when every endpoint is kept (the usual case):
 * a selection is held for every service port, so it shares the model's list rather than copy it.
 */
function keepIf(endpoints: readonly EndpointInfo[], keep: (ep: EndpointInfo) => boolean): readonly EndpointInfo[] {
  for (let i = 0; i < endpoints.length; i++) if (!keep(endpoints[i]!)) return endpoints.filter(keep);
  return endpoints;
}

export function categorizeEndpoints(
  info: Pick<ServicePortInfo, 'usesClusterEndpoints' | 'usesLocalEndpoints'>,
  endpoints: readonly EndpointInfo[],
  ctx: TopologyContext,
): EndpointSelection {
  if (endpoints.length === 0) return NOTHING;
  let cluster: readonly EndpointInfo[] = [];
  let local: readonly EndpointInfo[] = [];
  let hasAnyEndpoints = false;
  let topologyMode: TopologyMode = '';

  if (info.usesClusterEndpoints) {
    topologyMode = topologyModeFromHints(endpoints, ctx);
    cluster = keepIf(endpoints, (ep) => ep.ready && availableForTopology(ep, topologyMode, ctx));
    // A mode is chosen only when this node has a ready endpoint under it, so an empty list here
    // means there is no ready endpoint anywhere: fall back to terminating ones.
    if (cluster.length === 0) cluster = endpoints.filter(usableFallback);
    hasAnyEndpoints = cluster.length > 0;
  }
  if (!info.usesLocalEndpoints) return { cluster, local, allReachable: cluster, hasAnyEndpoints, topologyMode };

  let localReady = false;
  let localFallback = false;
  for (const ep of endpoints) {
    if (ep.ready) {
      hasAnyEndpoints = true;
      if (ep.isLocal) localReady = true;
    } else if (usableFallback(ep)) {
      hasAnyEndpoints = true;
      if (ep.isLocal) localFallback = true;
    }
  }
  if (localReady) local = endpoints.filter((ep) => ep.isLocal && ep.ready);
  else if (localFallback) local = endpoints.filter((ep) => ep.isLocal && usableFallback(ep));

  if (!info.usesClusterEndpoints) return { cluster, local, allReachable: local, hasAnyEndpoints, topologyMode };
  // Without topology and with ready local endpoints, cluster already holds every local one.
  if (topologyMode === '' && !localFallback)
    return { cluster, local, allReachable: cluster, hasAnyEndpoints, topologyMode };
  const union = new Map<string, EndpointInfo>();
  for (const ep of cluster) union.set(ep.key, ep);
  for (const ep of local) union.set(ep.key, ep);
  const allReachable = [...union.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { cluster, local, allReachable, hasAnyEndpoints, topologyMode };
}

/**
 * Node hints when every ready endpoint has some and one is for this node; else zone hints when
 * every ready endpoint has some and one is for this node's zone; else no topology.
 */
export function topologyModeFromHints(endpoints: readonly EndpointInfo[], ctx: TopologyContext): TopologyMode {
  let anyReady = false;
  let allNode = true;
  let forNode = false;
  let allZone = true;
  let forZone = false;
  for (let i = 0; i < endpoints.length; i++) {
    const ep = endpoints[i]!;
    if (!ep.ready) continue;
    anyReady = true;
    if (ep.nodeHints.length === 0) allNode = false;
    else if (ep.nodeHints.includes(ctx.nodeName)) forNode = true;
    if (ep.zoneHints.length === 0) allZone = false;
    else if (ctx.zone !== '' && ep.zoneHints.includes(ctx.zone)) forZone = true;
  }
  if (!anyReady) return '';
  if (ctx.nodeHints && allNode && forNode) return 'PreferSameNode';
  if (allZone && forZone) return 'PreferSameZone';
  return '';
}

function availableForTopology(ep: EndpointInfo, mode: TopologyMode, ctx: TopologyContext): boolean {
  if (mode === 'PreferSameNode') return ep.nodeHints.includes(ctx.nodeName);
  if (mode === 'PreferSameZone') return ep.zoneHints.includes(ctx.zone);
  return true;
}
