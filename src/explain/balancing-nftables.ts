// nftables mode's pick (src/proxier/nftables/balancing.ts and the pickers): numgen random into
// the endpoint-count picker (upstream), numgen inc per Service port for round-robin, or a jhash
// of the client address into the port's Maglev table (base/maglev.ts) for consistent-hash.

import { LOAD_BALANCING_SUPPORT } from '../proxier/types.ts';
import { resolveLoadBalancing, type ServicePortInfo } from '../model/index.ts';
import { refusal, sourceOf, type BalancingContext, type PortBalancing } from './balancing-common.ts';

export function nftablesBalancing(p: ServicePortInfo, ctx: BalancingContext): PortBalancing {
  const r = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, p.loadBalancingAsked, ctx.loadBalancing);
  const base = { source: sourceOf(p, r), ...refusal(p, r.unsupported) };
  if (p.sessionAffinity === 'ClientIP' && r.algorithm !== undefined)
    return {
      algorithm: 'random',
      picking: `sessionAffinity ClientIP wins over ${r.algorithm}: a new client is picked by numgen random (upstream)`,
      share: 'equal',
      ...base,
    };
  if (r.algorithm === 'round-robin')
    return {
      algorithm: 'round-robin',
      picking: "the port's own chain: numgen inc mod n into its endpoints: new connections in turn, each exactly 1/n",
      share: 'equal',
      ...base,
    };
  if (r.algorithm === 'consistent-hash')
    return {
      algorithm: 'consistent-hash',
      picking:
        "jhash of the client address into the port's Maglev table (balance-* map): a client keeps its endpoint; " +
        "each endpoint gets its share of the table's buckets",
      share: 'table',
      ...base,
    };
  return {
    algorithm: 'random',
    picking: 'numgen random mod n into the endpoints (upstream): each endpoint 1/n on average',
    share: 'equal',
    ...base,
  };
}
