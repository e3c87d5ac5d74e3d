// Which announced changes undo something of the IPVS mode's (drift/chain-watch.ts and
// drift/link-watch.ts ask; a yes asks for a full repair sync at once):
//
//   - a rule added to or removed from one of our companion chains (rules.ts CHAINS) of its
//     table, one of our jumps (rules.ts JUMPS) removed from a built-in chain, a chain of ours
//     deleted, or the table deleted, after we wrote them once;
//   - kube-ipvs0 deleted, or an address still wanted on it removed.
//
// Our own address removals are not drift: the address is no longer wanted when the kernel
// announces it (IPv6 announces every address change with port id 0, so the port cannot tell).
// IPVS virtual servers and ipsets are not announced at all (ip_vs's generic netlink family
// has no multicast group; nfnetlink has no group for ipset): the periodic full sync repairs them.

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { RouteChange } from '../../netlink/route/index.ts';
import { DUMMY_DEVICE } from './names.ts';
import { CHAINS, JUMPS } from './rules.ts';

/**
 * Whether a change to `chain` of `table` (undefined: the whole table, or anything) concerns our
 * companion rules; `jump`: where a removed rule jumped to.
 */
export function companionChainDrifted(written: boolean, table?: IptTable, chain?: string, jump?: string): boolean {
  if (!written) return false;
  if (table === undefined || chain === undefined) return true;
  if (CHAINS.some((c) => c.table === table && c.name === chain)) return true;
  return (
    jump !== undefined &&
    JUMPS.some((j) => j.table === table && j.chain === chain && j.target.t === 'jump' && j.target.chain === jump)
  );
}

export interface DummyLinkView {
  /** kube-ipvs0's index as the last full sync found it; undefined before the first. */
  readonly linkIndex: number | undefined;
  /** Whether an address is wanted on kube-ipvs0 now. */
  wants(address: string): boolean;
}

/** What `c` undid of kube-ipvs0 (undefined: nothing); without `c`, whether there is anything to undo. */
export function dummyLinkDrift(v: DummyLinkView, c?: RouteChange): string | undefined {
  if (v.linkIndex === undefined) return undefined;
  if (!c) return `${DUMMY_DEVICE} may have changed`;
  if (c.added) return undefined;
  if (c.kind === 'link')
    return c.index === v.linkIndex || c.name === DUMMY_DEVICE ? `removed link ${c.name} (port ${c.portId})` : undefined;
  if (c.index !== v.linkIndex || !v.wants(c.address)) return undefined;
  return `removed address ${c.address}/${c.prefixLen} from ${DUMMY_DEVICE} (port ${c.portId})`;
}
