// `kube-proxy-ts explain` and the per-Service traffic counters for the IPVS mode: the virtual
// servers of one service port and their real servers, read back from the kernel (one GET per
// virtual server, one dump of its destinations), beside what the last sync planned; and the
// kernel's own per-virtual-server stats (packets, bytes, connections), read at scrape time.

import type { ServicePortId, ServicePortInfo } from '../../model/index.ts';
import type { IpvsAddrKey, IpvsClient, IpvsService } from '../../netlink/ipvs/index.ts';
import type { PortDescription, ProgrammedEntry, TrafficSample } from '../types.ts';
import type { PlanContext, PortPlan, VsPlan } from './plan.ts';
import { destKey, vsKey } from './plan.ts';

const vsValue = (scheduler: string, timeout: number): string =>
  timeout > 0 ? `${scheduler} persistent ${timeout}` : scheduler;

export function plannedEntries(plan: PortPlan | undefined): ProgrammedEntry[] {
  const out: ProgrammedEntry[] = [];
  for (const vs of plan?.vss ?? []) {
    out.push({ where: 'ipvs', key: vs.key, value: vsValue(vs.scheduler, vs.timeout) });
    for (const [key] of vs.dests) out.push({ where: vs.key, key, value: 'masq weight 1' });
  }
  return out;
}

/** The virtual servers the port would have: the planned ones, else those its frontends name. */
function addresses(info: ServicePortInfo, plan: PortPlan | undefined, ctx: PlanContext | undefined): IpvsAddrKey[] {
  if (plan) return plan.vss.map((v) => v.addr);
  const protocol = info.protocol.toLowerCase() as IpvsAddrKey['protocol'];
  const at = (address: string, port: number): IpvsAddrKey => ({ family: info.family, protocol, address, port });
  const out = [
    at(info.clusterIP, info.port),
    ...[...info.externalIPs, ...info.loadBalancerVIPs].map((ip) => at(ip, info.port)),
  ];
  if (info.nodePort > 0) for (const ip of ctx?.nodePortIPs ?? []) out.push(at(ip, info.nodePort));
  return out;
}

export async function describeIpvsPort(
  ipvs: IpvsClient,
  info: ServicePortInfo,
  plan: PortPlan | undefined,
  ctx: PlanContext | undefined,
): Promise<PortDescription> {
  const kernel: ProgrammedEntry[] = [];
  for (const addr of addresses(info, plan, ctx)) {
    const vs = await ipvs.getService(addr);
    if (!vs) continue;
    const key = vsKey(addr);
    kernel.push({ where: 'ipvs', key, value: vsValue(vs.scheduler, vs.timeout) });
    for (const d of await ipvs.listDestinations(addr)) {
      kernel.push({ where: key, key: destKey(d.address, d.port), value: `${d.forward} weight ${d.weight}` });
    }
  }
  return { mode: 'ipvs', kernel, expected: plannedEntries(plan) };
}

/** cluster-ip (the first virtual server of a plan), node-port (a node address on another port), external. */
function frontendKind(plan: PortPlan, vs: VsPlan, i: number, ctx: PlanContext | undefined): string {
  if (i === 0) return 'cluster-ip';
  const nodePort = (ctx?.nodePortIPs ?? []).includes(vs.addr.address) && vs.addr.port !== plan.vss[0]!.addr.port;
  return nodePort ? 'node-port' : 'external';
}

/** One dump of every virtual server; the samples of the planned ones, summed per frontend kind. */
export async function ipvsTrafficCounters(
  ipvs: IpvsClient,
  ports: ReadonlyMap<ServicePortId, PortPlan>,
  ctx: PlanContext | undefined,
): Promise<TrafficSample[]> {
  const byKey = new Map<string, IpvsService>();
  for (const s of await ipvs.listServices())
    if (!('fwmark' in s && typeof s.fwmark === 'number')) byKey.set(vsKey(s as IpvsAddrKey), s);
  const out: TrafficSample[] = [];
  for (const [id, plan] of ports) {
    const sums = new Map<string, { packets: number; bytes: number; connections: number }>();
    plan.vss.forEach((vs, i) => {
      const s = byKey.get(vs.key);
      if (!s || s.family !== vs.addr.family) return;
      const kind = frontendKind(plan, vs, i, ctx);
      const sum = sums.get(kind) ?? { packets: 0, bytes: 0, connections: 0 };
      sum.packets += Number(s.stats.inPkts);
      sum.bytes += Number(s.stats.inBytes);
      sum.connections += Number(s.stats.conns);
      sums.set(kind, sum);
    });
    for (const [frontend, sum] of sums) out.push({ id, frontend, ...sum });
  }
  return out;
}
