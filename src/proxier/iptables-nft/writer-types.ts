// What the iptables writer needs of the nf_tables layer: per table, a client to read it and
// encode transactions; per family, one sender of batches that may span the three tables
// (all of a sync's messages go in one nfnetlink transaction when they fit).

import type { OutMessage } from '../../netlink/core/index.ts';
import type { ListedTable, NftChain, NftRule, NftTransaction, Scope } from '../../netlink/nftables/index.ts';

export interface TableClient {
  readonly scope: Scope;
  newTransaction(): NftTransaction;
  encode(tx: NftTransaction): OutMessage[];
  listTables(): Promise<ListedTable[]>;
  listChains(): Promise<NftChain[]>;
  listRules(chain?: string): Promise<NftRule[]>;
}

export interface BatchSender {
  /** One nfnetlink batch; with echo, the handles of new rules by message index. */
  runMessages(
    msgs: readonly OutMessage[],
    signal?: AbortSignal,
    opts?: { echo?: boolean },
  ): Promise<Map<number, bigint>>;
}
