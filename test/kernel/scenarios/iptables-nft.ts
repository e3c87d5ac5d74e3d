// Scenario functions for the iptables-nft interop test, run inside a test namespace by the netns
// agent: write the fixture rule set (test/fixtures/netlink/iptables/ruleset.ts) with the iptables
// dialect over NftClient, as the iptables mode will, and read it back with decode.ts.
import type { IPFamily } from '../../../src/base/ip.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { IpsetClient } from '../../../src/netlink/ipset/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { decodeIptRule } from '../../../src/netlink/nftables/iptables/decode.ts';
import { iptNftRule } from '../../../src/netlink/nftables/iptables/encode.ts';
import type { IptRule, IptTable } from '../../../src/netlink/nftables/iptables/rule.ts';
import {
  BUILTIN_CHAINS,
  IPT_FAMILY,
  IPT_TABLES,
  addTableAndBuiltins,
} from '../../../src/netlink/nftables/iptables/tables.ts';
import { ruleset } from '../../fixtures/netlink/iptables/ruleset.ts';

async function withConn<T>(fn: (conn: ReturnType<typeof connect>) => Promise<T>): Promise<T> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 20_000 });
  try {
    return await fn(conn);
  } finally {
    conn.close();
  }
}

/** Writes the fixture rule set: per table one transaction (table, built-in chains, our chains, rules). */
export async function writeRuleset(family: IPFamily): Promise<number> {
  const fx = ruleset(family);
  return withConn(async (conn) => {
    const index = (await new IpsetClient(conn).getByName(fx.set)).index;
    const ctx = { setIndex: (name: string): number => (name === fx.set ? index : -1) };
    let messages = 0;
    for (const table of IPT_TABLES) {
      const client = new NftClient({ family: IPT_FAMILY[family], table, transport: conn });
      const existing = new Set(await client.list('chain').catch((): string[] => []));
      const tx = client.newTransaction();
      // The rules text declares every built-in chain, so iptables-nft-restore creates them all.
      addTableAndBuiltins(tx, table, Object.keys(BUILTIN_CHAINS[table]), existing);
      for (const name of fx.chains[table]) tx.add({ kind: 'chain', name });
      for (const r of fx.rules) if (r.table === table) tx.add(iptNftRule(r, family, ctx));
      messages += (await client.run(tx)).messages;
    }
    return messages;
  });
}

/** Every rule of the three tables as the kernel lists it, decoded (undefined: not decodable). */
export async function readRuleset(
  family: IPFamily,
): Promise<{ table: IptTable; chain: string; rule: IptRule | undefined }[]> {
  const fx = ruleset(family);
  return withConn(async (conn) => {
    const index = (await new IpsetClient(conn).getByName(fx.set)).index;
    const out: { table: IptTable; chain: string; rule: IptRule | undefined }[] = [];
    for (const table of IPT_TABLES) {
      const client = new NftClient({ family: IPT_FAMILY[family], table, transport: conn });
      for (const r of await client.listRules()) {
        out.push({
          table,
          chain: r.chain,
          rule: decodeIptRule(r, table, family, { setName: (i) => (i === index ? fx.set : undefined) }),
        });
      }
    }
    return out;
  });
}
