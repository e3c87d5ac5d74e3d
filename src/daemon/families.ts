// Which IP families this node serves, its name, and the model's options per family: the
// translation from kube-proxy's configuration to what the model understands. Pure.
//
// Families, kept simple on purpose: the families of --cluster-cidr (both for a dual-stack
// pair); without a cluster CIDR, IPv4 only. Upstream also looks at the node's IPs and
// --bind-address to find the primary family and whether the kernel has IPv6; we do not
// (yet): a single-stack IPv6 or dual-stack node must say so with --cluster-cidr.

import type { IPFamily } from '../base/ip.ts';
import { parseCIDR } from '../base/ip.ts';
import type { ProxyConfig } from '../config/index.ts';
import type { ModelOptions } from '../model/index.ts';

export type { IPFamily };

/** IPv4 first when both. */
export function servedFamilies(config: Pick<ProxyConfig, 'clusterCIDRs'>): IPFamily[] {
  const seen = new Set<IPFamily>();
  for (const c of config.clusterCIDRs) {
    const p = parseCIDR(c);
    if (p) seen.add(p.family);
  }
  if (seen.size === 0) return ['IPv4'];
  return (['IPv4', 'IPv6'] as const).filter((f) => seen.has(f));
}

/** --hostname-override, else the host name lower-cased (as upstream's GetHostname). */
export function nodeNameOf(config: Pick<ProxyConfig, 'hostnameOverride'>, hostname: string): string {
  const o = config.hostnameOverride.trim();
  return (o !== '' ? o : hostname.trim()).toLowerCase();
}

/**
 * nodePortAddresses keywords -> what the model takes: "primary" passes through; "all" is
 * every local address (the zero CIDRs); "localhost" the loopback ranges.
 */
export function modelNodePortAddresses(list: readonly string[]): string[] {
  const out: string[] = [];
  for (const s of list) {
    if (s === 'all') out.push('0.0.0.0/0', '::/0');
    else if (s === 'localhost') out.push('127.0.0.0/8', '::1/128');
    else out.push(s);
  }
  return [...new Set(out)];
}

export function modelOptionsFor(config: ProxyConfig, family: IPFamily, nodeName: string): ModelOptions {
  return {
    nodeName,
    family,
    clusterCIDRs: config.clusterCIDRs,
    detectLocalMode: config.detectLocalMode,
    bridgeInterface: config.detectLocal.bridgeInterface,
    interfaceNamePrefix: config.detectLocal.interfaceNamePrefix,
    masqueradeAll: config.masqueradeAll,
    nodePortAddresses: modelNodePortAddresses(config.nodePortAddresses),
    // Upstream's PreferSameTrafficDistribution gate, on by default.
    preferSameNodeHints: config.featureGates['PreferSameTrafficDistribution'] !== false,
  };
}
