// The per-Service choice of load-balancing algorithm (annotation kube-proxy-ts.io/load-balancing,
// node default --load-balancing): which values each proxier mode can honour, and what a Service
// port gets in the mode that runs. Pure.

export const LOAD_BALANCING_ANNOTATION = 'kube-proxy-ts.io/load-balancing';
export const LOAD_BALANCING_VALUES = ['random', 'round-robin', 'consistent-hash', 'least-connection'] as const;
export type LoadBalancing = (typeof LOAD_BALANCING_VALUES)[number];
export type LoadBalancingMode = 'nftables' | 'iptables' | 'ipvs' | 'userspace';

/** Which values each mode can honour. */
export const LOAD_BALANCING_SUPPORT: Record<LoadBalancingMode, readonly LoadBalancing[]> = {
  nftables: ['random', 'round-robin', 'consistent-hash'],
  iptables: ['random', 'round-robin'],
  ipvs: ['round-robin', 'consistent-hash', 'least-connection'],
  userspace: ['round-robin'],
};

/**
 * The IPVS scheduler each algorithm is in IPVS mode. consistent-hash is Maglev hashing of the
 * client address alone (the scheduler without its mh-port flag), so a client keeps its endpoint.
 */
export const IPVS_SCHEDULER_OF: Readonly<Partial<Record<LoadBalancing, string>>> = {
  'round-robin': 'rr',
  'consistent-hash': 'mh',
  'least-connection': 'lc',
};

/** Why a mode cannot honour a value it does not support (the text logged and put in the Event). */
const WHY_NOT: Record<LoadBalancingMode, string> = {
  nftables: 'nftables mode has no per-connection counts to pick the least-loaded endpoint',
  iptables:
    'iptables mode can only pick with xt_statistic (random or every n-th connection); ' +
    'it has no hashing or connection counts',
  ipvs: 'IPVS has no random scheduler',
  userspace: 'userspace mode always picks endpoints in turn (round-robin)',
};

export function isLoadBalancing(v: string): v is LoadBalancing {
  return (LOAD_BALANCING_VALUES as readonly string[]).includes(v);
}

/**
 * The algorithm a Service port gets in `mode`: asked (annotation) ?? nodeDefault (flag), or
 * undefined = the mode's own default (upstream behaviour); `unsupported` says why an asked
 * value was refused.
 */
export function resolveLoadBalancing(
  mode: LoadBalancingMode,
  asked: string | undefined,
  nodeDefault: LoadBalancing | undefined,
): { algorithm: LoadBalancing | undefined; unsupported?: string } {
  const fallback =
    nodeDefault !== undefined && LOAD_BALANCING_SUPPORT[mode].includes(nodeDefault) ? nodeDefault : undefined;
  if (asked === undefined || asked === '') return { algorithm: fallback };
  if (!isLoadBalancing(asked)) {
    const known = LOAD_BALANCING_VALUES.join(', ');
    return { algorithm: fallback, unsupported: `unknown value ${JSON.stringify(asked)} (known: ${known})` };
  }
  if (!LOAD_BALANCING_SUPPORT[mode].includes(asked))
    return { algorithm: fallback, unsupported: `${JSON.stringify(asked)} is not supported: ${WHY_NOT[mode]}` };
  return { algorithm: asked };
}
