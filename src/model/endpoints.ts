// All slices of one Service -> endpoints per service port (upstream endpointInfoByServicePort).
// A slice port (name, protocol, number) says where its endpoints listen for the Service port
// of the same name and protocol: that is how a named targetPort resolves per pod. The same
// address may appear in several slices (during moves between slices); it is kept once per
// ip:port, preferring the copy that says it is local, as upstream does.

import { endpointKey, servicePortId, type ServiceKey, type ServicePortId } from './ids.ts';
import type { SliceInfo } from './slice.ts';
import type { EndpointInfo } from './types.ts';

export function mergeSlices(
  key: ServiceKey,
  slices: ReadonlyMap<string, SliceInfo> | undefined,
  nodeName: string,
): Map<ServicePortId, EndpointInfo[]> {
  const out = new Map<ServicePortId, EndpointInfo[]>();
  if (!slices || slices.size === 0) return out;
  // Slice names in order so that, between equal duplicates, the outcome never depends on arrival order.
  const names = [...slices.keys()].sort();
  const byPort = new Map<ServicePortId, Map<string, EndpointInfo>>();
  for (const sliceName of names) {
    const slice = slices.get(sliceName)!;
    for (const sp of slice.ports) {
      const id = servicePortId(key, sp.name, sp.protocol);
      let set = byPort.get(id);
      if (!set) byPort.set(id, (set = new Map()));
      for (const ep of slice.endpoints) {
        const k = endpointKey(ep.ip, sp.port);
        const isLocal = nodeName !== '' && ep.nodeName === nodeName;
        if (set.has(k) && !isLocal) continue;
        set.set(k, {
          key: k,
          ip: ep.ip,
          port: sp.port,
          ready: ep.ready,
          serving: ep.serving,
          terminating: ep.terminating,
          nodeName: ep.nodeName,
          zone: ep.zone,
          isLocal,
          zoneHints: ep.zoneHints,
          nodeHints: ep.nodeHints,
        });
      }
    }
  }
  for (const [id, set] of byPort) {
    if (set.size === 0) continue;
    const list = [...set.values()];
    list.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    out.set(id, list);
  }
  return out;
}
