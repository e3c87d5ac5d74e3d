// Which IP families this node serves, its name, and the model's options per family: the
// translation from kube-proxy's configuration to what the model understands. Pure.
//
// Families as upstream decides them (cmd/kube-proxy/app/server.go newProxyServer,
// detectNodeIPs, platformCheckSupported): the primary family is the node IP's (--bind-address
// when it is not 0.0.0.0/::, else this node's addresses); the other family is served too
// whenever the kernel supports it (upstream's nftables and IPVS proxiers run dual-stack on
// every Linux node that has IPv6). --cluster-cidr plays no part: it only feeds detect-local.

import type { IPFamily } from '../base/ip.ts';
import { parseIP } from '../base/ip.ts';
import type { ProxyConfig } from '../config/index.ts';
import type { ModelOptions } from '../model/index.ts';

/** What the daemon found out about the host (families.ts does no I/O). */
export interface HostFacts {
  /** The kernel has IPv6 (/proc/sys/net/ipv6 exists: absent with ipv6.disable=1). */
  readonly ipv6Kernel: boolean;
  /** This node's interface addresses (os.networkInterfaces()), for the primary family. */
  readonly addresses: readonly { address: string; internal: boolean }[];
}

export interface ServedFamilies {
  readonly primary: IPFamily;
  /** IPv4 first when both. */
  readonly families: IPFamily[];
  /** The address the primary family came from ('' when assumed). */
  readonly nodeIP: string;
}

const usable = (a: { address: string; internal: boolean }): boolean =>
  !a.internal && !/^fe80:/i.test(a.address) && !a.address.startsWith('169.254.');

/** Upstream's precedence: a specific --bind-address; else the node's first address; else IPv4. */
export function servedFamilies(config: Pick<ProxyConfig, 'bindAddress'>, host: HostFacts): ServedFamilies {
  let primary: IPFamily = 'IPv4';
  let nodeIP = '';
  const bind = parseIP(config.bindAddress);
  if (bind !== undefined && bind.text !== '0.0.0.0' && bind.text !== '::') {
    primary = bind.family;
    nodeIP = bind.text;
  } else {
    const addrs = host.addresses
      .filter(usable)
      .map((a) => parseIP(a.address))
      .filter((a) => a !== undefined);
    const first = addrs.find((a) => a.family === 'IPv4') ?? addrs[0];
    if (first !== undefined) {
      primary = first.family;
      nodeIP = first.text;
    }
  }
  const supported = new Set<IPFamily>(['IPv4']);
  if (host.ipv6Kernel) supported.add('IPv6');
  supported.add(primary);
  return { primary, families: (['IPv4', 'IPv6'] as const).filter((f) => supported.has(f)), nodeIP };
}

/**
 * Upstream's getLocalDetectors warning: ClusterCIDR detect-local with no cluster CIDR of the
 * primary family (that family's traffic is then never treated as local). Undefined: fine.
 */
export function detectLocalWarning(
  config: Pick<ProxyConfig, 'detectLocalMode' | 'clusterCIDRs'>,
  primary: IPFamily,
): string | undefined {
  if (config.detectLocalMode !== 'ClusterCIDR') return undefined;
  const has = config.clusterCIDRs.some((c) => parseIP(c.split('/')[0] ?? '')?.family === primary);
  return has
    ? undefined
    : `Detect-local-mode set to ClusterCIDR, but no cluster CIDR specified for primary IP family ${primary}`;
}

const familyOfCIDR = (c: string): IPFamily | undefined => parseIP(c.split('/')[0] ?? '')?.family;
const other = (f: IPFamily): IPFamily => (f === 'IPv4' ? 'IPv6' : 'IPv4');

/**
 * Upstream's checkBadConfig / checkBadIPConfig (cmd/kube-proxy/app/server.go), logged as
 * "Kube-proxy configuration may be incomplete or incorrect": nodePortAddresses that leave
 * node ports open on every address of a family, and cluster CIDRs of the wrong family only.
 */
export function badConfigWarnings(
  config: Pick<ProxyConfig, 'nodePortAddresses' | 'clusterCIDRs' | 'ipvs'>,
  served: ServedFamilies,
): string[] {
  const out: string[] = [];
  const primary = served.primary;
  const npa = config.nodePortAddresses;
  const cidrs = npa.filter((s) => s.includes('/'));
  const dualConfig = [config.clusterCIDRs, cidrs, config.ipvs.excludeCIDRs].some(
    (l) => new Set(l.map(familyOfCIDR)).size === 2,
  );
  if (npa.length === 0 || (npa.length === 1 && npa[0] === 'all')) {
    out.push(
      'nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`',
    );
  } else if (cidrs.length === npa.length) {
    const ofPrimary = cidrs.filter((c) => familyOfCIDR(c) === primary).length;
    if (dualConfig && ofPrimary === cidrs.length) {
      out.push(
        `cluster appears to be dual-stack but nodePortAddresses contains only ${primary} addresses; NodePort connections will be accepted on all local ${other(primary)} IPs`,
      );
    } else if (ofPrimary === 0) {
      out.push(
        `cluster appears to be ${primary}-primary but nodePortAddresses contains only ${other(primary)} addresses; NodePort connections will be accepted on all local ${primary} IPs`,
      );
    }
  }
  if (config.clusterCIDRs.length > 0 && config.clusterCIDRs.every((c) => familyOfCIDR(c) === other(primary))) {
    const kind = served.families.length > 1 ? `${primary}-primary` : `${primary}-only`;
    out.push(`cluster is ${kind} but clusterCIDRs contains only ${other(primary)} addresses`);
  }
  return out;
}

/** Upstream's start-up line for the families served. */
export function familiesLogLine(s: ServedFamilies): { msg: string; fields: Record<string, string> } {
  return s.families.length > 1
    ? {
        msg: 'kube-proxy running in dual-stack mode',
        fields: { primaryIPFamily: s.primary, families: s.families.join(',') },
      }
    : { msg: 'kube-proxy running in single-stack mode', fields: { ipFamily: s.primary } };
}

/** --hostname-override, else the host name lower-cased (as upstream's GetHostname). */
export function nodeNameOf(config: Pick<ProxyConfig, 'hostnameOverride'>, hostname: string): string {
  const o = config.hostnameOverride.trim();
  return (o !== '' ? o : hostname.trim()).toLowerCase();
}

function bindIPOf(config: Pick<ProxyConfig, 'bindAddress'>, family: IPFamily): string {
  const ip = parseIP(config.bindAddress);
  return ip !== undefined && ip.family === family && ip.text !== '0.0.0.0' && ip.text !== '::' ? ip.text : '';
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
    // --bind-address, when a specific IP of this family, is the node IP (upstream detectNodeIPs).
    ...(bindIPOf(config, family) !== '' ? { nodeIP: bindIPOf(config, family) } : {}),
    nodePortAddresses: config.nodePortAddresses,
    // Upstream's PreferSameTrafficDistribution gate, on by default.
    preferSameNodeHints: config.featureGates['PreferSameTrafficDistribution'] !== false,
  };
}
