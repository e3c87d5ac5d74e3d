// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/nfacct against the machine's kernel and report results as plain data.
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { NfacctClient } from '../../../src/netlink/nfacct/index.ts';
import { runClientCalls } from './outcomes.ts';
import type { MethodOf, Outcome } from './outcomes.ts';

export type { Outcome };
export type Call = [MethodOf<NfacctClient>, ...unknown[]];

/** Client calls in order on a fresh connection in this namespace; bigints as decimal text. */
export async function calls(list: Call[]): Promise<Outcome[]> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  try {
    const out = await runClientCalls(new NfacctClient(conn), list);
    return JSON.parse(JSON.stringify(out, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))) as Outcome[];
  } finally {
    conn.close();
  }
}
