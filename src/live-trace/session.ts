// `kube-proxy-ts trace --live`: the real path of the next packet that matches the query. It
// arms nf_tables tracing for such packets only (a table of the session's own,
// `kube-proxy-ts-trace-<pid>-<start>-<n>` (tables.ts), whose chains, hooked after
// conntrack (-200) and before every chain of the proxy (-110 and later), set `meta nftrace 1`
// on the first packet of a matching connection: later packets are not traced, so their
// events never mix with the first one's), listens to the trace events (NFT_MSG_TRACE over
// NFNLGRP_NFTRACE, as `nft monitor trace`), keeps those of the first packet its own table
// marked (every session hears every traced packet; another session's is not its answer), and
// removes its table again, also on time-out, error or a client gone away. It sends nothing.

import type { TraceQuery } from '../explain/trace.ts';
import { connect, Protocol } from '../netlink/core/index.ts';
import { NftClient, rule } from '../netlink/nftables/index.ts';
import type { Field, RuleBuilder } from '../netlink/nftables/index.ts';
import { openTraceMonitor } from '../netlink/nftables/trace.ts';
import type { TraceEvent } from '../netlink/nftables/trace.ts';
import { isTraceTable, selfOwner, traceTableName } from './tables.ts';

/** Sessions armed by this process so far: the <n> of each table's name. */
let sessions = 0;
/** The packet's events are complete once none has come for this long. */
const QUIET_MS = 300;

export interface LiveTrace {
  /** A matching packet was seen before the time-out. */
  readonly seen: boolean;
  readonly waitedMs: number;
  /** Its events, in the order the kernel met them (the arming table's own left out). */
  readonly path: readonly (Omit<TraceEvent, 'ruleHandle'> & { ruleHandle?: number })[];
}

function matchRule(family: 'ip' | 'ip6', chain: string, q: TraceQuery, inInterface: boolean): RuleBuilder {
  const a = family === 'ip' ? 'ip' : 'ip6';
  let b = rule(family, chain)
    .ctState(['new'])
    .match(`${a} saddr` as Field, q.from)
    .match(`${a} daddr` as Field, q.to)
    .match('meta l4proto', q.protocol.toLowerCase());
  if (q.fromPort !== undefined) b = b.match('th sport', q.fromPort);
  b = b.match('th dport', q.port);
  if (inInterface && q.inInterface !== undefined) b = b.match('iifname', q.inInterface);
  // meta nftrace set 1, as nft encodes it: the constant in reg 1, then meta set.
  return b.raw(
    [
      { type: 'immediate', dreg: 1, data: Uint8Array.of(1) },
      { type: 'meta', key: 'nftrace', sreg: 1 },
    ],
    'meta nftrace set 1',
  );
}

export async function liveTrace(q: TraceQuery, opts: { timeoutMs: number; signal: AbortSignal }): Promise<LiveTrace> {
  const family = q.to.includes(':') ? 'ip6' : 'ip';
  const owner = selfOwner();
  const table = traceTableName(owner, ++sessions);
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  const nft = new NftClient({ family, table, transport: conn });
  const events: TraceEvent[] = [];
  let first: number | undefined;
  let failure: Error | undefined;
  let wake: () => void = () => undefined;
  let quiet: NodeJS.Timeout | undefined;
  const monitor = openTraceMonitor(
    (e) => {
      // A packet is ours once our own arming rule marked it: a rule event of our table with a
      // rule handle. A packet another session marked also shows in our table, as it passes
      // our chain, but as an event without a handle (the kernel's first event in a base chain).
      if (first === undefined && (e.table !== table || e.type !== 'rule' || e.ruleHandle === undefined)) return;
      first ??= e.id;
      if (e.id !== first) return;
      if (!isTraceTable(e.table)) events.push(e);
      clearTimeout(quiet);
      quiet = setTimeout(() => wake(), QUIET_MS);
    },
    (err) => {
      failure = err;
      wake();
    },
  );
  const started = performance.now();
  let armed = false;
  try {
    const tx = nft.newTransaction();
    tx.add({
      kind: 'table',
      comment: `kube-proxy-ts trace --live of pid ${owner.pid}: removed when the trace ends, or at the next start`,
    });
    tx.add({
      kind: 'chain',
      name: 'prerouting',
      base: { type: 'filter', hook: 'prerouting', priority: -150, policy: 'accept' },
    });
    tx.add({
      kind: 'chain',
      name: 'output',
      base: { type: 'filter', hook: 'output', priority: -150, policy: 'accept' },
    });
    tx.add(matchRule(family, 'prerouting', q, true).build());
    tx.add(matchRule(family, 'output', q, false).build());
    armed = true;
    await nft.run(tx, opts.signal);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, opts.timeoutMs);
      const onAbort = (): void => resolve();
      opts.signal.addEventListener('abort', onAbort, { once: true });
      wake = () => {
        clearTimeout(timer);
        opts.signal.removeEventListener('abort', onAbort);
        resolve();
      };
    });
  } finally {
    clearTimeout(quiet);
    monitor.close();
    if (armed) {
      const tx = nft.newTransaction();
      tx.delete({ kind: 'table' });
      await nft.run(tx).catch(() => undefined); // absent when arming failed half-way
    }
    conn.close();
  }
  if (failure) throw failure;
  const path = events.map(({ ruleHandle, ...e }) => ({
    ...e,
    ...(ruleHandle !== undefined ? { ruleHandle: Number(ruleHandle) } : {}),
  }));
  return { seen: first !== undefined, waitedMs: Math.round(performance.now() - started), path };
}
