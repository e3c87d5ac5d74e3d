// Where the per-Service health-check node ports listen: on the node IPs that nodePortAddresses
// selects, as upstream's service health server (pkg/proxy/healthcheck/service_health.go:
// every address when nodePortAddresses matches all, else the node's IPs inside its CIDRs;
// "primary" is the node IP of each family). Pure: the local addresses are passed in.

import { cidrContains, parseCIDR, parseIP } from '../base/ip.ts';
import type { DesiredState } from '../model/index.ts';

export interface HealthAddressChoice {
  /** IPs to bind; [''] = every address. */
  addresses: string[];
  /** Set when nothing matched and every address is used instead (worth a log line). */
  fallback?: string;
}

export function healthCheckAddresses(
  nodePortAddresses: readonly string[],
  states: readonly Pick<DesiredState, 'node'>[],
  localAddresses: readonly string[],
): HealthAddressChoice {
  if (nodePortAddresses.length === 0 || nodePortAddresses.includes('all')) return { addresses: [''] };
  const cidrs = nodePortAddresses.flatMap((s) =>
    s === 'localhost' ? ['127.0.0.0/8', '::1/128'] : s === 'primary' ? [] : [s],
  );
  // Both families' zero CIDRs: every address (one family's alone matches each of its IPs below).
  if (cidrs.includes('0.0.0.0/0') && cidrs.includes('::/0')) return { addresses: [''] };
  const out = new Set<string>();
  if (nodePortAddresses.includes('primary'))
    for (const s of states) if (s.node.primaryIP !== '') out.add(s.node.primaryIP);
  const parsed = cidrs.map((c) => parseCIDR(c)).filter((c) => c !== undefined);
  for (const a of localAddresses) {
    const ip = parseIP(a);
    if (ip !== undefined && parsed.some((c) => cidrContains(c, ip))) out.add(ip.text);
  }
  if (out.size === 0)
    return { addresses: [''], fallback: `no node IP matches nodePortAddresses ${nodePortAddresses.join(',')}` };
  return { addresses: [...out].sort() };
}
