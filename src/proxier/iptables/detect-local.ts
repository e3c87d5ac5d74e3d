// upstream LocalTrafficDetector as iptables matches: "from a pod on this node" (IfLocal) and
// its negation (IfNotLocal), for the four --detect-local-mode values.

import type { LocalDetector } from '../../model/index.ts';
import type { Match } from '../../netlink/nftables/iptables/rule.ts';

/**
 * The matches, or undefined when the detector is not implemented (mode None, or nothing to
 * match on yet): upstream then writes no rule that needs it.
 * ClusterCIDR/NodeCIDR match one source CIDR (upstream's detector takes one per family, the
 * first; an iptables rule holds one -s).
 */
function matches(d: LocalDetector, invert: boolean): Match[] | undefined {
  if (!d.implemented) return undefined;
  switch (d.mode) {
    case 'ClusterCIDR':
    case 'NodeCIDR': {
      const cidr = d.cidrs[0];
      return cidr === undefined ? undefined : [{ m: 'src', cidr, invert }];
    }
    case 'BridgeInterface':
      return d.interfaceName === '' ? undefined : [{ m: 'inIface', name: d.interfaceName, invert }];
    case 'InterfaceNamePrefix':
      return d.interfaceName === '' ? undefined : [{ m: 'inIface', name: `${d.interfaceName}+`, invert }];
    default:
      return undefined;
  }
}

export const ifLocal = (d: LocalDetector): Match[] | undefined => matches(d, false);
export const ifNotLocal = (d: LocalDetector): Match[] | undefined => matches(d, true);
