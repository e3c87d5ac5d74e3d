// iptables mode's pick (src/proxier/iptables/rules.ts): one rule per endpoint in KUBE-SVC/SVL,
// upstream's random probabilities or, for round-robin, xt_statistic's nth mode.

import { LOAD_BALANCING_SUPPORT } from '../proxier/types.ts';
import { resolveLoadBalancing, type ServicePortInfo } from '../model/index.ts';
import { refusal, sourceOf, type BalancingContext, type PortBalancing } from './balancing-common.ts';

export function iptablesBalancing(p: ServicePortInfo, ctx: BalancingContext): PortBalancing {
  const r = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.iptables, p.loadBalancingAsked, ctx.loadBalancing);
  const base = { source: sourceOf(p, r), share: 'equal' as const, ...refusal(p, r.unsupported) };
  if (r.algorithm === 'round-robin')
    return {
      algorithm: 'round-robin',
      picking:
        'nat KUBE-SVC-*/KUBE-SVL-*: endpoint i of n matches -m statistic --mode nth --every n-i --packet 0, ' +
        'the last takes the rest: new connections in turn, each endpoint exactly 1/n of every n',
      ...base,
    };
  return {
    algorithm: 'random',
    picking:
      'nat KUBE-SVC-*/KUBE-SVL-*: endpoint i of n matches -m statistic --mode random --probability 1/(n-i), ' +
      'the last takes the rest: each endpoint 1/n on average',
    ...base,
  };
}
