// The IPVS scheduler of one service port's virtual servers: --ipvs-scheduler, unless the
// Service (annotation) or the node (--load-balancing) asks for an algorithm IPVS has.

import { LOAD_BALANCING_SUPPORT } from '../types.ts';
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

/** The scheduler a port asks for by its algorithm (annotation or node default), if IPVS has one. */
export function askedScheduler(info: ServicePortInfo, nodeDefault: LoadBalancing | undefined): string | undefined {
  // A port that does not ask pays one comparison.
  if (info.loadBalancingAsked === undefined && nodeDefault === undefined) return undefined;
  const { algorithm } = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.ipvs, info.loadBalancingAsked, nodeDefault);
  return algorithm === undefined ? undefined : IPVS_SCHEDULER_OF[algorithm];
}

/**
 * `modeDefault`: --ipvs-scheduler, also for a port whose scheduler the kernel lacks (`usable`).
 * Upstream sets the source-hash flag for "mh" (utilipvs FlagSourceHash = 0x10,
 * IP_VS_SVC_F_SCHED2: mh-port), so the flag keeps that meaning there.
 */
export function schedulerFor(
  info: ServicePortInfo,
  modeDefault: string,
  nodeDefault: LoadBalancing | undefined,
  usable: (scheduler: string) => boolean = () => true,
): VsScheduler {
  const asked = askedScheduler(info, nodeDefault);
  if (asked !== undefined && usable(asked)) return { scheduler: asked, flags: 0 };
  return { scheduler: modeDefault, flags: modeDefault === 'mh' ? IP_VS_SVC_F_SCHED2 : 0 };
}

/**
 * Which schedulers the kernel has, beyond --ipvs-scheduler (checked at start): each probed
 * once, when a port first asks for it, so a node whose Services do not ask loads no module.
 */
export class SchedulerProbes {
  private readonly known = new Map<string, boolean>();

  constructor(modeDefault: string) {
    this.known.set(modeDefault, true);
  }

  /** The asked schedulers of these ports not probed yet. */
  unprobed(infos: Iterable<ServicePortInfo | undefined>, nodeDefault: LoadBalancing | undefined): Set<string> {
    const out = new Set<string>();
    for (const info of infos) {
      const s = info && askedScheduler(info, nodeDefault);
      if (s !== undefined && !this.known.has(s)) out.add(s);
    }
    return out;
  }

  record(scheduler: string, ok: boolean): void {
    this.known.set(scheduler, ok);
  }

  /** False only for a scheduler probed and found missing. */
  readonly usable = (scheduler: string): boolean => this.known.get(scheduler) !== false;
}
