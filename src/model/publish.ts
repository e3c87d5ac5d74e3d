// Turns applied inputs into the published DesiredState, one Service at a time, and records
// what differs (the ChangeSet). Work is proportional to the Services recomputed: their ports
// and endpoints are rebuilt from the stored slices, compared with what was published, and
// swapped in only where they differ.

import type { ServiceKey, ServicePortId } from './ids.ts';
import { deepEqual } from './equal.ts';
import { mergeSlices } from './endpoints.ts';
import type { SliceInfo } from './slice.ts';
import { staleTargets } from './stale.ts';
import type { PublishedState } from './state.ts';
import { categorizeEndpoints, type TopologyContext } from './topology.ts';
import type { EndpointInfo, PreviousPort, ServicePortInfo, StaleTarget } from './types.ts';

const NO_ENDPOINTS: readonly EndpointInfo[] = Object.freeze([]);
const NO_IDS: readonly ServicePortId[] = Object.freeze([]);

const FEW = 8;

/** A Service has few ports: a scan costs less than a map per recompute. */
function portById(ports: readonly ServicePortInfo[], id: ServicePortId): ServicePortInfo | undefined {
  for (const p of ports) if (p.id === id) return p;
  return undefined;
}

/** What one checkout accumulates. */
export interface Collected {
  readonly services: Set<ServicePortId>;
  readonly previous: Map<ServicePortId, PreviousPort>;
  readonly serviceKeys: Set<ServiceKey>;
  readonly stale: StaleTarget[];
}

export const newCollected = (): Collected => ({
  services: new Set(),
  previous: new Map(),
  serviceKeys: new Set(),
  stale: [],
});

export class Publisher {
  readonly state: PublishedState;
  /** Service port ids currently published per Service. */
  private readonly idsByService = new Map<ServiceKey, readonly ServicePortId[]>();

  constructor(state: PublishedState) {
    this.state = state;
  }

  /** Recomputes one Service's ports, endpoints and selections; publishes what differs. */
  recompute(
    key: ServiceKey,
    ports: readonly ServicePortInfo[],
    slices: ReadonlyMap<string, SliceInfo> | undefined,
    ctx: TopologyContext,
    c: Collected,
  ): void {
    // Slices of a Service that does not exist (yet) are kept by the caller but publish nothing.
    const eps = ports.length > 0 ? mergeSlices(key, slices, ctx.nodeName) : undefined;
    const oldIds = this.idsByService.get(key) ?? NO_IDS;
    // Lookups by scanning, as a Service has few ports; maps only for one with many.
    const byId = ports.length > FEW ? new Map(ports.map((p) => [p.id, p])) : undefined;
    const wasPublished = oldIds.length > FEW ? new Set(oldIds) : undefined;
    let changed = false;
    // The ports published before (in their order), then the new ones.
    for (const id of oldIds)
      changed = this.publishPort(id, byId ? byId.get(id) : portById(ports, id), eps, ctx, c) || changed;
    for (const p of ports) {
      if (wasPublished ? wasPublished.has(p.id) : oldIds.includes(p.id)) continue;
      changed = this.publishPort(p.id, p, eps, ctx, c) || changed;
    }
    if (ports.length > 0)
      this.idsByService.set(
        key,
        ports.map((p) => p.id),
      );
    else this.idsByService.delete(key);
    if (changed) {
      c.serviceKeys.add(key);
      this.updateHealthCheck(key, ports);
    }
  }

  /** Publishes one port's info, endpoints and selection if they differ; true when they did. */
  private publishPort(
    id: ServicePortId,
    newInfo: ServicePortInfo | undefined,
    eps: ReadonlyMap<ServicePortId, readonly EndpointInfo[]> | undefined,
    ctx: TopologyContext,
    c: Collected,
  ): boolean {
    const st = this.state;
    const oldInfo = st.services.get(id);
    const oldEps = st.endpoints.get(id) ?? NO_ENDPOINTS;
    const newEps = (newInfo && eps?.get(id)) || NO_ENDPOINTS;
    if (deepEqual(oldInfo, newInfo) && deepEqual(oldEps, newEps)) return false;
    this.remember(id, c);
    const stale = staleTargets(oldInfo, oldEps, newInfo, newEps);
    if (stale.length > 0) c.stale.push(...stale);
    if (newInfo) {
      st.services.set(id, newInfo);
      if (newEps.length > 0) st.endpoints.set(id, newEps);
      else st.endpoints.delete(id);
      st.selections.set(id, categorizeEndpoints(newInfo, newEps, ctx));
    } else {
      st.services.delete(id);
      st.endpoints.delete(id);
      st.selections.delete(id);
    }
    return true;
  }

  /** After a zone change: recompute every selection, recording the ones that differ. */
  reselectAll(ctx: TopologyContext, c: Collected): void {
    const st = this.state;
    for (const [id, info] of st.services) {
      const sel = categorizeEndpoints(info, st.endpoints.get(id) ?? NO_ENDPOINTS, ctx);
      if (deepEqual(sel, st.selections.get(id))) continue;
      this.remember(id, c);
      st.selections.set(id, sel);
      c.serviceKeys.add(info.service);
    }
  }

  /** Records a port's state before its first change in this checkout. */
  private remember(id: ServicePortId, c: Collected): void {
    if (c.previous.has(id)) return;
    const st = this.state;
    c.services.add(id);
    c.previous.set(id, {
      info: st.services.get(id),
      endpoints: st.endpoints.get(id) ?? NO_ENDPOINTS,
      selection: st.selections.get(id),
    });
  }

  private updateHealthCheck(key: ServiceKey, ports: readonly ServicePortInfo[]): void {
    const st = this.state;
    const first = ports.find((p) => p.healthCheckNodePort !== 0);
    if (!first) {
      st.healthChecks.delete(key);
      return;
    }
    // Count IPs, not ip:port pairs: a pod serving two ports is one endpoint (upstream).
    const ips = new Set<string>();
    for (const p of ports)
      for (const ep of st.endpoints.get(p.id) ?? NO_ENDPOINTS) if (ep.isLocal && ep.ready) ips.add(ep.ip);
    st.healthChecks.set(key, {
      service: key,
      namespace: first.namespace,
      name: first.name,
      nodePort: first.healthCheckNodePort,
      localEndpoints: ips.size,
    });
  }
}
