// Benchmark: deleting many stale conntrack entries, in a throwaway namespace (root needed).
// Inserts N UDP entries client → 10.96.0.10:53 answered by the removed endpoint 10.244.1.5
// (with 1,000 answered by a healthy one, which must stay) through our own CT_NEW messages,
// and deletes them each of the ways kube-proxy-ts has (conntrack-agent.ts):
//
//   - on Linux 6.12+: one kernel-side filtered flush (a DELETE carrying CTA_FILTER), alone
//     and as the flusher runs it after a sync;
//   - before 6.12 (Debian 12's 6.1 refuses that request): a dump with the kernel-side
//     CTA_FILTER, then pipelined DELETEs, alone and through the flusher;
//
// and, for comparison, with the conntrack CLI (what older upstream exec'd): one `conntrack -D`
// process that dumps and deletes every match, on the same number of entries.
//
//   node test/bench/conntrack.ts [entries] [perDatagram] [rounds] [warmup]
//
// warmup (default 2000) entries go through the same steps first, in the same process, so
// the figures are those of a running daemon rather than of freshly loaded code.

import os from 'node:os';
import { Netns } from '../helpers/netns.ts';
import { udpFlows } from '../kernel/scenarios/conntrack.ts';
import { DEFAULT_PER_DATAGRAM } from '../../src/netlink/conntrack/index.ts';
import type { FlushWays } from './conntrack-agent.ts';

const AGENT = new URL('./conntrack-agent.ts', import.meta.url).href;
const SCENARIO = new URL('../kernel/scenarios/conntrack.ts', import.meta.url).href;

export interface ConntrackDeleteBench extends FlushWays {
  /** The same deletion by one `conntrack -D -p udp --orig-dst VIP --dport 53 --reply-src EP` process, ms. */
  cliDeleteMs: number;
  cliDeleted: number;
  /** The 1-minute load average before and after the round. */
  load: [number, number];
}

export async function benchConntrackDelete(
  opts: { entries?: number; perDatagram?: number; warmup?: number } = {},
): Promise<ConntrackDeleteBench> {
  const entries = opts.entries ?? 10_000;
  const load0 = os.loadavg()[0]!;
  const ns = await Netns.create('ct-bench');
  try {
    const a = await ns.agent();
    const ours = await a.call<FlushWays>(
      AGENT,
      'benchWays',
      entries,
      opts.perDatagram ?? DEFAULT_PER_DATAGRAM,
      opts.warmup ?? 2000,
    );
    // The exec way, on the same number of stale entries (the 1,000 healthy ones are still there).
    const failed = (
      await a.call<(unknown | null)[]>(SCENARIO, 'create', udpFlows(entries, '10.96.0.10', '10.244.1.5'))
    ).filter(Boolean);
    if (failed.length) throw new Error(`${failed.length} inserts failed`);
    const t0 = performance.now();
    const r = await ns.exec(
      '/usr/sbin/conntrack',
      ['-D', '-p', 'udp', '--orig-dst', '10.96.0.10', '--dport', '53', '--reply-src', '10.244.1.5'],
      { timeoutMs: 300_000 },
    );
    const cliDeleteMs = performance.now() - t0;
    const m = /(\d+) flow entries have been deleted/.exec(r.stderr);
    return { ...ours, cliDeleteMs, cliDeleted: m ? Number(m[1]) : -1, load: [load0, os.loadavg()[0]!] };
  } finally {
    await ns.destroy();
  }
}

/** Whether a round deleted exactly the stale entries every way and kept the healthy ones. */
export function roundProblems(r: ConntrackDeleteBench): string[] {
  const p: string[] = [];
  const keep = r.unrelated;
  if (r.kernelFlush && (r.flush.deleted !== r.entries || r.flush.left !== keep))
    p.push(`flush deleted ${r.flush.deleted}, left ${r.flush.left}`);
  if (r.flusher.deleted !== r.entries || r.flusher.left !== keep)
    p.push(`flusher deleted ${r.flusher.deleted}, left ${r.flusher.left}`);
  if (r.dump.found !== r.entries || r.delete.deleted !== r.entries || r.delete.errors !== 0 || r.delete.left !== keep)
    p.push(
      `dump found ${r.dump.found}, deleted ${r.delete.deleted} (${r.delete.errors} errors), left ${r.delete.left}`,
    );
  if (
    r.fallbackFlusher.deleted !== r.entries ||
    r.fallbackFlusher.kernelFlushes !== 0 ||
    r.fallbackFlusher.left !== keep
  )
    p.push(`fallback flusher deleted ${r.fallbackFlusher.deleted}, left ${r.fallbackFlusher.left}`);
  if (r.cliDeleted !== r.entries) p.push(`conntrack -D deleted ${r.cliDeleted}`);
  return p;
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const entries = Number(process.argv[2] ?? 10_000);
  const perDatagram = Number(process.argv[3] ?? DEFAULT_PER_DATAGRAM);
  const rounds = Number(process.argv[4] ?? 1);
  const warmup = Number(process.argv[5] ?? 2000);
  console.log(
    `conntrack delete, ${entries} stale entries (+1,000 healthy), ${perDatagram} DELETEs per datagram, ${rounds} round(s), warm-up ${warmup}; load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  console.log(
    '  wall (cpu) ms:  flush(6.12+)      flusher(6.12+)    dump(CTA_FILTER)  delete(pipelined)  flusher(dump way)  conntrack -D   load',
  );
  const wc = (w: number, c: number): string => `${w.toFixed(1)} (${c.toFixed(1)})`.padStart(17);
  for (let i = 0; i < rounds; i++) {
    const r = await benchConntrackDelete({ entries, perDatagram, warmup });
    for (const p of roundProblems(r)) console.log(`  !! ${p}`);
    if (!r.kernelFlush) console.log('  (this kernel refused the filtered flush: the 6.12+ columns took the dump way)');
    console.log(
      `               ${wc(r.flush.ms, r.flush.cpuMs)} ${wc(r.flusher.ms, r.flusher.cpuMs)} ${wc(r.dump.ms, r.dump.cpuMs)} ${wc(r.delete.ms, r.delete.cpuMs)} ${wc(r.fallbackFlusher.ms, r.fallbackFlusher.cpuMs)} ${r.cliDeleteMs.toFixed(1).padStart(12)}   ${r.load.map((l) => l.toFixed(1)).join('→')}`,
    );
  }
}
