// Writes the companion rules (rules.ts) over nfnetlink in iptables-nft's form, through the shared
// iptables dialect (netlink/nftables/iptables): tables `ip nat` and `ip filter` (ip6 for IPv6)
// and iptables-nft's built-in base chains where missing (tables.ts), our KUBE-* chains flushed
// and refilled in one batch per table with each rule as iptables-nft 1.8.9 encodes it
// (encode.ts), and the jump rules inserted at the top of the built-in chains once (recognised
// by decode.ts's jumpTarget). Nothing else in those tables is touched.

import type { IPFamily } from '../../base/ip.ts';
import type { IpsetClient } from '../../netlink/ipset/index.ts';
import type { NftClient, NftRule } from '../../netlink/nftables/index.ts';
import { jumpTarget } from '../../netlink/nftables/iptables/decode.ts';
import { iptNftRule } from '../../netlink/nftables/iptables/encode.ts';
import { addTableAndBuiltins } from '../../netlink/nftables/iptables/tables.ts';
import { CHAINS } from './rules.ts';
import type { CompanionRules } from './rules.ts';

export interface CompanionDeps {
  /** Clients scoped to (ip|ip6, nat) and (ip|ip6, filter). */
  readonly nat: NftClient;
  readonly filter: NftClient;
  readonly ipset: IpsetClient;
}

/** What the proxier needs of a companion-rule writer (CompanionWriter, or a fake in tests). */
export interface CompanionSink {
  write(rules: CompanionRules, signal?: AbortSignal): Promise<number>;
  remove(signal?: AbortSignal): Promise<void>;
}

export class CompanionWriter implements CompanionSink {
  private readonly family: IPFamily;
  private readonly deps: CompanionDeps;

  constructor(family: IPFamily, deps: CompanionDeps) {
    this.family = family;
    this.deps = deps;
  }

  /** Writes every rule; returns the number of nf_tables messages sent. */
  async write(rules: CompanionRules, signal?: AbortSignal): Promise<number> {
    // xt_set matches name sets by kernel index.
    const index = new Map<string, number>();
    for (const r of rules.rules) {
      for (const m of r.matches) {
        if (m.m === 'set' && !index.has(m.set))
          index.set(m.set, (await this.deps.ipset.getByName(m.set, signal ? { signal } : {})).index);
      }
    }
    const setIndex = (name: string): number => {
      const i = index.get(name);
      if (i === undefined) throw new Error(`ipset ${name} has no kernel index`);
      return i;
    };
    let messages = 0;
    for (const table of ['nat', 'filter'] as const) {
      const client = table === 'nat' ? this.deps.nat : this.deps.filter;
      const existing = await client.listRules().catch((): NftRule[] => []);
      const chains = new Set(await client.list('chain').catch((): string[] => []));
      const tx = client.newTransaction();
      const jumps = rules.jumps.filter((j) => j.table === table);
      addTableAndBuiltins(
        tx,
        table,
        jumps.map((j) => j.chain),
        chains,
      );
      for (const c of rules.chains) {
        if (c.table !== table) continue;
        tx.add({ kind: 'chain', name: c.name });
        tx.flush({ kind: 'chain', name: c.name });
      }
      for (const r of rules.rules) {
        if (r.table !== table) continue;
        tx.add(iptNftRule(r, this.family, { setIndex }));
      }
      for (const j of jumps) {
        const to = j.target.t === 'jump' ? j.target.chain : '';
        const present = existing.some((r) => r.chain === j.chain && jumpTarget(r) === to);
        if (!present) tx.insert(iptNftRule(j, this.family, { setIndex }));
      }
      messages += (await client.run(tx, signal)).messages;
    }
    return messages;
  }

  /** Deletes our jump rules, then flushes and deletes our chains; other rules and chains stay. */
  async remove(signal?: AbortSignal): Promise<void> {
    for (const table of ['nat', 'filter'] as const) {
      const client = table === 'nat' ? this.deps.nat : this.deps.filter;
      let existing: NftRule[];
      try {
        existing = await client.listRules();
      } catch {
        continue; // no such table
      }
      const ours = new Set(CHAINS.filter((c) => c.table === table).map((c) => c.name));
      const present = new Set((await client.list('chain')).filter((n) => ours.has(n)));
      const tx = client.newTransaction();
      for (const r of existing) {
        if (ours.has(r.chain) || r.handle === undefined) continue;
        const to = jumpTarget(r);
        if (to !== undefined && ours.has(to)) tx.delete({ kind: 'rule', chain: r.chain, exprs: [], handle: r.handle });
      }
      for (const name of present) tx.flush({ kind: 'chain', name });
      for (const name of present) tx.delete({ kind: 'chain', name });
      await client.run(tx, signal);
    }
  }
}
