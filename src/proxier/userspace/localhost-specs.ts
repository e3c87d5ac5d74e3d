// The sockets of nftables mode's localhost NodePorts (KubeProxyNFTablesLocalhostNodePorts): one
// TCP listener on the family's loopback address at each TCP node port, balancing over the
// endpoints node-port traffic uses (the Service's cluster selection, or its local one with
// externalTrafficPolicy=Local, as upstream's localnodeportproxy). A node port without such an
// endpoint gets no listener (connections are refused). UDP and SCTP get none: the nftables
// ruleset rejects them. Pure.

import type { DesiredState } from '../../model/index.ts';
import type { ProxyPortSpec } from './proxy/types.ts';
import { portalComment } from './rules.ts';

export function localhostNodePortSpecs(desired: DesiredState): ProxyPortSpec[] {
  if (!desired.nodePortAddresses.localhost) return [];
  const byPort = new Map<number, ProxyPortSpec>();
  for (const [id, info] of desired.services) {
    if (info.nodePort === 0 || info.protocol !== 'TCP' || byPort.has(info.nodePort)) continue;
    const sel = desired.selections.get(id);
    const endpoints = (info.externalPolicyLocal ? sel?.local : sel?.cluster) ?? [];
    if (endpoints.length === 0) continue;
    byPort.set(info.nodePort, {
      id: `localhost-nodeport/tcp/${info.nodePort}`,
      name: portalComment(info),
      protocol: 'TCP',
      backends: endpoints.map((e) => ({ ip: e.ip, port: e.port })),
      affinitySeconds: info.sessionAffinity === 'ClientIP' ? info.stickyMaxAgeSeconds : 0,
      listenPort: info.nodePort,
    });
  }
  return [...byPort.values()];
}
