// Upstream kube-proxy's IPVS-mode state outside iptables: its virtual servers, its KUBE-* ipsets
// and the kube-ipvs0 dummy link (upstream pkg/proxy/ipvs/cleanup.go). Removed when we run in
// any other mode; in IPVS mode the same names are ours and this is not called.
//
// Virtual servers carry no owner mark. Upstream flushes every one of them; we remove them only
// where upstream's IPVS mode evidently ran (kube-ipvs0 exists), and then only the ones its sync
// would have deleted as its own: every non-fwmark virtual server outside --ipvs-exclude-cidrs.
// A node running keepalived or another IPVS user without kube-ipvs0 keeps its services.

import { errorMessage } from '../base/errors.ts';
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

/** Every ipset name upstream's IPVS mode creates, both families, and our IPVS mode's own (names.ts). */
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
  if (errors.length > 0) throw new Error(`delete ${errors.length} ipvs virtual server(s): ${errorMessage(errors[0])}`);
  return doomed.length;
}

/** How long to wait for deleted rules to let go of their sets: attempts x delay (about 1 s). */
export interface ReleaseWait {
  attempts: number;
  delayMs: number;
  sleep?: (ms: number) => Promise<void>;
}
const RELEASE_WAIT: ReleaseWait = { attempts: 50, delayMs: 20 };
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Destroys upstream's ipsets (after the rules that matched them are gone); returns the names
 * destroyed. nf_tables frees deleted rules after its commit, in deferred work, so their
 * xt_set references (and IPSET_ERR_BUSY) outlive the batch for a moment: busy sets are tried
 * again, all together, a bounded number of times. One still busy after that is referenced by a
 * rule that stayed: a foreign one, or legacy iptables (invisible over netlink).
 */
export async function removeUpstreamIpsets(ipset: IpsetClient, wait: ReleaseWait = RELEASE_WAIT): Promise<string[]> {
  // A kernel without ip_set answers the listing with an error: it holds no sets either.
  const present = new Set(await ipset.names().catch((): string[] => []));
  let pending = upstreamIpsetNames().filter((n) => present.has(n));
  const destroyed: string[] = [];
  const problems = new Map<string, string>();
  for (let attempt = 0; pending.length > 0 && attempt < wait.attempts; attempt++) {
    if (attempt > 0) await (wait.sleep ?? sleep)(wait.delayMs);
    const busy: string[] = [];
    for (const name of pending) {
      try {
        await ipset.destroy(name);
        destroyed.push(name);
        problems.delete(name);
      } catch (e) {
        if (isSetNotFound(e)) continue;
        const hint = isSetBusy(e) ? ' (still referenced by an iptables rule; legacy iptables?)' : '';
        problems.set(name, `${name}: ${errorMessage(e)}${hint}`);
        if (isSetBusy(e)) busy.push(name);
      }
    }
    pending = busy;
  }
  if (problems.size > 0) throw new Error(`destroy ipsets: ${[...problems.values()].join('; ')}`);
  const order = upstreamIpsetNames();
  return destroyed.sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

export interface IpvsLeftoverDeps {
  /** undefined: the kernel has no IPVS, so there are no virtual servers. */
  ipvs: IpvsClient | undefined;
  /** undefined: ip_set is not loaded; there are no sets. */
  ipset: IpsetClient | undefined;
  route: RouteClient;
  excludeCIDRs: readonly string[];
  logger: Logger;
}

/** Upstream's IPVS state in order: virtual servers, ipsets, kube-ipvs0 (with its addresses). */
export async function removeIpvsLeftovers(d: IpvsLeftoverDeps): Promise<void> {
  const link = await d.route.getLink(DUMMY_DEVICE);
  if (link && d.ipvs) {
    const n = await removeUpstreamVirtualServers(d.ipvs, d.excludeCIDRs);
    const excludeCIDRs = d.excludeCIDRs.join(',');
    if (n > 0) d.logger.info('Removed upstream kube-proxy IPVS virtual servers', { count: n, excludeCIDRs });
  }
  const sets = d.ipset ? await removeUpstreamIpsets(d.ipset) : [];
  if (sets.length > 0) d.logger.info('Removed upstream kube-proxy ipsets', { sets: sets.join(',') });
  if (link) {
    await d.route.deleteLink(DUMMY_DEVICE).catch((e: unknown) => {
      if (!isNoSuchLink(e)) throw e;
    });
    d.logger.info('Removed upstream kube-proxy dummy link', { link: DUMMY_DEVICE });
  }
}
