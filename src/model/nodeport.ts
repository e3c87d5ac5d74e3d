// Which node addresses accept NodePort traffic (upstream NodePortAddresses and the "primary"
// handling in kube-proxy's server setup). The model cannot list interfaces (that is I/O), so
// it says which CIDRs match; a proxier matches local addresses against them, or uses
// "fib daddr type local" when matchAll.

import { cidrContains, isLoopback, parseCIDR, parseIP, type IPFamily } from '../base/ip.ts';
import { Issues } from './issues.ts';
import type { NodeInfo, NodePortAddresses } from './types.ts';

export const NODE_PORT_ADDRESSES_PRIMARY = 'primary';

export function selectNodePortAddresses(
  spec: readonly string[] | undefined,
  family: IPFamily,
  node: NodeInfo,
  issues: Issues = new Issues(),
): NodePortAddresses {
  const zero = family === 'IPv4' ? '0.0.0.0/0' : '::/0';
  const list = spec ?? [];
  const primary = list.includes(NODE_PORT_ADDRESSES_PRIMARY);
  const texts: string[] = [];
  if (primary) {
    // Upstream: the node IP of this family as a host route, unless it is loopback (a fallback).
    const ip = node.primaryIP ? parseIP(node.primaryIP) : undefined;
    if (ip && !isLoopback(ip)) texts.push(`${ip.text}/${family === 'IPv4' ? 32 : 128}`);
  }
  for (const s of list) {
    if (s === NODE_PORT_ADDRESSES_PRIMARY) continue;
    const c = s.includes('/') ? parseCIDR(s) : undefined;
    if (!c) issues.add('invalid-cidr', `nodePortAddresses '${s}'`);
    else if (c.family === family && !texts.includes(c.text)) texts.push(c.text);
  }
  // No CIDR of this family (or a zero CIDR): every local address, as upstream.
  if (texts.length === 0 || texts.some((t) => parseCIDR(t)!.prefix === 0)) {
    return { matchAll: true, cidrs: [zero], primary, containsIPv4Loopback: family === 'IPv4' };
  }
  const loopback = parseIP('127.0.0.0')!;
  const containsIPv4Loopback = texts.some((t) => {
    const c = parseCIDR(t)!;
    return c.family === 'IPv4' && (isLoopback(c.addr) || cidrContains(c, loopback));
  });
  return { matchAll: false, cidrs: texts, primary, containsIPv4Loopback };
}

/** Whether a local address of the node accepts node-port traffic. */
export function nodePortAddressMatches(npa: NodePortAddresses, address: string): boolean {
  const ip = parseIP(address);
  if (!ip) return false;
  return npa.cidrs.some((t) => {
    const c = parseCIDR(t);
    return c !== undefined && cidrContains(c, ip);
  });
}
