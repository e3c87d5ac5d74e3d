// Conntrack entries that outlive a change (upstream detectStaleConntrackEntries and
// conntrack cleanup). UDP and SCTP have no connection teardown a NAT rule change could ride
// on: an entry keeps sending a client's datagrams to the endpoint it was first DNATed to, or
// keeps the "no endpoint" verdict cached, until it times out. DNS black holes come from here.

import type { EndpointInfo, ServicePortInfo, StaleTarget } from './types.ts';

const serviceIPs = (info: ServicePortInfo): string[] => [info.clusterIP, ...info.externalIPs, ...info.loadBalancerVIPs];

/**
 * Stale targets for one service port, given its info and full endpoint list before and after.
 * Endpoints count while serving (traffic could have been sent to them).
 */
export function staleTargets(
  prevInfo: ServicePortInfo | undefined,
  prevEndpoints: readonly EndpointInfo[],
  curInfo: ServicePortInfo | undefined,
  curEndpoints: readonly EndpointInfo[],
): StaleTarget[] {
  const info = curInfo ?? prevInfo;
  if (!info || info.protocol === 'TCP') return [];
  const base = (i: ServicePortInfo) => ({
    service: i.id,
    family: i.family,
    protocol: i.protocol as 'UDP' | 'SCTP',
    serviceIPs: serviceIPs(i),
    port: i.port,
    nodePort: i.nodePort,
  });
  if (!curInfo) return prevInfo ? [{ reason: 'service-deleted', ...base(prevInfo) }] : [];

  const out: StaleTarget[] = [];
  const cur = new Map<string, EndpointInfo>();
  let curServing = 0;
  for (const ep of curEndpoints) {
    cur.set(ep.key, ep);
    if (ep.serving) curServing++;
  }
  let prevServing = 0;
  // A port that was not programmed before had no endpoints anyone could reach.
  if (prevInfo) {
    for (const ep of prevEndpoints) {
      if (!ep.serving) continue;
      prevServing++;
      const now = cur.get(ep.key);
      if (now?.serving) continue;
      out.push({ reason: 'endpoint-removed', ...base(curInfo), endpointIP: ep.ip, endpointPort: ep.port });
    }
  }
  if (prevServing === 0 && curServing > 0) out.push({ reason: 'newly-active', ...base(curInfo) });
  return out;
}
