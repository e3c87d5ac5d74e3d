// What each proxy mode does to the packets `trace` must judge where the modes differ: a
// cluster IP on a port no Service exposes, an address of the service CIDRs no Service has,
// a Service port without endpoints, loadBalancerSourceRanges and a Local traffic policy
// without a local endpoint. Each entry names the kernel object that decides, so the answer
// says which rule met the packet. Checked against real packets in every mode by
// test/kernel/trace-policies.test.ts and test/vm/ipvs-trace.test.ts.

import type { ProxyMode } from '../proxier/types.ts';

export interface TraceTraits {
  /**
   * How a packet reaches the chosen endpoint: DNAT in the kernel, or redirected to the
   * daemon's own proxy socket, which connects to the endpoint itself (userspace).
   */
  readonly forward: 'dnat' | 'proxy';
  /** A cluster IP on a port no Service exposes: refused by a rule, or routed on as any packet. */
  readonly unexposedPort: { readonly verdict: 'reject' | 'untouched'; readonly rule: string };
  /** An address inside the service CIDRs that no Service has. */
  readonly unallocatedIP: { readonly verdict: 'drop' | 'untouched'; readonly rule: string };
  /** A Service port with no usable endpoint anywhere. */
  readonly noEndpoints: { readonly verdict: 'reject'; readonly rule: string };
  /** loadBalancerSourceRanges: what decides on other sources; undefined: the mode does not enforce them. */
  readonly sourceRanges?: { readonly verdict: 'drop'; readonly rule: string };
  /**
   * A Local traffic policy with no local endpoint: dropped; the cluster endpoints instead
   * (IPVS, upstream PR 97081); or policies not applied at all (userspace: cluster endpoints).
   */
  readonly noLocalEndpoints: {
    readonly fate: 'drop' | 'cluster-fallback' | 'ignored';
    readonly rule: string;
    /**
     * With 'cluster-fallback': the rule that drops external sources at an external frontend
     * (LB IP, external IP, node port) of an externalTrafficPolicy=Local port instead, leaving
     * the fallback to this node's pods and the node.
     */
    readonly externalSources?: string;
  };
  /**
   * A connection to the endpoint that is its own source is masqueraded (else the endpoint
   * would drop its own address as source): for every such endpoint (the endpoint chains' rule
   * in nftables and iptables mode), only for endpoints on this node (IPVS: KUBE-LOOP-BACK
   * holds local endpoints only), or never needed (userspace: the proxy connects from the node).
   */
  readonly hairpin: 'every endpoint' | 'local endpoints' | 'none';
  /** Protocols the mode does not handle (their packets are untouched). */
  readonly unhandledProtocols: readonly string[];
}

export const TRACE_TRAITS: Readonly<Record<ProxyMode, TraceTraits>> = {
  nftables: {
    forward: 'dnat',
    unexposedPort: { verdict: 'reject', rule: 'cluster-ips-check' },
    unallocatedIP: { verdict: 'drop', rule: 'cluster-ips-check' },
    noEndpoints: { verdict: 'reject', rule: 'no-endpoint, reject-chain' },
    sourceRanges: { verdict: 'drop', rule: 'firewall-check' },
    noLocalEndpoints: { fate: 'drop', rule: 'no-endpoint' },
    hairpin: 'every endpoint',
    unhandledProtocols: [],
  },
  iptables: {
    forward: 'dnat',
    unexposedPort: {
      verdict: 'untouched',
      rule: 'iptables mode has no rule for ports a Service does not expose: routed on as any packet',
    },
    unallocatedIP: {
      verdict: 'untouched',
      rule: 'iptables mode has no rule for unallocated service IPs: routed on as any packet',
    },
    noEndpoints: { verdict: 'reject', rule: 'filter KUBE-SERVICES / KUBE-EXTERNAL-SERVICES REJECT "has no endpoints"' },
    sourceRanges: { verdict: 'drop', rule: 'nat KUBE-FW-* does not match it, filter KUBE-PROXY-FIREWALL DROP' },
    noLocalEndpoints: {
      fate: 'drop',
      rule: 'filter KUBE-SERVICES / KUBE-EXTERNAL-SERVICES DROP "has no local endpoints"',
    },
    hairpin: 'every endpoint',
    unhandledProtocols: [],
  },
  ipvs: {
    forward: 'dnat',
    unexposedPort: {
      verdict: 'reject',
      rule: 'the address is bound to kube-ipvs0 but has no virtual server on that port: filter KUBE-IPVS-FILTER REJECT',
    },
    unallocatedIP: {
      verdict: 'untouched',
      rule: 'IPVS mode binds only allocated service IPs to kube-ipvs0 and has no rule for the others: routed on as any packet',
    },
    noEndpoints: {
      verdict: 'reject',
      rule: 'its virtual server has no real server: IPVS answers ICMP port unreachable',
    },
    sourceRanges: {
      verdict: 'drop',
      rule: 'not in KUBE-LOAD-BALANCER-SOURCE-CIDR: filter KUBE-SOURCE-RANGES-FIREWALL DROP',
    },
    noLocalEndpoints: {
      fate: 'cluster-fallback',
      rule: 'IPVS mode: Local policy with no local endpoint falls back to the cluster endpoints (upstream PR 97081)',
      externalSources: 'filter KUBE-PROXY-FIREWALL DROP: the destination is in set KUBE-NO-LOCAL-ENDPOINTS',
    },
    hairpin: 'local endpoints',
    unhandledProtocols: [],
  },
  userspace: {
    forward: 'proxy',
    unexposedPort: {
      verdict: 'untouched',
      rule: 'userspace mode has portal rules only for exposed ports: routed on as any packet',
    },
    unallocatedIP: {
      verdict: 'untouched',
      rule: 'userspace mode has no rule for unallocated service IPs: routed on as any packet',
    },
    noEndpoints: {
      verdict: 'reject',
      rule: 'the proxy socket accepts the connection and resets it at once (TCP; a UDP datagram is dropped)',
    },
    noLocalEndpoints: {
      fate: 'ignored',
      rule: 'userspace mode applies no traffic policy: its proxy socket balances over the cluster endpoints',
    },
    hairpin: 'none',
    unhandledProtocols: ['SCTP'],
  },
};

/** The traits of a running mode; an unknown mode is a bug of the caller. */
export function traceTraits(mode: string): TraceTraits {
  const t = (TRACE_TRAITS as Record<string, TraceTraits | undefined>)[mode];
  if (!t) throw new Error(`trace: no trace traits for proxy mode ${mode}`);
  return t;
}
