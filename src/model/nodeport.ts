// Which node addresses accept NodePort traffic (upstream NodePortAddresses and the "primary"
// handling in kube-proxy's server setup). The model cannot list interfaces (that is I/O), so
// it says which CIDRs match; a proxier matches local addresses against them, or uses
// "fib daddr type local" when matchAll.
//
// The list mixes CIDRs with three keywords, in any combination (upstream 1.37): "primary" (the
// node's IP of this family), "localhost" (this family's loopback range) and "all" (every local
// address: the zero CIDR).

import { cidrContains, isLoopback, parseCIDR, parseIP, type IPFamily } from '../base/ip.ts';
import { Issues } from './issues.ts';
import type { NodeInfo, NodePortAddresses } from './types.ts';

export const NODE_PORT_ADDRESSES_PRIMARY = 'primary';
export const NODE_PORT_ADDRESSES_LOCALHOST = 'localhost';
export const NODE_PORT_ADDRESSES_ALL = 'all';

const LOOPBACK = { IPv4: { cidr: '127.0.0.0/8', ip: '127.0.0.1' }, IPv6: { cidr: '::1/128', ip: '::1' } } as const;
const ZERO = { IPv4: '0.0.0.0/0', IPv6: '::/0' } as const;

/** The entries as CIDRs of this family (keywords expanded, other families and bad ones left out). */
function familyCIDRs(list: readonly string[], family: IPFamily, node: NodeInfo, issues: Issues): string[] {
  const texts: string[] = [];
  const push = (t: string): void => {
    if (!texts.includes(t)) texts.push(t);
  };
  for (const s of list) {
    if (s === NODE_PORT_ADDRESSES_PRIMARY) {
      // Upstream: the node IP of this family as a host route, unless it is loopback (a fallback).
      const ip = node.primaryIP ? parseIP(node.primaryIP) : undefined;
      if (ip && !isLoopback(ip)) push(`${ip.text}/${family === 'IPv4' ? 32 : 128}`);
    } else if (s === NODE_PORT_ADDRESSES_LOCALHOST) push(LOOPBACK[family].cidr);
    else if (s === NODE_PORT_ADDRESSES_ALL) push(ZERO[family]);
    else {
      const c = s.includes('/') ? parseCIDR(s) : undefined;
      if (!c) issues.add('invalid-cidr', `nodePortAddresses '${s}'`);
      else if (c.family === family) push(c.text);
    }
  }
  return texts;
}

export function selectNodePortAddresses(
  spec: readonly string[] | undefined,
  family: IPFamily,
  node: NodeInfo,
  issues: Issues = new Issues(),
): NodePortAddresses {
  const list = spec ?? [];
  const primary = list.includes(NODE_PORT_ADDRESSES_PRIMARY);
  const texts = familyCIDRs(list, family, node, issues);
  const cidrs = texts.map((t) => parseCIDR(t)!);
  // Loopback named on purpose: a non-zero CIDR holding this family's loopback address ("all"
  // or 0.0.0.0/0 alone does not count, as upstream's localhost NodePort proxy).
  const lo = parseIP(LOOPBACK[family].ip)!;
  const localhost = cidrs.some((c) => c.prefix > 0 && cidrContains(c, lo));
  // No CIDR of this family (or a zero CIDR): every local address, as upstream.
  if (cidrs.length === 0 || cidrs.some((c) => c.prefix === 0)) {
    return { matchAll: true, cidrs: [ZERO[family]], primary, containsIPv4Loopback: family === 'IPv4', localhost };
  }
  const containsIPv4Loopback = family === 'IPv4' && cidrs.some((c) => isLoopback(c.addr) || cidrContains(c, lo));
  return { matchAll: false, cidrs: texts, primary, containsIPv4Loopback, localhost };
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

/**
 * The node's addresses that take node ports when not matchAll: the primary IP when "primary" is
 * listed (even if no interface holds it, as upstream), and every local address inside the CIDRs.
 */
export function nodePortIPsOf(npa: NodePortAddresses, primaryIP: string, localAddresses: readonly string[]): string[] {
  const out = new Set<string>();
  if (npa.primary && primaryIP !== '') out.add(primaryIP);
  for (const a of localAddresses) if (nodePortAddressMatches(npa, a)) out.add(a);
  return [...out];
}
