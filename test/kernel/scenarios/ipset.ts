// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/ipset against the machine's kernel and report results as plain data.
import { adtBulkMessages, openIpset } from '../../../src/netlink/ipset/index.ts';
import type { IpsetClient, IpsetEntry } from '../../../src/netlink/ipset/index.ts';
import { errorView as view, runClientCalls } from './outcomes.ts';
import type { ErrorView, MethodOf, Outcome } from './outcomes.ts';

export type { ErrorView, Outcome };

export type Call = [MethodOf<IpsetClient>, ...unknown[]];

/** Runs client calls in order; each outcome is reported, none throws. */
export const runCalls = (client: IpsetClient, list: Call[]): Promise<Outcome[]> => runClientCalls(client, list);

/** runCalls on a fresh connection in this namespace (the agent's). */
export async function calls(list: Call[]): Promise<Outcome[]> {
  const { client, close } = openIpset({ timeoutMs: 10_000 });
  try {
    return await runCalls(client, list);
  } finally {
    close();
  }
}

/** `n` distinct hash:ip,port entries, the same on every call. */
export function entries(n: number, comment = false): IpsetEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    proto: i % 2 ? ('udp' as const) : ('tcp' as const),
    port: 1 + (i % 60000),
    ...(comment ? { comment: `ns${i % 13}/svc-${i}:port` } : {}),
  }));
}

/** Creates a hash:ip,port set and adds n entries in bulk; returns the time the adds took. */
export async function timedAddMany(
  set: string,
  n: number,
  comment: boolean,
): Promise<{ ms: number; messages: number }> {
  const { client, close } = openIpset({ timeoutMs: 60_000 });
  try {
    await client.create(set, 'hash:ip,port', { hashSize: 1024, maxElem: Math.max(65536, n * 2), comment });
    const list = entries(n, comment);
    const t0 = performance.now();
    await client.addMany(set, list);
    const ms = performance.now() - t0;
    return { ms, messages: adtBulkMessages('add', set, list).msgs.length };
  } finally {
    close();
  }
}

/** Adds n entries one request each (for comparison with the bulk path). */
export async function timedAddOneByOne(set: string, n: number): Promise<{ ms: number }> {
  const { client, close } = openIpset({ timeoutMs: 60_000 });
  try {
    await client.create(set, 'hash:ip,port', { maxElem: Math.max(65536, n * 2) });
    const list = entries(n);
    const t0 = performance.now();
    for (const e of list) await client.add(set, e);
    return { ms: performance.now() - t0 };
  } finally {
    close();
  }
}

/**
 * Why bulk adds use ADT lists: the kernel refuses nfnetlink batches for the ipset subsystem
 * (it has no transactions). Returns the error of a two-add batch, and how many entries landed.
 */
export async function batchAttempt(set: string): Promise<{ error: ErrorView | null; entries: number }> {
  const { connect, NfnlSubsys, Protocol } = await import('../../../src/netlink/core/index.ts');
  const { adtMessage, IpsetClient: Client } = await import('../../../src/netlink/ipset/index.ts');
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  try {
    const client = new Client(conn);
    await client.create(set, 'hash:ip', {});
    let error: ErrorView | null = null;
    try {
      await conn.batch(NfnlSubsys.IPSET, [
        adtMessage('add', set, { ip: '10.0.0.1' }),
        adtMessage('add', set, { ip: '10.0.0.2' }),
      ]);
    } catch (e) {
      error = view(e);
    }
    return { error, entries: (await client.get(set)).entries.length };
  } finally {
    conn.close();
  }
}
