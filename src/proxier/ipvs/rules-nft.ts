// The companion rules' nf_tables expressions come from the shared iptables dialect
// (netlink/nftables/iptables/encode.ts: IptRule -> what iptables-nft 1.8.9 sends, byte for byte);
// re-exported here for this mode's callers.
export { ruleExprs } from '../../netlink/nftables/iptables/encode.ts';
export type { IptEncodeContext } from '../../netlink/nftables/iptables/encode.ts';
export type { NftExpr as CompatExpr } from '../../netlink/nftables/index.ts';
