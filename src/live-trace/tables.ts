// The tables `trace --live` arms tracing with: one per session, named after its owner, so
// that concurrent sessions never touch each other's rules and a table whose owner is gone
// can be told from one in use.
//
//   kube-proxy-ts-trace-<pid>-<start>-<n>
//
// <pid> is the daemon that armed it, <start> that process's start time (field 22 of
// /proc/<pid>/stat, clock ticks since boot: a pid reused by another process has another),
// <n> the session's number within the daemon. A daemon killed mid-trace (SIGKILL, OOM)
// leaves its table behind; the next start removes every table whose owner no longer runs
// (removeStaleTraceTables), --cleanup removes them all. `kube-proxy-ts-trace` (no owner) is
// the one shared table of earlier versions, always stale.

import { readFileSync } from 'node:fs';
import type { Logger } from '../base/logger.ts';
import { isNotFound } from '../netlink/core/index.ts';
import type { NetlinkTransport } from '../netlink/core/index.ts';
import { NftClient } from '../netlink/nftables/index.ts';

export const TRACE_TABLE_PREFIX = 'kube-proxy-ts-trace-';
/** Earlier versions' single table, shared by every session. */
export const LEGACY_TRACE_TABLE = 'kube-proxy-ts-trace';

export interface TraceOwner {
  pid: number;
  /** The process's start time, clock ticks since boot. */
  start: number;
}

/** A process's start time from /proc/<pid>/stat; undefined when no such process runs. */
export function processStart(pid: number, proc = '/proc'): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`${proc}/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]); // field 22 of the whole line
  return Number.isSafeInteger(start) ? start : undefined;
}

let self: TraceOwner | undefined;

/** This process as the owner of the tables it arms. */
export function selfOwner(): TraceOwner {
  self ??= { pid: process.pid, start: processStart(process.pid) ?? 0 };
  return self;
}

export function traceTableName(owner: TraceOwner, session: number): string {
  return `${TRACE_TABLE_PREFIX}${owner.pid}-${owner.start}-${session}`;
}

/** Whether a table is one of trace --live's (any owner, or the earlier shared one). */
export function isTraceTable(name: string): boolean {
  return name === LEGACY_TRACE_TABLE || name.startsWith(TRACE_TABLE_PREFIX);
}

/** The owner a trace table's name records; undefined for the earlier shared table or a name not of this form. */
export function traceTableOwner(name: string): TraceOwner | undefined {
  const m = /^kube-proxy-ts-trace-(\d+)-(\d+)-\d+$/.exec(name);
  return m === null ? undefined : { pid: Number(m[1]), start: Number(m[2]) };
}

/** The owner still runs: that pid, started at that time. */
export function ownerAlive(owner: TraceOwner, startOf: (pid: number) => number | undefined = processStart): boolean {
  return startOf(owner.pid) === owner.start;
}

/**
 * Deletes trace --live tables in this network namespace: those whose owner is gone, or
 * every one (`all`, for --cleanup). Returns the names removed ("ip kube-proxy-ts-trace-…").
 */
export async function removeTraceTables(
  transport: NetlinkTransport,
  opts: { all: boolean; logger?: Logger; alive?: (owner: TraceOwner) => boolean },
): Promise<string[]> {
  const alive = opts.alive ?? ((o: TraceOwner) => ownerAlive(o));
  const lister = new NftClient({ family: 'ip', table: LEGACY_TRACE_TABLE, transport });
  const removed: string[] = [];
  for (const t of await lister.listTables()) {
    if ((t.family !== 'ip' && t.family !== 'ip6') || !isTraceTable(t.name)) continue;
    const owner = traceTableOwner(t.name);
    if (!opts.all && owner !== undefined && alive(owner)) continue;
    const nft = new NftClient({ family: t.family, table: t.name, transport });
    const tx = nft.newTransaction();
    tx.delete({ kind: 'table' });
    try {
      await nft.run(tx);
    } catch (e) {
      if (!isNotFound(e)) throw e; // its owner removed it meanwhile
      continue;
    }
    removed.push(`${t.family} ${t.name}`);
    opts.logger?.info(opts.all ? 'Removed a trace --live table' : 'Removed a trace --live table whose owner is gone', {
      table: `${t.family} ${t.name}`,
      ...(owner ? { ownerPid: owner.pid } : {}),
    });
  }
  return removed;
}
