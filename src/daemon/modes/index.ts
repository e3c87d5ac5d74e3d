// Every proxy mode's definition, by name. The Record's type asks for one definition per name
// of PROXY_MODES (proxier/types.ts), so a mode cannot be named without being defined.

import type { ProxyMode } from '../../proxier/types.ts';
import { iptablesMode } from './iptables.ts';
import { ipvsMode } from './ipvs.ts';
import { nftablesMode } from './nftables.ts';
import type { ModeDefinition } from './types.ts';
import { userspaceMode } from './userspace.ts';

export type { ModeDefinition, ModeSet, ProxierDeps, ProxierSet, Sockets, SyncMetrics } from './types.ts';

export const MODES: Readonly<Record<ProxyMode, ModeDefinition>> = {
  nftables: nftablesMode,
  ipvs: ipvsMode,
  iptables: iptablesMode,
  userspace: userspaceMode,
};

/**
 * --cleanup's order: nftables rules first (a rule that references an ipset keeps it busy), the
 * IPVS mode's before the iptables mode's (its chains share names with them, and those it does
 * not share, KUBE-NODE-PORT, KUBE-LOAD-BALANCER ..., jump to shared ones such as KUBE-MARK-MASQ).
 */
export const CLEANUP_ORDER: readonly ModeDefinition[] = [nftablesMode, ipvsMode, iptablesMode, userspaceMode];
