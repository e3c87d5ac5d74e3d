// userspace mode's pick: the daemon's proxy socket takes the endpoints in turn, whatever asked.

import { LOAD_BALANCING_SUPPORT } from '../proxier/types.ts';
import { resolveLoadBalancing, type ServicePortInfo } from '../model/index.ts';
import { refusal, sourceOf, type BalancingContext, type PortBalancing } from './balancing-common.ts';

export function userspaceBalancing(p: ServicePortInfo, ctx: BalancingContext): PortBalancing {
  const r = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.userspace, p.loadBalancingAsked, ctx.loadBalancing);
  return {
    algorithm: 'round-robin',
    source: sourceOf(p, r),
    picking: "the daemon's proxy socket connects to the endpoints in turn (round-robin): each endpoint 1/n",
    share: 'equal',
    ...refusal(p, r.unsupported),
  };
}
