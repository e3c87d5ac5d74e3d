// What --cleanup found and removed, for its one summary line: the kernel objects cleanup can
// remove, listed before and after, and the difference in words. Counting this way needs no
// step to report what it did, and cannot claim a removal that did not happen.
//
// Listed: every nf_tables table; the KUBE-* chains of the iptables-nft tables (ip|ip6
// nat/filter/mangle); IPVS virtual servers and KUBE-* ipsets (only where their modules are
// loaded: LeftoverClients leaves them out otherwise); the kube-ipvs0 link.

import { isNotFound } from '../netlink/core/index.ts';
import type { Family } from '../netlink/nftables/index.ts';
import { IPTABLES_TABLES } from './iptables.ts';
import type { LeftoverClients } from './upstream.ts';

const DUMMY_LINK = 'kube-ipvs0';
const FAMILIES: readonly Family[] = ['ip', 'ip6'];

/** Objects by kind, each named so that before and after compare. */
export interface Inventory {
  tables: Set<string>;
  chains: Set<string>;
  virtualServers: Set<string>;
  ipsets: Set<string>;
  links: Set<string>;
}

async function kubeChains(c: LeftoverClients, out: Set<string>): Promise<void> {
  for (const family of FAMILIES)
    for (const table of IPTABLES_TABLES) {
      const chains = await c
        .nft(family, table)
        .listChains()
        .catch((e: unknown) => {
          if (isNotFound(e)) return [];
          throw e;
        });
      for (const ch of chains) if (ch.name.startsWith('KUBE-')) out.add(`${family} ${table} ${ch.name}`);
    }
}

export async function takeInventory(c: LeftoverClients): Promise<Inventory> {
  const inv: Inventory = {
    tables: new Set(),
    chains: new Set(),
    virtualServers: new Set(),
    ipsets: new Set(),
    links: new Set(),
  };
  for (const t of await c.nft('ip', 'filter').listTables()) inv.tables.add(`${t.family} ${t.name}`);
  await kubeChains(c, inv.chains);
  for (const s of (await c.ipvs?.listServices()) ?? [])
    inv.virtualServers.add('fwmark' in s ? `${s.family} fwmark ${s.fwmark}` : `${s.protocol} ${s.address}:${s.port}`);
  for (const name of (await c.ipset?.names().catch((): string[] => [])) ?? [])
    if (name.startsWith('KUBE-')) inv.ipsets.add(name);
  if (await c.route.getLink(DUMMY_LINK)) inv.links.add(DUMMY_LINK);
  return inv;
}

const gone = (before: Set<string>, after: Set<string>): string[] => [...before].filter((x) => !after.has(x));
const plural = (n: number, one: string): string => `${n} ${one}${n === 1 ? '' : 's'}`;

/** "removed tables ip kube-proxy-ts, ip6 kube-proxy-ts; 57 iptables chains; ..." or "nothing to clean". */
export function summarize(before: Inventory, after: Inventory): string {
  const parts: string[] = [];
  const tables = gone(before.tables, after.tables);
  if (tables.length > 0) parts.push(`nftables table${tables.length === 1 ? '' : 's'} ${tables.join(', ')}`);
  const chains = gone(before.chains, after.chains).length;
  if (chains > 0) parts.push(`${plural(chains, 'KUBE-* chain')} (iptables-nft)`);
  const vs = gone(before.virtualServers, after.virtualServers).length;
  if (vs > 0) parts.push(plural(vs, 'IPVS virtual server'));
  const sets = gone(before.ipsets, after.ipsets).length;
  if (sets > 0) parts.push(plural(sets, 'ipset'));
  const links = gone(before.links, after.links);
  if (links.length > 0) parts.push(`link ${links.join(', ')}`);
  return parts.length > 0 ? `removed ${parts.join('; ')}` : 'nothing to clean';
}
