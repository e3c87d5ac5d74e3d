// Upstream kube-proxy's IPVS-mode state outside iptables: its virtual servers, its KUBE-* ipsets
// and the kube-ipvs0 dummy link (upstream pkg/proxy/ipvs/cleanup.go). Removed when we run in
// any other mode; in IPVS mode the same names are ours and this is not called.
//
// Virtual servers carry no owner mark. Upstream flushes every one of them; we remove them only
// where upstream's IPVS mode evidently ran (kube-ipvs0 exists), and then only the ones its sync
// would have deleted as its own: every non-fwmark virtual server outside --ipvs-exclude-cidrs.
// A node running keepalived or another IPVS user without kube-ipvs0 keeps its services.

import type { CIDR } from '../base/ip.ts';
import { cidrContains, parseCIDR, parseIP } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import type { IpsetClient } from '../netlink/ipset/index.ts';
import { isSetBusy, isSetNotFound } from '../netlink/ipset/index.ts';
import type { IpvsAddrKey, IpvsClient } from '../netlink/ipvs/index.ts';
import { isFwmarkKey, isServiceNotFound } from '../netlink/ipvs/index.ts';
import type { RouteClient } from '../netlink/route/index.ts';
import { isNoSuchLink } from '../netlink/route/index.ts';
import { DUMMY_DEVICE, SETS, ipsetName } from '../proxier/ipvs/index.ts';

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Every ipset name upstream's IPVS mode creates, both families. */
export function upstreamIpsetNames(): string[] {
  return SETS.flatMap((s) => [ipsetName(s.key, 'IPv4'), ipsetName(s.key, 'IPv6')]);
}

/** Upstream's ownership rule for virtual servers: not fwmark-keyed, not in an excluded CIDR. */
export function upstreamOwnsService(s: IpvsAddrKey, exclude: readonly CIDR[]): boolean {
  const ip = parseIP(s.address);
  return !!ip && !exclude.some((c) => cidrContains(c, ip));
}

/** Deletes upstream's virtual servers; returns how many. Requires IPVS in the kernel. */
export async function removeUpstreamVirtualServers(ipvs: IpvsClient, excludeCIDRs: readonly string[]): Promise<number> {
  const exclude = excludeCIDRs.map((t) => parseCIDR(t)).filter((c): c is CIDR => c !== undefined);
  const doomed: IpvsAddrKey[] = [];
  for (const s of await ipvs.listServices()) if (!isFwmarkKey(s) && upstreamOwnsService(s, exclude)) doomed.push(s);
  const errors = (await ipvs.applyMany(doomed.map((service) => ({ op: 'delete-service' as const, service })))).filter(
    (e) => e && !isServiceNotFound(e),
  );
  if (errors.length > 0) throw new Error(`delete ${errors.length} ipvs virtual server(s): ${errText(errors[0])}`);
  return doomed.length;
}

/** Destroys upstream's ipsets (after the rules that matched them are gone); returns the names destroyed. */
export async function removeUpstreamIpsets(ipset: IpsetClient): Promise<string[]> {
  // A kernel without ip_set answers the listing with an error: it holds no sets either.
  const present = new Set(await ipset.names().catch((): string[] => []));
  const destroyed: string[] = [];
  const problems: string[] = [];
  for (const name of upstreamIpsetNames()) {
    if (!present.has(name)) continue;
    try {
      await ipset.destroy(name);
      destroyed.push(name);
    } catch (e) {
      if (isSetNotFound(e)) continue;
      // Still referenced: by a rule in a foreign chain, or by legacy iptables (invisible here).
      problems.push(`${name}: ${errText(e)}${isSetBusy(e) ? ' (still referenced by an iptables rule; legacy iptables?)' : ''}`);
    }
  }
  if (problems.length > 0) throw new Error(`destroy ipsets: ${problems.join('; ')}`);
  return destroyed;
}

export interface IpvsLeftoverDeps {
  /** undefined: the kernel has no IPVS, so there are no virtual servers. */
  ipvs: IpvsClient | undefined;
  ipset: IpsetClient;
  route: RouteClient;
  excludeCIDRs: readonly string[];
  logger: Logger;
}

/** Upstream's IPVS state in order: virtual servers, ipsets, kube-ipvs0 (with its addresses). */
export async function removeIpvsLeftovers(d: IpvsLeftoverDeps): Promise<void> {
  const link = await d.route.getLink(DUMMY_DEVICE);
  if (link && d.ipvs) {
    const n = await removeUpstreamVirtualServers(d.ipvs, d.excludeCIDRs);
    if (n > 0) d.logger.info('Removed upstream kube-proxy IPVS virtual servers', { count: n, excludeCIDRs: d.excludeCIDRs.join(',') });
  }
  const sets = await removeUpstreamIpsets(d.ipset);
  if (sets.length > 0) d.logger.info('Removed upstream kube-proxy ipsets', { sets: sets.join(',') });
  if (link) {
    await d.route.deleteLink(DUMMY_DEVICE).catch((e: unknown) => {
      if (!isNoSuchLink(e)) throw e;
    });
    d.logger.info('Removed upstream kube-proxy dummy link', { link: DUMMY_DEVICE });
  }
}
