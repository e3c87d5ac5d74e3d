// All slices of a Service -> endpoints per service port (upstream endpointInfoByServicePort).
// A slice port (name, protocol, number) says where its endpoints listen for the Service port
// of the same name and protocol: that is how a named targetPort resolves per pod. The same
// address may appear in several slices (during moves between slices); it is kept once per
// ip:port, preferring the copy that says it is local, as upstream does.
//
// A slice's endpoints are stored in the form published for its first port (slice.ts): the
// usual Service, one slice with one port, publishes that list as it is.

import { servicePortId, type ServiceKey, type ServicePortId } from './ids.ts';
import { forPort } from './slice.ts';
import type { SliceInfo } from './slice.ts';
import type { EndpointInfo } from './types.ts';

export function mergeSlices(
  key: ServiceKey,
  slices: ReadonlyMap<string, SliceInfo> | undefined,
  nodeName: string,
): Map<ServicePortId, readonly EndpointInfo[]> {
  const out = new Map<ServicePortId, readonly EndpointInfo[]>();
  if (!slices || slices.size === 0) return out;
  if (slices.size === 1) {
    // The usual case: one slice, whose ports are distinct, so each port's list is its own.
    for (const slice of slices.values()) {
      for (let p = 0; p < slice.ports.length; p++) {
        const sp = slice.ports[p]!;
        const eps = p === 0 ? slice.endpoints : slice.endpoints.map((ep) => forPort(ep, sp.port, nodeName));
        if (eps.length > 0) out.set(servicePortId(key, sp.name, sp.protocol), settle(eps));
      }
    }
    return out;
  }
  // Slice names in order so that, between equal duplicates, the outcome never depends on arrival order.
  const names = slices.size === 1 ? slices.keys() : [...slices.keys()].sort();
  // Per port, the endpoint lists of every slice that has it, in slice order.
  const parts = new Map<ServicePortId, (readonly EndpointInfo[])[]>();
  for (const sliceName of names) {
    const slice = slices.get(sliceName)!;
    for (let p = 0; p < slice.ports.length; p++) {
      const sp = slice.ports[p]!;
      const id = servicePortId(key, sp.name, sp.protocol);
      const eps = p === 0 ? slice.endpoints : slice.endpoints.map((ep) => forPort(ep, sp.port, nodeName));
      const list = parts.get(id);
      if (list) list.push(eps);
      else parts.set(id, [eps]);
    }
  }
  for (const [id, lists] of parts) {
    const all = lists.length === 1 ? lists[0]! : lists.flat();
    if (all.length > 0) out.set(id, settle(all));
  }
  return out;
}

/** Sorted by key, one endpoint per ip:port; the list itself when it already is. */
function settle(all: readonly EndpointInfo[]): readonly EndpointInfo[] {
  // A stable sort: copies of one ip:port stay in slice order.
  const sorted = isSortedByKey(all) ? all : [...all].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return withoutDuplicates(sorted);
}

function isSortedByKey(list: readonly EndpointInfo[]): boolean {
  for (let i = 1; i < list.length; i++) if (list[i - 1]!.key > list[i]!.key) return false;
  return true;
}

/**
 * One endpoint per ip:port from a list sorted by key: of several copies, the last one that
 * says it is local, else the first (what upstream's map of endpoints ends up holding).
 * Returns the list itself when it has no duplicates, the usual case.
 */
function withoutDuplicates(sorted: readonly EndpointInfo[]): readonly EndpointInfo[] {
  let i = 1;
  while (i < sorted.length && sorted[i]!.key !== sorted[i - 1]!.key) i++;
  if (i >= sorted.length) return sorted;
  const out: EndpointInfo[] = [];
  for (let start = 0; start < sorted.length;) {
    let end = start + 1;
    let pick = sorted[start]!;
    for (; end < sorted.length && sorted[end]!.key === pick.key; end++) if (sorted[end]!.isLocal) pick = sorted[end]!;
    out.push(pick);
    start = end;
  }
  return out;
}
