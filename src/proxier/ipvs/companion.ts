// Writes the companion rules (rules.ts) over nfnetlink in iptables-nft's form through the
// iptables-nft ruleset writer the other modes use (../iptables-nft): tables `ip nat` and
// `ip filter` (ip6 for IPv6) and iptables-nft's built-in base chains where missing, our KUBE-*
// chains as the skeleton's owned chains, and the jump rules at the top of the built-in chains.
// Each write lists our chains and changes them rule by rule, by handle: a rule that stays keeps
// its handle and counters, a set that became (non-)empty sends only its rules. Nothing else in
// those tables is touched.

import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import { nullLogger } from '../../base/logger.ts';
import type { IpsetClient } from '../../netlink/ipset/index.ts';
import type { NftClient } from '../../netlink/nftables/index.ts';
import { decodeIptRule } from '../../netlink/nftables/iptables/decode.ts';
import { iptNftRule } from '../../netlink/nftables/iptables/encode.ts';
import { IptablesNftWriter, makeCodec } from '../iptables-nft/index.ts';
import type { RuleCodec } from '../iptables-nft/index.ts';
import { CHAINS } from './rules.ts';
import type { CompanionRules, IptTable } from './rules.ts';

export interface CompanionDeps {
  /** Clients scoped to (ip|ip6, nat) and (ip|ip6, filter); batches go through `nat`'s socket. */
  readonly nat: NftClient;
  readonly filter: NftClient;
  readonly ipset: IpsetClient;
  readonly logger?: Logger;
  /** The netfilter socket's largest batch (default 4 MiB); the companion rules are a few KiB. */
  readonly maxBatchBytes?: number;
}

/** What the proxier needs of a companion-rule writer (CompanionWriter, or a fake in tests). */
export interface CompanionSink {
  write(rules: CompanionRules, signal?: AbortSignal): Promise<number>;
  remove(signal?: AbortSignal): Promise<void>;
}

const OURS = new Set(CHAINS.map((c) => `${c.table}/${c.name}`));

/** The companion chains: the only chains this writer creates, changes or removes. */
export const isCompanionChain = (table: IptTable, chain: string): boolean => OURS.has(`${table}/${chain}`);

export class CompanionWriter implements CompanionSink {
  private readonly deps: CompanionDeps;
  private readonly writer: IptablesNftWriter;
  /** The kernel index of each ipset the rules name (xt_set matches sets by index), per write. */
  private index = new Map<string, number>();

  constructor(family: IPFamily, deps: CompanionDeps) {
    this.deps = deps;
    this.writer = new IptablesNftWriter({
      clients: new Map<IptTable, NftClient>([
        ['nat', deps.nat],
        ['filter', deps.filter],
      ]),
      sender: deps.nat,
      codec: this.codec(family),
      isOurs: isCompanionChain,
      logger: deps.logger ?? nullLogger,
      ...(deps.maxBatchBytes !== undefined ? { maxBatchBytes: deps.maxBatchBytes } : {}),
      halfBatches: true,
      diffOwned: true,
    });
  }

  /** Encodes set matches by the index `write` looked up; listed rules naming another set are not ours. */
  private codec(family: IPFamily): RuleCodec {
    const names = (): Map<number, string> => new Map([...this.index].map(([n, i]) => [i, n]));
    return makeCodec(
      (r) =>
        iptNftRule(r, family, {
          setIndex: (name) => {
            const i = this.index.get(name);
            if (i === undefined) throw new Error(`ipset ${name} has no kernel index`);
            return i;
          },
        }),
      (listed, table) => {
        const byIndex = names();
        return decodeIptRule(listed, table, family, { setName: (i) => byIndex.get(i) });
      },
    );
  }

  /** Brings the rules to `rules`; returns the number of nf_tables messages sent (0: nothing changed). */
  async write(rules: CompanionRules, signal?: AbortSignal): Promise<number> {
    const index = new Map<string, number>();
    for (const r of rules.rules) {
      for (const m of r.matches) {
        if (m.m === 'set' && !index.has(m.set))
          index.set(m.set, (await this.deps.ipset.getByName(m.set, signal ? { signal } : {})).index);
      }
    }
    this.index = index;
    const r = await this.writer.writeFull(
      {
        // Jumps reversed: the writer lands a chain's missing jumps in the order given, and
        // upstream prepends each in turn (the last one ends on top).
        skeleton: { chains: rules.chains, shared: [], rules: [...rules.rules, ...[...rules.jumps].reverse()] },
        units: [],
        trust: false,
      },
      signal,
    );
    return r.messages;
  }

  /** Deletes our jump rules, then flushes and deletes our chains; other rules and chains stay. */
  remove(signal?: AbortSignal): Promise<void> {
    return this.writer.cleanup(signal);
  }
}
