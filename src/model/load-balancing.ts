// Per-Service load balancing: which algorithm picks among a Service port's chosen endpoints.
// Our extension (upstream kube-proxy picks at random in iptables and nftables modes and uses
// one --ipvs-scheduler for every Service). A Service asks with an annotation, the node sets a
// default with --load-balancing; neither set = each mode's upstream behaviour.
//
// Endpoint selection (terminating, topology, traffic policy) happens first and is unchanged;
// ClientIP session affinity wins where set. Pure: no I/O.

import { isObject } from './guards.ts';

export const LOAD_BALANCING_ANNOTATION = 'kube-proxy-ts.io/load-balancing';
export const LOAD_BALANCING_VALUES = ['random', 'round-robin', 'consistent-hash', 'least-connection'] as const;
export type LoadBalancing = (typeof LOAD_BALANCING_VALUES)[number];

/** What one proxier mode can honour (proxier/types.ts LOAD_BALANCING_SUPPORT holds each mode's). */
export interface LoadBalancingSupport {
  readonly mode: string;
  readonly values: readonly LoadBalancing[];
}

/**
 * The IPVS scheduler each algorithm is in IPVS mode. consistent-hash is Maglev hashing of the
 * client address alone (the scheduler without its mh-port flag), so a client keeps its endpoint.
 */
export const IPVS_SCHEDULER_OF: Readonly<Partial<Record<LoadBalancing, string>>> = {
  'round-robin': 'rr',
  'consistent-hash': 'mh',
  'least-connection': 'lc',
};

export const isLoadBalancing = (v: string): v is LoadBalancing =>
  (LOAD_BALANCING_VALUES as readonly string[]).includes(v);

export interface ResolvedLoadBalancing {
  /** undefined: the mode's own default (upstream behaviour). */
  readonly algorithm: LoadBalancing | undefined;
  /** Why an asked value was refused (logged once per Service, and an Event on it). */
  readonly unsupported?: string;
}

/**
 * The algorithm a Service port gets in the mode of `support`: the annotation's value when set, else the
 * node default. An unknown or unsupported annotation gets what a Service without one gets
 * (the node default where the mode honours it, else the mode's own) and says why.
 */
export function resolveLoadBalancing(
  support: LoadBalancingSupport,
  asked: string | undefined,
  nodeDefault: LoadBalancing | undefined,
): ResolvedLoadBalancing {
  const { mode, values: supported } = support;
  const fallback = nodeDefault !== undefined && supported.includes(nodeDefault) ? nodeDefault : undefined;
  if (asked === undefined || asked === '') return { algorithm: fallback };
  if (!isLoadBalancing(asked)) {
    return {
      algorithm: fallback,
      unsupported: `unknown value ${JSON.stringify(asked)} (one of ${LOAD_BALANCING_VALUES.join(', ')})`,
    };
  }
  if (!supported.includes(asked)) {
    return {
      algorithm: fallback,
      unsupported: `${asked} is not supported in ${mode} mode (supported: ${supported.join(', ')})`,
    };
  }
  return { algorithm: asked };
}

/** The annotation's raw value (trimmed) from a Service's metadata, or undefined when absent or not a string. */
export function loadBalancingAnnotation(meta: unknown): string | undefined {
  if (!isObject(meta) || !isObject(meta['annotations'])) return undefined;
  const v = meta['annotations'][LOAD_BALANCING_ANNOTATION];
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}
