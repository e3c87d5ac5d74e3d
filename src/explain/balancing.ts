// How a Service port's new connections are spread over its endpoints in the running mode:
// the algorithm in effect (the load-balancing annotation, else --load-balancing, else the
// mode's default), the kernel object that picks, and each endpoint's share. explain shows it
// per Service port, trace per endpoint. Each mode answers in its own file (balancing-*.ts).

import type { ServicePortInfo } from '../model/index.ts';
import type { BalancingContext, ModeBalancing, PortBalancing } from './balancing-common.ts';
import { iptablesBalancing } from './balancing-iptables.ts';
import { ipvsBalancing } from './balancing-ipvs.ts';
import { userspaceBalancing } from './balancing-userspace.ts';

export type { BalancingContext, ModeBalancing, PortBalancing } from './balancing-common.ts';

const BY_MODE: Readonly<Record<string, ModeBalancing>> = {
  iptables: iptablesBalancing,
  ipvs: ipvsBalancing,
  userspace: userspaceBalancing,
};

/** A port's balancing in `mode`; undefined for a mode that does not describe it. */
export function balancingOf(mode: string, p: ServicePortInfo, ctx: BalancingContext = {}): PortBalancing | undefined {
  return BY_MODE[mode]?.(p, ctx);
}
