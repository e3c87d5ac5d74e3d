// UDP conntrack entries that still lead to a proxy port no longer in use. A UDP client that
// keeps its address and port keeps its conntrack entry, whose NAT was decided when the entry
// was made: after the Service's socket moved (a restart, a new socket), its datagrams would
// still go to the old port until the entry expires. Such entries are deleted so the next
// datagram meets the rules again.

import type { IPFamily } from '../../base/ip.ts';
import { IPPROTO } from '../../netlink/conntrack/index.ts';
import type { Flow, FlowFilter } from '../../netlink/conntrack/index.ts';

/** What the proxier needs of a conntrack client (netlink/conntrack ConntrackClient). */
export interface FlowTable {
  dump(filter: FlowFilter): Promise<Flow[]>;
  deleteMany(flows: Iterable<Flow>): Promise<{ deleted: number }>;
}

/** A UDP service port's frontends and the port its socket listens on now. */
export interface UdpFrontends {
  /** Cluster IP, external IPs, load-balancer IPs, each with the Service port. */
  readonly portals: readonly { readonly ip: string; readonly port: number }[];
  /** 0: none. */
  readonly nodePort: number;
  readonly proxyPort: number;
}

/**
 * Entries to one of the frontends that were translated (the reply comes from another port
 * than the one asked) to another port than the current proxy port: to a socket gone, or to an
 * endpoint by a kernel mode that ran before.
 */
export function staleUdpFlows(flows: readonly Flow[], services: readonly UdpFrontends[]): Flow[] {
  const byPortal = new Map<string, number>();
  const byNodePort = new Map<number, number>();
  for (const s of services) {
    for (const p of s.portals) byPortal.set(`${p.ip}|${p.port}`, s.proxyPort);
    if (s.nodePort !== 0) byNodePort.set(s.nodePort, s.proxyPort);
  }
  return flows.filter((f) => {
    const asked = f.orig.dstPort;
    const answered = f.reply.srcPort;
    if (asked === undefined || answered === undefined || answered === asked) return false;
    const want = byPortal.get(`${f.orig.dst}|${asked}`) ?? byNodePort.get(asked);
    return want !== undefined && answered !== want;
  });
}

/** Deletes the stale entries of `services` (the UDP ports whose socket is new); returns how many. */
export async function deleteStaleUdp(
  table: FlowTable,
  family: IPFamily,
  services: readonly UdpFrontends[],
): Promise<number> {
  if (services.length === 0) return 0;
  const flows = await table.dump({ family, proto: IPPROTO.UDP });
  const stale = staleUdpFlows(flows, services);
  if (stale.length === 0) return 0;
  return (await table.deleteMany(stale)).deleted;
}
