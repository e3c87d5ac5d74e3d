// What the kernel holds in the iptables-nft tables of one family, as the writer needs it: the
// chains present (ours and everyone's), and for the built-in chains and the chains asked for
// the rules in order with their handles and keys. Foreign chains' rules are not decoded.
//
// Rules are listed chain by chain: the kernel answers a dump of a whole table by walking it
// again from the start for every datagram, which is quadratic (measured at 5,000 Services,
// 160,000 rules: 195 s, 74 s of it in the kernel; the same rules chain by chain, linear).

import { isNotFound } from '../../netlink/core/index.ts';
import type { NftChain, NftRule } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { RuleCodec } from './codec.ts';
import type { TableClient } from './writer-types.ts';
import { BUILTIN_CHAINS, chainId } from './units.ts';

export interface ListedEntry {
  readonly handle: bigint;
  /** undefined: a rule in a form we never write. */
  readonly key: string | undefined;
  /** Built-in chains only: the chain it jumps to. */
  readonly jump?: string;
}

export interface TableState {
  /** False when the table does not exist. */
  readonly exists: boolean;
  readonly chains: ReadonlyMap<string, NftChain>;
}

export interface KernelState {
  readonly tables: ReadonlyMap<IptTable, TableState>;
  /** By chainId(table, chain), for our chains and the built-in ones. */
  readonly rules: ReadonlyMap<string, readonly ListedEntry[]>;
}

/** Reads the tables; `wanted(table, chain)` says which chains' rules to list (built-in ones always). */
export async function readKernel(
  clients: ReadonlyMap<IptTable, TableClient>,
  codec: RuleCodec,
  wanted: (table: IptTable, chain: string) => boolean,
): Promise<KernelState> {
  const tables = new Map<IptTable, TableState>();
  const rules = new Map<string, ListedEntry[]>();
  for (const [table, client] of clients) {
    let chains: NftChain[];
    const listed: NftRule[] = [];
    try {
      chains = await client.listChains();
    } catch (e) {
      if (!isNotFound(e)) throw e;
      tables.set(table, { exists: false, chains: new Map() });
      continue;
    }
    for (const c of chains) {
      if (!BUILTIN_CHAINS.has(c.name) && !wanted(table, c.name)) continue;
      try {
        for (const r of await client.listRules(c.name)) listed.push(r);
      } catch (e) {
        if (!isNotFound(e)) throw e; // deleted since listed: nothing to read
      }
    }
    const tableExists = chains.length > 0 || (await tableListed(client, table));
    tables.set(table, { exists: tableExists, chains: new Map(chains.map((c) => [c.name, c])) });
    for (const r of listed) {
      if (r.handle === undefined) continue;
      const builtin = BUILTIN_CHAINS.has(r.chain);
      const id = chainId(table, r.chain);
      let list = rules.get(id);
      if (!list) rules.set(id, (list = []));
      const jump = builtin ? codec.jumpTarget(r) : undefined;
      // Built-in chains: only rules that jump somewhere can be ours; others are not decoded.
      const key = builtin && jump === undefined ? undefined : codec.kernelKey(r, table);
      list.push(jump === undefined ? { handle: r.handle, key } : { handle: r.handle, key, jump });
    }
  }
  return { tables, rules };
}

/** An empty table has no chains to list: ask for the tables themselves. */
async function tableListed(client: TableClient, table: IptTable): Promise<boolean> {
  const all = await client.listTables();
  return all.some((t) => t.family === client.scope.family && t.name === table);
}

/**
 * Reads only the named chains (and each table's built-in ones), without listing every chain
 * of the tables: for a resync that trusts the service-port chains to the last committed state
 * (listing 55,000 chains at 5,000 Services takes seconds). Undefined when one of `chains` is
 * missing: then the tables must be read in full.
 */
export async function readChains(
  clients: ReadonlyMap<IptTable, TableClient>,
  codec: RuleCodec,
  chains: readonly { table: IptTable; name: string }[],
): Promise<KernelState | undefined> {
  const tables = new Map<IptTable, { exists: boolean; chains: Map<string, NftChain> }>();
  const rules = new Map<string, ListedEntry[]>();
  const builtins = new Map<IptTable, string[]>();
  for (const table of clients.keys()) builtins.set(table, [...BUILTIN_CHAINS]);
  const wanted = [
    ...chains.map((c) => ({ ...c, required: true })),
    ...[...builtins].flatMap(([table, names]) => names.map((name) => ({ table, name, required: false }))),
  ];
  for (const { table, name, required } of wanted) {
    const client = clients.get(table)!;
    let listed: NftRule[];
    try {
      listed = await client.listRules(name);
    } catch (e) {
      if (!isNotFound(e)) throw e;
      if (required) return undefined;
      continue;
    }
    let st = tables.get(table);
    if (!st) tables.set(table, (st = { exists: true, chains: new Map() }));
    st.chains.set(name, { kind: 'chain', name });
    const list: ListedEntry[] = [];
    rules.set(chainId(table, name), list);
    const builtin = BUILTIN_CHAINS.has(name);
    for (const r of listed) {
      if (r.handle === undefined || r.chain !== name) continue;
      const jump = builtin ? codec.jumpTarget(r) : undefined;
      const key = builtin && jump === undefined ? undefined : codec.kernelKey(r, table);
      list.push(jump === undefined ? { handle: r.handle, key } : { handle: r.handle, key, jump });
    }
  }
  return { tables, rules };
}
