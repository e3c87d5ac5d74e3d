// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/core against the real nf_tables and report what happened as plain data.
// nf_tables numbers are written out here from linux/netfilter/nf_tables.h rather than
// imported, so that the test does not depend on the code it checks.

import {
  AF_INET,
  AttrSet,
  connect,
  NfnlSubsys,
  NLM_F_CREATE,
  NLM_F_EXCL,
  nfMessage,
  Protocol,
  splitNfPayload,
} from '../../../src/netlink/core/index.ts';
import type { NetlinkConnection, OutMessage } from '../../../src/netlink/core/index.ts';
import { errorView as view } from './outcomes.ts';
import type { ErrorView } from './outcomes.ts';

export type { ErrorView };

const NFT_MSG_NEWTABLE = 0;
const NFT_MSG_GETTABLE = 1;
const NFT_MSG_DELTABLE = 2;
const NFT_MSG_NEWCHAIN = 3;
const NFT_MSG_GETCHAIN = 4;
const NFT_MSG_DELCHAIN = 5;
const NFTA_TABLE_NAME = 1;
const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const NFTA_CHAIN_HOOK = 4;
const NFTA_HOOK_HOOKNUM = 1;
const NFTA_HOOK_PRIORITY = 2;
const NFTA_CHAIN_TYPE = 7;

const nft = (cmd: number, flags: number, label: string, fill: Parameters<typeof nfMessage>[5]): OutMessage =>
  nfMessage(NfnlSubsys.NFTABLES, cmd, AF_INET, flags, label, fill);

export const newTable = (name: string, flags = NLM_F_CREATE): OutMessage =>
  nft(NFT_MSG_NEWTABLE, flags, `add table ip ${name}`, (w) => w.str(NFTA_TABLE_NAME, name));
export const delTable = (name: string): OutMessage =>
  nft(NFT_MSG_DELTABLE, 0, `delete table ip ${name}`, (w) => w.str(NFTA_TABLE_NAME, name));
export const newChain = (table: string, name: string, flags = NLM_F_CREATE): OutMessage =>
  nft(NFT_MSG_NEWCHAIN, flags, `add chain ip ${table} ${name}`, (w) =>
    w.str(NFTA_CHAIN_TABLE, table).str(NFTA_CHAIN_NAME, name),
  );
export const delChain = (table: string, name: string): OutMessage =>
  nft(NFT_MSG_DELCHAIN, 0, `delete chain ip ${table} ${name}`, (w) =>
    w.str(NFTA_CHAIN_TABLE, table).str(NFTA_CHAIN_NAME, name),
  );
/** A base chain with a hook number the kernel refuses (EINVAL/EOPNOTSUPP). */
export const badBaseChain = (table: string, name: string): OutMessage =>
  nft(NFT_MSG_NEWCHAIN, NLM_F_CREATE, `add chain ip ${table} ${name} (hook 99)`, (w) =>
    w
      .str(NFTA_CHAIN_TABLE, table)
      .str(NFTA_CHAIN_NAME, name)
      .nested(NFTA_CHAIN_HOOK, (h) => h.u32(NFTA_HOOK_HOOKNUM, 99, 'net').u32(NFTA_HOOK_PRIORITY, 0, 'net'))
      .str(NFTA_CHAIN_TYPE, 'filter'),
  );

async function withConn<T>(fn: (c: NetlinkConnection) => Promise<T>): Promise<T> {
  const c = connect(Protocol.NETFILTER, { timeoutMs: 5000 });
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}

/** Runs one batch; returns null on success or a description of the error. */
export function runBatch(msgs: OutMessage[]): Promise<ErrorView | null> {
  return withConn(async (c) => {
    try {
      await c.batch(NfnlSubsys.NFTABLES, msgs);
      return null;
    } catch (e) {
      return view(e);
    }
  });
}

export function createTableAndChain(table: string, chain: string): Promise<ErrorView | null> {
  return runBatch([newTable(table), newChain(table, chain)]);
}

export function createTableExclusive(table: string): Promise<ErrorView | null> {
  return runBatch([newTable(table, NLM_F_CREATE | NLM_F_EXCL)]);
}

export function deleteChain(table: string, chain: string): Promise<ErrorView | null> {
  return runBatch([delChain(table, chain)]);
}

export function deleteTable(table: string): Promise<ErrorView | null> {
  return runBatch([delTable(table)]);
}

export function addBadChain(table: string): Promise<ErrorView | null> {
  return runBatch([badBaseChain(table, 'bad')]);
}

/** Dumps tables and chains through the core and returns their names. */
export function dumpNames(): Promise<{ tables: string[]; chains: string[] }> {
  return withConn(async (c) => {
    const names = (replies: { payload: Uint8Array }[], attr: number, tableAttr?: number): string[] =>
      replies.map((m) => {
        const nf = splitNfPayload(m.payload);
        if (!nf) throw new Error('reply without nfgenmsg');
        const a = new AttrSet(nf.attrs, 'dump');
        return tableAttr === undefined ? String(a.str(attr)) : `${a.str(tableAttr)}/${a.str(attr)}`;
      });
    const tables = await c.request(
      nft(NFT_MSG_GETTABLE, 0, 'list tables', () => {}),
      { dump: true },
    );
    const chains = await c.request(
      nft(NFT_MSG_GETCHAIN, 0, 'list chains', () => {}),
      { dump: true },
    );
    return {
      tables: names(tables, NFTA_TABLE_NAME).sort(),
      chains: names(chains, NFTA_CHAIN_NAME, NFTA_CHAIN_TABLE).sort(),
    };
  });
}

/** A plain (non-dump) GET of a table that does not exist: expects ENOENT. */
export function getMissingTable(name: string): Promise<ErrorView | null> {
  return withConn(async (c) => {
    try {
      await c.request(nft(NFT_MSG_GETTABLE, 0, `get table ip ${name}`, (w) => w.str(NFTA_TABLE_NAME, name)));
      return null;
    } catch (e) {
      return view(e);
    }
  });
}

/** Many concurrent requests on one connection: every caller must get its own answer. */
export function concurrentGets(names: string[]): Promise<(string | ErrorView)[]> {
  return withConn((c) =>
    Promise.all(
      names.map(async (n) => {
        try {
          const r = await c.request(nft(NFT_MSG_GETTABLE, 0, `get table ip ${n}`, (w) => w.str(NFTA_TABLE_NAME, n)));
          const nf = splitNfPayload(r[0]!.payload)!;
          return String(new AttrSet(nf.attrs, 'table').str(NFTA_TABLE_NAME));
        } catch (e) {
          return view(e);
        }
      }),
    ),
  );
}

/** A chain message without NFTA_CHAIN_NAME: the kernel answers EINVAL. */
export function addNamelessChain(table: string): Promise<ErrorView | null> {
  return runBatch([
    nft(NFT_MSG_NEWCHAIN, NLM_F_CREATE, `add chain ip ${table} (no name)`, (w) => w.str(NFTA_CHAIN_TABLE, table)),
  ]);
}

/** Five messages, the third one invalid: the whole batch must be refused. */
export function batchWithInvalidThird(table: string): Promise<{ error: ErrorView | null; ms: number }> {
  const t0 = performance.now();
  return runBatch([
    newTable(table),
    newChain(table, 'one'),
    badBaseChain(table, 'three'),
    newChain(table, 'four'),
    newChain(table, 'five'),
  ]).then((error) => ({ error, ms: performance.now() - t0 }));
}

/** A large batch (many chains) in one transaction. */
export function manyChains(table: string, n: number): Promise<ErrorView | null> {
  const msgs = [newTable(table)];
  for (let i = 0; i < n; i++) msgs.push(newChain(table, `c${i}`));
  return runBatch(msgs);
}
