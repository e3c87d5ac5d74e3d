// The iptables mode's rules as data: what the generator (rules.ts, global.ts) hands to the
// writer. The ruleset is split so that a one-Service change costs one Service's work:
//
//   GlobalRules          fixed chains and rules, the jumps from the built-in chains, and the
//                        rules that must end a shared chain (the nodeports rule of KUBE-SERVICES)
//   ServicePortFragment  one service port's own chains (KUBE-SVC/SVL/EXT/FW/SEP-*, complete)
//                        plus its rules in the shared chains (KUBE-SERVICES, KUBE-NODEPORTS, ...)
//
// A fragment depends on its service port, its endpoint selection and the IptContext only,
// never on other Services; assembleRuleset() (assemble.ts) puts the parts together.

import type { IPFamily } from '../../base/ip.ts';
import type { LoadBalancing, LocalDetector, NodePortAddresses, ServicePortId } from '../../model/index.ts';
import type { IptRule, IptTable, JumpRule } from '../../netlink/nftables/iptables/rule.ts';
import type { IptRuleset, IptRulesetChain, IptRulesetTable } from '../../netlink/nftables/iptables/save.ts';

export type { IptRuleset, IptRulesetChain, IptRulesetTable };

/** A chain of ours, by table and kernel name. */
export interface IptChainRef {
  readonly table: IptTable;
  readonly name: string;
}

/** A chain with all of its rules, in order. */
export interface IptChain extends IptChainRef {
  readonly rules: readonly IptRule[];
}

/** What every service port's rules depend on (configuration and node facts, no other Service). */
export interface IptContext {
  readonly family: IPFamily;
  /** 1 << --iptables-masquerade-bit (default 0x4000). */
  readonly masqueradeMark: number;
  /** --masquerade-all. */
  readonly masqueradeAll: boolean;
  readonly detectLocal: LocalDetector;
  /**
   * The node's primary IP of this family ('' when none): a loadBalancerSourceRanges entry
   * that holds it also lets the node reach the VIPs (upstream allowFromNode).
   */
  readonly nodeIP: string;
  /**
   * upstream's largeClusterMode (more than 1000 endpoints over all service ports): the
   * per-endpoint comments (KUBE-SEP rules, the SVC/SVL rules to endpoints) are left out.
   * When it flips, every fragment changes: the writer does a full sync.
   */
  readonly largeClusterMode: boolean;
  /**
   * Localhost node ports are on and the kernel has the localhost_nps_accepted_pkts nfacct
   * object: each node port gets upstream's counting rule for 127.0.0.0/8 first.
   */
  readonly localhostNodePortsCounter: boolean;
  /** --load-balancing, the node's default algorithm (undefined: upstream's random picks). */
  readonly loadBalancing?: LoadBalancing;
}

/** The context of the fixed rules: the service-port context plus node-wide options. */
export interface GlobalContext extends IptContext {
  readonly nodePortAddresses: NodePortAddresses;
  /**
   * The node's local addresses of this family that nodePortAddresses selects, used when it
   * does not match all (one nodeports rule per address, as upstream).
   */
  readonly nodePortIPs: readonly string[];
  /**
   * Effective --iptables-localhost-nodeports: the flag, IPv4, and nodePortAddresses covering
   * 127.0.0.0/8 (upstream turns it off otherwise). Adds the KUBE-FIREWALL martian drop.
   */
  readonly localhostNodePorts: boolean;
  /** MASQUERADE --random-fully (upstream: when iptables supports it; iptables-nft 1.8.9 does). */
  readonly randomFully: boolean;
  /** net.netfilter.nf_conntrack_tcp_be_liberal is set: no INVALID drop in KUBE-FORWARD (as upstream). */
  readonly conntrackTCPLiberal: boolean;
  /** The kernel has the ct_state_invalid_dropped_pkts nfacct object: the INVALID drop counts in it. */
  readonly invalidDroppedCounter: boolean;
}

/** One service port's part of the ruleset. */
export interface ServicePortFragment {
  readonly id: ServicePortId;
  /** Its own nat chains (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW-, KUBE-SEP-*), each complete. */
  readonly chains: readonly IptChain[];
  /**
   * Its rules in the shared chains, in upstream's order: nat KUBE-SERVICES and KUBE-NODEPORTS;
   * filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS and KUBE-PROXY-FIREWALL.
   * Each rule's table and chain say where it goes.
   */
  readonly shared: readonly IptRule[];
}

/** The fixed part of the ruleset. */
export interface GlobalRules {
  readonly family: IPFamily;
  /** The fixed chains we own (shared ones included), declared even when empty. */
  readonly chains: readonly IptChainRef[];
  /**
   * The jumps from built-in chains, top to bottom within each built-in chain, as they stand
   * after upstream's start on a clean host (it prepends each in turn): each built-in chain's
   * block goes above the rules of others.
   */
  readonly jumps: readonly JumpRule[];
  /** The rules of the fixed chains (KUBE-POSTROUTING, KUBE-MARK-MASQ, KUBE-FORWARD, KUBE-FIREWALL). */
  readonly rules: readonly IptRule[];
  /** Rules after every service port's in a shared chain: the nodeports rule(s) ending nat KUBE-SERVICES. */
  readonly tail: readonly IptRule[];
}
