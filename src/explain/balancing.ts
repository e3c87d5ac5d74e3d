// How a Service port picks among its endpoints, said for explain and trace: the algorithm the
// running mode gives it (model/load-balancing.ts: annotation, else the node's --load-balancing,
// else the mode's own) and each endpoint's share of new connections. Consistent-hash in
// nftables mode shares by the Maglev table the proxier programs (base/maglev.ts).

import { maglevTable } from '../base/maglev.ts';
import type { EndpointInfo, LoadBalancing, LoadBalancingMode, ServicePortInfo } from '../model/index.ts';
import { resolveLoadBalancing } from '../model/index.ts';

const MODE_DEFAULT: Record<LoadBalancingMode, string> = {
  nftables: 'random (numgen random, the mode default)',
  iptables: 'random (statistic random, the mode default)',
  ipvs: 'the --ipvs-scheduler (the mode default)',
  userspace: 'round-robin (the mode default)',
};

const HOW: Record<LoadBalancing, string> = {
  random: 'random',
  'round-robin': 'round-robin: new connections take the endpoints in turn',
  'consistent-hash': "consistent-hash: a client address always lands on the same endpoint (the table's share)",
  'least-connection': 'least-connection: the endpoint with the fewest connections',
};

export interface Balancing {
  /** One line: the algorithm and where it came from. */
  readonly text: string;
  readonly algorithm: LoadBalancing | undefined;
}

const isMode = (m: string): m is LoadBalancingMode =>
  m === 'nftables' || m === 'iptables' || m === 'ipvs' || m === 'userspace';

export function balancingOf(mode: string, p: ServicePortInfo, nodeDefault: LoadBalancing | undefined): Balancing {
  if (p.sessionAffinity === 'ClientIP')
    return { text: 'sessionAffinity ClientIP (wins over any load balancing)', algorithm: undefined };
  if (!isMode(mode)) return { text: 'the mode default', algorithm: undefined };
  const r = resolveLoadBalancing(mode, p.loadBalancingAsked, nodeDefault);
  const from = p.loadBalancingAsked !== undefined ? 'annotation' : '--load-balancing';
  if (r.algorithm !== undefined) return { text: `${HOW[r.algorithm]} (${from})`, algorithm: r.algorithm };
  const refused =
    r.unsupported !== undefined ? `; asked ${JSON.stringify(p.loadBalancingAsked)}: ${r.unsupported}` : '';
  return { text: `${MODE_DEFAULT[mode]}${refused}`, algorithm: undefined };
}

/** Each endpoint's share of new connections, in the order of `eps`. */
export function sharesOf(mode: string, algorithm: LoadBalancing | undefined, eps: readonly EndpointInfo[]): number[] {
  if (mode !== 'nftables' || algorithm !== 'consistent-hash' || eps.length === 0) return eps.map(() => 1 / eps.length);
  const table = maglevTable(eps.map((e) => `${e.ip} . ${e.port}`));
  const counts = new Array<number>(eps.length).fill(0);
  for (const i of table) counts[i]!++;
  return counts.map((c) => c / table.length);
}
