// Per-Service traffic counters in iptables mode (--service-traffic-metrics): new connections
// only, from the counters iptables-nft puts in every rule (ours too, flag or not: the ruleset
// is the same either way). The rules that send a frontend's traffic to the port's chains are
// in the nat table's KUBE-SERVICES (cluster IP -> KUBE-SVC/SVL, external and load-balancer
// IPs -> KUBE-EXT/FW) and KUBE-NODEPORTS (-> KUBE-EXT); conntrack runs nat chains for a
// connection's first packet only, so each of these rules counts connections, exactly.
//
// Packets and bytes are not counted in this mode: no rule of upstream's ruleset sees every
// packet of one Service, and adding one rule per frontend to a chain every packet walks would
// cost each packet a linear scan of the Services (iptables has no verdict maps). The
// nftables and IPVS modes count them.

import type { IPFamily } from '../../base/ip.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { NftRule } from '../../netlink/nftables/index.ts';
import { decodeIptRule } from '../../netlink/nftables/iptables/decode.ts';
import type { ServicePortId, ServicePortInfo } from '../../model/index.ts';
import type { TrafficSample } from '../types.ts';
import { Chain, portChainNames } from './names.ts';
import type { TableClient } from '../iptables-nft/writer-types.ts';

type Frontend = 'cluster-ip' | 'external' | 'node-port';

/** The frontend kind a capture rule in `chain` jumping to `target` counts, and whose port it is. */
function owners(ports: Iterable<ServicePortInfo>): Map<string, { id: ServicePortId; internal: boolean }> {
  const out = new Map<string, { id: ServicePortId; internal: boolean }>();
  for (const p of ports) {
    const n = portChainNames(p);
    out.set(n.svc, { id: p.id, internal: true });
    out.set(n.svl, { id: p.id, internal: true });
    out.set(n.ext, { id: p.id, internal: false });
    out.set(n.fw, { id: p.id, internal: false });
  }
  return out;
}

async function listChain(nat: TableClient, chain: string): Promise<NftRule[]> {
  try {
    return (await nat.listRules(chain)).filter((r) => r.chain === chain);
  } catch (e) {
    if (isNotFound(e)) return [];
    throw e;
  }
}

/** New connections per programmed service port and frontend kind, read from the nat table now. */
export async function iptablesTrafficCounters(
  nat: TableClient | undefined,
  family: IPFamily,
  ports: Iterable<ServicePortInfo>,
): Promise<TrafficSample[]> {
  if (!nat) return [];
  const own = owners(ports);
  const sums = new Map<string, { id: ServicePortId; frontend: Frontend; connections: number }>();
  for (const chain of [Chain.SERVICES, Chain.NODE_PORTS]) {
    for (const listed of await listChain(nat, chain)) {
      const rule = decodeIptRule(listed, 'nat', family);
      if (rule?.target.t !== 'jump') continue;
      const o = own.get(rule.target.chain);
      if (!o) continue;
      const frontend: Frontend = chain === Chain.NODE_PORTS ? 'node-port' : o.internal ? 'cluster-ip' : 'external';
      const counter = listed.exprs.find((e) => e.type === 'counter');
      const n = counter?.type === 'counter' ? Number(counter.packets ?? 0n) : 0;
      const key = `${o.id}|${frontend}`;
      const acc = sums.get(key) ?? { id: o.id, frontend, connections: 0 };
      acc.connections += n; // one rule per external IP: their sum
      sums.set(key, acc);
    }
  }
  return [...sums.values()];
}
