// The generator's contexts from the model's DesiredState and the iptables flags.

import { masqueradeMark, type DesiredState, type LoadBalancing } from '../../model/index.ts';
import { NfacctCounter } from './names.ts';
import type { GlobalContext, IptContext } from './types.ts';

/** upstream largeClusterEndpointsThreshold: above this many endpoints, per-endpoint comments go. */
export const LARGE_CLUSTER_ENDPOINTS = 1000;

export interface IptablesOptions {
  /** --iptables-masquerade-bit, 0..31; default 14. */
  readonly masqueradeBit?: number;
  /** --iptables-localhost-nodeports; default true. */
  readonly localhostNodePorts?: boolean;
  /** MASQUERADE --random-fully; default true. */
  readonly randomFully?: boolean;
  /** nf_conntrack_tcp_be_liberal is set on the node; default false. */
  readonly conntrackTCPLiberal?: boolean;
  /**
   * The nfacct objects (NfacctCounter) the kernel has, read at each sync: their counting rules
   * are written only then (upstream's fallback where the kernel lacks nfacct). Default none.
   */
  readonly nfacctCounters?: ReadonlySet<string>;
  /** --load-balancing: the algorithm of Services without the annotation; default upstream's random. */
  readonly loadBalancing?: LoadBalancing;
}

/** Effective localhost node ports: the flag, IPv4, and nodePortAddresses covering 127.0.0.0/8. */
const localhostNodePorts = (desired: DesiredState, opts: IptablesOptions): boolean =>
  (opts.localhostNodePorts ?? true) && desired.family === 'IPv4' && desired.nodePortAddresses.containsIPv4Loopback;

/** upstream counts every endpoint of every service port, used or not. */
export function endpointCount(desired: DesiredState): number {
  let n = 0;
  for (const id of desired.services.keys()) n += desired.endpoints.get(id)?.length ?? 0;
  return n;
}

export function portContext(desired: DesiredState, opts: IptablesOptions = {}): IptContext {
  return {
    family: desired.family,
    masqueradeMark: masqueradeMark(opts.masqueradeBit),
    masqueradeAll: desired.masquerade.all,
    detectLocal: desired.masquerade.detectLocal,
    nodeIP: desired.node.primaryIP,
    largeClusterMode: endpointCount(desired) > LARGE_CLUSTER_ENDPOINTS,
    localhostNodePortsCounter:
      localhostNodePorts(desired, opts) && (opts.nfacctCounters?.has(NfacctCounter.LOCALHOST_ACCEPTED) ?? false),
    ...(opts.loadBalancing === undefined ? {} : { loadBalancing: opts.loadBalancing }),
  };
}

/**
 * nodePortIPs: the node's local addresses of this family inside nodePortAddresses (the
 * proxier lists them; unused when nodePortAddresses matches all).
 */
export function globalContext(
  desired: DesiredState,
  nodePortIPs: readonly string[],
  opts: IptablesOptions = {},
): GlobalContext {
  const npa = desired.nodePortAddresses;
  return {
    ...portContext(desired, opts),
    nodePortAddresses: npa,
    nodePortIPs,
    localhostNodePorts: localhostNodePorts(desired, opts),
    randomFully: opts.randomFully ?? true,
    conntrackTCPLiberal: opts.conntrackTCPLiberal ?? false,
    invalidDroppedCounter: opts.nfacctCounters?.has(NfacctCounter.INVALID_DROPPED) ?? false,
  };
}
