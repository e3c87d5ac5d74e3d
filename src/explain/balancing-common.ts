// The shape every mode's balancing answer shares (balancing-*.ts), and the helpers they use.

import type { LoadBalancing, ServicePortInfo } from '../model/index.ts';

/** The node-wide settings that decide a port's algorithm (the daemon's flags). */
export interface BalancingContext {
  /** --load-balancing; undefined: each mode's own default. */
  readonly loadBalancing?: LoadBalancing;
  /** --ipvs-scheduler (IPVS mode's default); '' or undefined: rr. */
  readonly ipvsScheduler?: string;
}

export interface PortBalancing {
  /** The algorithm in effect: a load-balancing value, or IPVS's scheduler name. */
  readonly algorithm: string;
  /** Where it comes from: the Service's annotation, the node's --load-balancing, or the mode's default. */
  readonly source: 'annotation' | 'node default' | 'mode default';
  /** What in the kernel (or the daemon) picks the endpoint of a new connection. */
  readonly picking: string;
  /**
   * Each endpoint's share of new connections: equal (exactly or on average, `picking` says
   * which), decided by open connections (least-connection), so not known in advance, or by
   * each endpoint's buckets in a consistent-hash table.
   */
  readonly share: 'equal' | 'by-connections' | 'table';
  /** The annotation's value when the mode refused it, and why. */
  readonly refused?: string;
}

export type ModeBalancing = (p: ServicePortInfo, ctx: BalancingContext) => PortBalancing;

/** Where the resolved algorithm came from (resolveLoadBalancing's answer, told apart). */
export function sourceOf(
  p: ServicePortInfo,
  resolved: { algorithm: LoadBalancing | undefined; unsupported?: string },
): PortBalancing['source'] {
  if (resolved.algorithm === undefined) return 'mode default';
  return resolved.unsupported === undefined && p.loadBalancingAsked ? 'annotation' : 'node default';
}

/** The refusal text, when the Service asked for something the mode cannot do. */
export const refusal = (p: ServicePortInfo, unsupported: string | undefined): { refused?: string } =>
  unsupported === undefined ? {} : { refused: `annotation ${JSON.stringify(p.loadBalancingAsked)}: ${unsupported}` };
