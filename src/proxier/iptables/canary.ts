// The KUBE-PROXY-CANARY chains (one each in mangle, nat and filter, created by the skeleton):
// when one disappears, someone flushed or reloaded the tables (`iptables -t nat -F` then
// `-X`, a firewalld reload) and the rules must be written again in full. Checked with one
// GETCHAIN per table (not a dump: cheap however many chains the table holds).

import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { Chain } from './names.ts';

export interface CanaryProbe {
  getChain(name: string): Promise<unknown>;
}

/** True while every table's canary chain exists. */
export async function canaryPresent(clients: ReadonlyMap<IptTable, CanaryProbe>): Promise<boolean> {
  for (const client of clients.values()) if ((await client.getChain(Chain.CANARY)) === undefined) return false;
  return true;
}
