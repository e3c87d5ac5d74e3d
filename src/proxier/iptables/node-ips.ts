// The node's addresses node ports answer on when nodePortAddresses does not match all: the
// local addresses of this family inside its CIDRs, and the node's primary IP with "primary".

import { parseIP } from '../../base/ip.ts';
import { nodePortIPsOf, type DesiredState } from '../../model/index.ts';

export async function nodePortIPs(
  desired: DesiredState,
  localAddresses: (() => Promise<readonly string[]>) | undefined,
): Promise<string[]> {
  const ofFamily = ((await localAddresses?.()) ?? []).flatMap((text) => {
    const ip = parseIP(text);
    return ip && ip.family === desired.family ? [ip.text] : [];
  });
  return nodePortIPsOf(desired.nodePortAddresses, desired.node.primaryIP, ofFamily);
}
