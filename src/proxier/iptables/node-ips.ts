// The node's addresses node ports answer on when nodePortAddresses does not match all: the
// local addresses of this family inside its CIDRs ("primary": the node's primary IP).

import { cidrContains, parseCIDR, parseIP } from '../../base/ip.ts';
import type { DesiredState } from '../../model/index.ts';

export async function nodePortIPs(
  desired: DesiredState,
  localAddresses: (() => Promise<readonly string[]>) | undefined,
): Promise<string[]> {
  const npa = desired.nodePortAddresses;
  if (npa.primary) return desired.node.primaryIP === '' ? [] : [desired.node.primaryIP];
  const cidrs = npa.cidrs.map((c) => parseCIDR(c)).filter((c) => c !== undefined);
  const out: string[] = [];
  for (const text of (await localAddresses?.()) ?? []) {
    const ip = parseIP(text);
    if (ip && ip.family === desired.family && cidrs.some((c) => cidrContains(c, ip))) out.push(ip.text);
  }
  return out;
}
