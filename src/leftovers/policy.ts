// What the sweep at start keeps for the mode that starts: each mode's definition
// (daemon/modes/) states its policy, so no sweep asks which mode runs.

import type { IptablesTable } from './iptables.ts';

export interface LeftoverPolicy {
  /**
   * Upstream's iptables-nft chain names the starting mode shares (taken over: kept, corrected by
   * its first sync); every other chain of upstream's goes.
   */
  readonly ownsChain: (table: IptablesTable, name: string) => boolean;
  /** Also delete rules in taken-over chains that match ipsets (the IPVS form of a chain iptables mode takes over). */
  readonly dropSetRules: boolean;
  /**
   * Upstream's IPVS state (virtual servers, KUBE-* ipsets, kube-ipvs0): 'own' keeps it (IPVS
   * mode), 'remove' removes it, 'ipsets' removes the ipsets only (--cleanup, where the IPVS
   * proxier's own cleanup removes the virtual servers and the link).
   */
  readonly ipvsState: 'own' | 'remove' | 'ipsets';
  /** Our nftables mode's tables (`ip|ip6 kube-proxy-ts`) go: every mode but nftables. */
  readonly removeNftablesModeTable: boolean;
}

/** --cleanup: everything of upstream's goes. */
export const CLEANUP_POLICY: LeftoverPolicy = {
  ownsChain: () => false,
  dropSetRules: false,
  ipvsState: 'ipsets',
  removeNftablesModeTable: true,
};
