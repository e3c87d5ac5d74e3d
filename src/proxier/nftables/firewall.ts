// The sources `firewall-allow` admits to a Service's load-balancer VIPs
// (loadBalancerSourceRanges), as upstream's per-Service firewall chain
// (`ip saddr != { ranges } drop`) admits them.
//
// Traffic from the node itself: when a range holds the node's IP, upstream also admits the
// Service's VIPs as sources. A VIP-like load balancer often puts the VIP on the node as a
// local address; the node's own connection to it then leaves with the VIP as its source, and
// would be dropped although the operator allowed the node. A range without the node's IP
// keeps the node out, whichever source address its connection uses.
//
// Ranges inside another range are left out: nested CIDRs are one interval to nft's anonymous
// set, but the kernel refuses overlapping elements of one key in our shared interval set
// ("File exists"), which would fail the whole batch. Two CIDRs either nest or are disjoint,
// so dropping the nested ones leaves disjoint intervals with the same union.

import { cidrContains, parseCIDR, parseIP, type CIDR } from '../../base/ip.ts';

/** `ranges`: the Service's source ranges (CIDR text); `nodeIP`: the node's IP of this family, or ''. */
export function firewallSources(ranges: readonly string[], vips: readonly string[], nodeIP: string): string[] {
  const cidrs = ranges.map((r) => parseCIDR(r)).filter((c): c is CIDR => c !== undefined);
  const node = nodeIP ? parseIP(nodeIP) : undefined;
  if (node && cidrs.some((c) => cidrContains(c, node))) {
    for (const v of vips) {
      const c = parseCIDR(v);
      if (c) cidrs.push(c);
    }
  }
  const covers = (outer: CIDR, inner: CIDR): boolean => outer.prefix <= inner.prefix && cidrContains(outer, inner.addr);
  const out: string[] = [];
  cidrs.forEach((c, i) => {
    // Keep c unless another range covers it (of equal ranges, the first one stays).
    const covered = cidrs.some((o, j) => j !== i && covers(o, c) && (o.prefix < c.prefix || j < i));
    if (!covered && !out.includes(c.text)) out.push(c.text);
  });
  return out;
}
