// IPVS mode's pick: the virtual server's scheduler (src/proxier/ipvs/scheduler.ts), rr, mh or
// lc for a Service that asks for one, else --ipvs-scheduler.

import { LOAD_BALANCING_SUPPORT } from '../proxier/types.ts';
import { IPVS_SCHEDULER_OF, resolveLoadBalancing, type ServicePortInfo } from '../model/index.ts';
import { refusal, sourceOf, type BalancingContext, type PortBalancing } from './balancing-common.ts';

interface Does {
  readonly text: string;
  readonly share: PortBalancing['share'];
}

/** --ipvs-scheduler mh gets upstream's mh-port flag: the client's port is hashed too. */
const MH_PORT: Does = {
  text: "Maglev hashing of the client's address and port (mh-port, as upstream): about 1/n each",
  share: 'equal',
};

/** What each scheduler does, in a few words (the kernel's ip_vs_<name> module). */
const DOES: Readonly<Record<string, Does>> = {
  rr: { text: 'new connections in turn, each endpoint 1/n', share: 'equal' },
  wrr: { text: 'in turn by weight (all weights are 1: each endpoint 1/n)', share: 'equal' },
  mh: { text: "Maglev hashing of the client's address: a client keeps its endpoint, about 1/n each", share: 'equal' },
  sh: { text: "hashing of the client's address: a client keeps its endpoint", share: 'equal' },
  dh: { text: 'hashing of the destination address', share: 'equal' },
  lc: { text: 'the endpoint with the fewest connections', share: 'by-connections' },
  wlc: { text: 'the endpoint with the fewest connections per weight', share: 'by-connections' },
};

export function ipvsBalancing(p: ServicePortInfo, ctx: BalancingContext): PortBalancing {
  const r = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.ipvs, p.loadBalancingAsked, ctx.loadBalancing);
  const asked = r.algorithm === undefined ? undefined : IPVS_SCHEDULER_OF[r.algorithm];
  const scheduler = asked ?? (ctx.ipvsScheduler || 'rr');
  const does: Does =
    asked === undefined && scheduler === 'mh'
      ? MH_PORT
      : (DOES[scheduler] ?? { text: `the kernel's ${scheduler} scheduler`, share: 'by-connections' });
  return {
    algorithm: r.algorithm ?? scheduler,
    source: sourceOf(p, r),
    picking: `IPVS scheduler ${scheduler} on each virtual server of the port: ${does.text}`,
    share: does.share,
    ...refusal(p, r.unsupported),
  };
}
