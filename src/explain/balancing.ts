// How a Service port's new connections are spread over its endpoints in the running mode:
// the algorithm in effect (the load-balancing annotation, else --load-balancing, else the
// mode's default), the kernel object that picks, and each endpoint's share. explain shows it
// per Service port, trace per endpoint. Each mode answers in its own file (balancing-*.ts).

import { maglevTable } from '../base/maglev.ts';
import type { EndpointInfo, ServicePortInfo } from '../model/index.ts';
import type { BalancingContext, ModeBalancing, PortBalancing } from './balancing-common.ts';
import { iptablesBalancing } from './balancing-iptables.ts';
import { ipvsBalancing } from './balancing-ipvs.ts';
import { nftablesBalancing } from './balancing-nftables.ts';
import { userspaceBalancing } from './balancing-userspace.ts';

export type { BalancingContext, ModeBalancing, PortBalancing } from './balancing-common.ts';

const BY_MODE: Readonly<Record<string, ModeBalancing>> = {
  nftables: nftablesBalancing,
  iptables: iptablesBalancing,
  ipvs: ipvsBalancing,
  userspace: userspaceBalancing,
};

/** A port's balancing in `mode`; undefined for a mode that does not describe it. */
export function balancingOf(mode: string, p: ServicePortInfo, ctx: BalancingContext = {}): PortBalancing | undefined {
  return BY_MODE[mode]?.(p, ctx);
}

/**
 * Each endpoint's share of new connections, in the order of `eps`: 1/n, or for a consistent-hash
 * table its buckets' share (the same table the proxier programs, built from the same names).
 */
export function sharesOf(b: PortBalancing | undefined, eps: readonly EndpointInfo[]): number[] {
  if (b?.share !== 'table' || eps.length === 0) return eps.map(() => 1 / eps.length);
  const table = maglevTable(eps.map((e) => `${e.ip} . ${e.port}`));
  const counts = new Array<number>(eps.length).fill(0);
  for (const i of table) counts[i]!++;
  return counts.map((c) => c / table.length);
}
