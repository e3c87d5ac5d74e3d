// Benchmark: deleting many stale conntrack entries over ctnetlink, in a throwaway namespace
// (root needed). Inserts N UDP entries to a ClusterIP through our own CT_NEW messages, dumps
// them with a kernel-side filter, deletes them all over one connection (pipelined DELETEs),
// and, for comparison, does the same with the conntrack CLI (what older upstream exec'd):
// one `conntrack -D` process that dumps and deletes every match.
//
//   node test/bench/conntrack.ts [entries] [perDatagram] [rounds] [warmup]
//
// warmup (default 2000) entries go through the same steps first, in the same process, so
// the figures are those of a running daemon rather than of freshly loaded code.

import { Netns } from '../helpers/netns.ts';
import type { DeleteBench } from '../kernel/scenarios/conntrack.ts';

const S = new URL('../kernel/scenarios/conntrack.ts', import.meta.url).href;

export interface ConntrackDeleteBench extends DeleteBench {
  /** The same deletion by one `conntrack -D -p udp --orig-dst VIP --dport 53` process, ms. */
  cliDeleteMs: number;
  cliDeleted: number;
}

export async function benchConntrackDelete(opts: { entries?: number; perDatagram?: number; warmup?: number } = {}): Promise<ConntrackDeleteBench> {
  const entries = opts.entries ?? 10_000;
  const ns = await Netns.create('ct-bench');
  try {
    const a = await ns.agent();
    const ours = await a.call<DeleteBench>(S, 'benchDelete', entries, opts.perDatagram ?? 1024, opts.warmup ?? 2000);
    // The exec way, on the same number of entries.
    const { udpFlows } = await import('../kernel/scenarios/conntrack.ts');
    const failed = (await a.call<(unknown | null)[]>(S, 'create', udpFlows(entries, '10.96.0.10', '10.244.1.5'))).filter(Boolean);
    if (failed.length) throw new Error(`${failed.length} inserts failed`);
    const t0 = performance.now();
    const r = await ns.exec('/usr/sbin/conntrack', ['-D', '-p', 'udp', '--orig-dst', '10.96.0.10', '--dport', '53'], { timeoutMs: 300_000 });
    const cliDeleteMs = performance.now() - t0;
    const m = /(\d+) flow entries have been deleted/.exec(r.stderr);
    return { ...ours, cliDeleteMs, cliDeleted: m ? Number(m[1]) : -1 };
  } finally {
    await ns.destroy();
  }
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const entries = Number(process.argv[2] ?? 10_000);
  const perDatagram = Number(process.argv[3] ?? 1024);
  const rounds = Number(process.argv[4] ?? 1);
  const warmup = Number(process.argv[5] ?? 2000);
  console.log(`conntrack delete, ${entries} entries, ${perDatagram} DELETEs per datagram, ${rounds} round(s), warm-up ${warmup}; load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log('  wall (cpu) ms:   insert(CT_NEW)      dump(CTA_FILTER)    delete(pipelined)   conntrack -D (one exec, wall)');
  for (let i = 0; i < rounds; i++) {
    const r = await benchConntrackDelete({ entries, perDatagram, warmup });
    if (r.deleted !== entries || r.left !== 0 || r.cliDeleted !== entries) console.log(`  !! deleted ${r.deleted}, left ${r.left}, errors ${r.errors}, cli deleted ${r.cliDeleted}`);
    const wc = (w: number, c: number): string => `${w.toFixed(1)} (${c.toFixed(1)})`.padStart(18);
    console.log(`                 ${wc(r.insertMs, r.insertCpuMs)}  ${wc(r.dumpMs, r.dumpCpuMs)}  ${wc(r.deleteMs, r.deleteCpuMs)}  ${r.cliDeleteMs.toFixed(1).padStart(10)}`);
  }
}
