// The IPVS scheduler of one service port's virtual servers: --ipvs-scheduler, unless the
// Service (annotation) or the node (--load-balancing) asks for an algorithm IPVS has.

import {
  IPVS_SCHEDULER_OF,
  resolveLoadBalancing,
  type LoadBalancing,
  type ServicePortInfo,
} from '../../model/index.ts';
import { IP_VS_SVC_F_SCHED2 } from '../../netlink/ipvs/index.ts';

export interface VsScheduler {
  readonly scheduler: string;
  /** IP_VS_SVC_F_* the scheduler gets. */
  readonly flags: number;
}

/**
 * `modeDefault`: --ipvs-scheduler. Upstream sets the source-hash flag for "mh" (utilipvs
 * FlagSourceHash = 0x10, IP_VS_SVC_F_SCHED2: mh-port), so the flag keeps that meaning there.
 */
export function schedulerFor(
  info: ServicePortInfo,
  modeDefault: string,
  nodeDefault: LoadBalancing | undefined,
): VsScheduler {
  const { algorithm } = resolveLoadBalancing('ipvs', info.loadBalancingAsked, nodeDefault);
  const asked = algorithm === undefined ? undefined : IPVS_SCHEDULER_OF[algorithm];
  if (asked !== undefined) return { scheduler: asked, flags: 0 };
  return { scheduler: modeDefault, flags: modeDefault === 'mh' ? IP_VS_SVC_F_SCHED2 : 0 };
}
