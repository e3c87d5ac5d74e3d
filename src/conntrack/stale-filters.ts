// From the model's stale targets to ctnetlink filters: the pure, netlink-facing half of the
// flusher (plan.ts groups them; flusher.ts deletes what they select, by a kernel-side flush
// where the kernel matches a filter exactly, else by dump and delete).
//
//   endpoint-removed   orig dst = each Service IP:port, and orig dport = the NodePort (any
//                      node address), whose reply came from the removed endpoint IP:port
//   newly-active       the same destinations, any reply (entries cached while rejected)
//   service-deleted    the same destinations, any reply
//
// TCP never appears: the model emits UDP and SCTP targets only.

import { parseIP } from '../base/ip.ts';
import type { StaleTarget } from '../model/index.ts';
import { IPPROTO } from '../netlink/conntrack/index.ts';
import type { FlowFilter, TupleMatch } from '../netlink/conntrack/index.ts';

/** The filters selecting the entries one stale target makes obsolete. */
export function staleFlowFilters(t: StaleTarget): FlowFilter[] {
  const proto = t.protocol === 'UDP' ? IPPROTO.UDP : IPPROTO.SCTP;
  let reply: TupleMatch | undefined;
  if (t.reason === 'endpoint-removed') {
    const ep = t.endpointIP === undefined ? undefined : parseIP(t.endpointIP);
    // Without a usable endpoint address the target would widen to every flow: skip it.
    if (!ep || ep.family !== t.family) return [];
    reply = { src: ep.text, ...(t.endpointPort ? { srcPort: t.endpointPort } : {}) };
  }
  const out: FlowFilter[] = [];
  const seen = new Set<string>();
  for (const text of t.serviceIPs) {
    const ip = parseIP(text);
    if (!ip || ip.family !== t.family || seen.has(ip.text)) continue;
    seen.add(ip.text);
    out.push({ family: t.family, proto, orig: { dst: ip.text, dstPort: t.port }, ...(reply ? { reply } : {}) });
  }
  if (t.nodePort > 0) out.push({ family: t.family, proto, orig: { dstPort: t.nodePort }, ...(reply ? { reply } : {}) });
  return out;
}

/** The filters of many targets, without duplicates. */
export function staleFlowFiltersAll(targets: Iterable<StaleTarget>): FlowFilter[] {
  const out = new Map<string, FlowFilter>();
  for (const t of targets) for (const f of staleFlowFilters(t)) out.set(JSON.stringify(f), f);
  return [...out.values()];
}
