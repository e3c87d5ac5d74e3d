// The suite's conntrack section (npm run bench -- conntrack): benchConntrackDelete from
// conntrack.ts repeated, each round in a namespace of its own, reported side by side with one
// `conntrack -D` process deleting the same entries. Kept apart from conntrack.ts, which is
// still being finished, so that the two do not edit the same file; fold it in once it settles.

import { Netns } from '../helpers/netns.ts';
import { udpFlows } from '../kernel/scenarios/conntrack.ts';
import { benchConntrackDelete } from './conntrack.ts';
import type { ConntrackDeleteBench } from './conntrack.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, formatRatio, formatSpread, summarize } from './stats.ts';

const SCENARIO = new URL('../kernel/scenarios/conntrack.ts', import.meta.url).href;
const TARGET_ENTRIES = 10_000;

/**
 * The CPU time (user + system) of the `conntrack -D` process deleting `entries` entries, read by
 * bash's `times` (its children's rusage), in a namespace of its own. Node cannot read a child's
 * rusage, and on a loaded machine wall time says little about the work each side does.
 */
async function execCpuMs(entries: number): Promise<number> {
  const ns = await Netns.create('ct-bench-cpu');
  try {
    const a = await ns.agent();
    const failed = (await a.call<(unknown | null)[]>(SCENARIO, 'create', udpFlows(entries, '10.96.0.10', '10.244.1.5'))).filter(Boolean);
    if (failed.length) throw new Error(`${failed.length} inserts failed`);
    const r = await ns.exec('/bin/bash', ['-c', '/usr/sbin/conntrack -D -p udp --orig-dst 10.96.0.10 --dport 53 2>/dev/null; times'], { timeoutMs: 300_000 });
    // conntrack prints each deleted entry on stdout (kept, as in the timed run: it is part of
    // the exec's work); then `times` prints the shell's user/sys and its children's, last.
    const lines = r.stdout.trim().split('\n');
    const children = lines[lines.length - 1] ?? '';
    const m = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(children.trim());
    if (!m) throw new Error(`unexpected \`times\` output: ${JSON.stringify(r.stdout.slice(-200))}`);
    return (Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000;
  } finally {
    await ns.destroy();
  }
}
const TARGET_MS = 100;

async function conntrackSections(opts: BenchOptions): Promise<Section[]> {
  const entries = opts.quick ? 1_000 : TARGET_ENTRIES;
  const rounds = opts.quick ? 1 : 5;
  const warmup = opts.quick ? 200 : 2_000;
  const results: ConntrackDeleteBench[] = [];
  const execCpu: number[] = [];
  for (let r = 0; r < rounds; r++) {
    opts.log(`conntrack: ${formatCount(entries)} entries, round ${r + 1}/${rounds}`);
    // perDatagram is left to conntrack.ts's default (its owner tunes it); the result names it.
    results.push(await benchConntrackDelete({ entries, warmup }));
    execCpu.push(await execCpuMs(entries));
  }
  const perDatagram = results[0]!.perDatagram;
  const pick = (f: (r: ConntrackDeleteBench) => number): number[] => results.map(f);
  const exec = summarize(pick((r) => r.cliDeleteMs));
  const row = (way: string, wall: number[], cpu: number[], baseline = false): string[] => {
    const s = summarize(wall);
    return [way, formatCount(entries), formatMs(s.median), formatSpread(s), formatMs(summarize(cpu).median), baseline ? 'baseline' : formatRatio(exec.median, s.median), formatCount(s.runs)];
  };
  const dumpDelete = summarize(pick((r) => r.dumpMs + r.deleteMs));
  const deleteOnly = summarize(pick((r) => r.deleteMs));
  const dumpDeleteCpu = summarize(pick((r) => r.dumpCpuMs + r.deleteCpuMs));
  const problems = results.filter((r) => r.deleted !== entries || r.left !== 0 || r.errors !== 0 || r.cliDeleted !== entries);
  const targets: Target[] = [
    {
      what: `#6 ${formatCount(entries)} stale UDP entries found and deleted over ctnetlink`,
      target: `< ${TARGET_MS} ms for ${formatCount(TARGET_ENTRIES)}`,
      status: entries !== TARGET_ENTRIES ? 'not measured' : dumpDelete.median < TARGET_MS && problems.length === 0 ? 'met' : 'missed',
      detail:
        entries !== TARGET_ENTRIES
          ? `quick mode ran ${formatCount(entries)} entries`
          : `dump + delete ${formatMs(dumpDelete.median)} wall (${formatMs(dumpDeleteCpu.median)} CPU); delete alone ${formatMs(deleteOnly.median)}; exec \`conntrack -D\` ${formatMs(exec.median)} wall (${formatMs(summarize(execCpu).median)} CPU)`,
    },
  ];
  return [
    {
      title: 'Conntrack flush (issue 6): deleting stale UDP entries',
      description:
        `${formatCount(entries)} UDP entries client → 10.96.0.10:53 with replies from one endpoint, inserted over ctnetlink in a throwaway namespace; ` +
        'ours dumps them with a kernel-side filter (CTA_FILTER on original destination and reply source) and deletes them ' +
        `over one socket, ${perDatagram} pipelined DELETEs per datagram. Then the same number of entries is inserted again and deleted by one ` +
        '`conntrack -D -p udp --orig-dst 10.96.0.10 --dport 53` process (what upstream exec’d before it moved to netlink), timed from outside with process start-up included (through `ip netns exec`, whose own start-up counts against the exec side). ' +
        `Each round runs in a fresh namespace after ${formatCount(warmup)} entries of warm-up through the same code.`,
      columns: [{ title: 'way' }, { title: 'entries', align: 'right' }, { title: 'median (wall)', align: 'right' }, { title: 'spread (wall)', align: 'right' }, { title: 'median CPU', align: 'right' }, { title: 'vs exec', align: 'right' }, { title: 'runs', align: 'right' }],
      rows: [
        row('ours: dump with kernel-side filter', pick((r) => r.dumpMs), pick((r) => r.dumpCpuMs)),
        row(`ours: delete, ${perDatagram} per datagram`, pick((r) => r.deleteMs), pick((r) => r.deleteCpuMs)),
        row('ours: dump + delete (a flush end to end)', pick((r) => r.dumpMs + r.deleteMs), pick((r) => r.dumpCpuMs + r.deleteCpuMs)),
        row('exec: one `conntrack -D` process (dump + delete, start-up included)', pick((r) => r.cliDeleteMs), execCpu, true),
      ],
      notes: [
        'CPU is user + system time of the process doing the work; the kernel’s side of the requests runs inside its sendmsg/recvmsg calls and is counted there. ' +
          'For the exec row it is the `conntrack` process’s own, read by bash’s `times` in a separate namespace holding the same entries (one per round).',
        '“vs exec” is how many times faster than the `conntrack -D` process (below 1×: slower).',
        problems.length === 0
          ? `Every round: ours deleted ${formatCount(entries)} entries, none left, no errors; \`conntrack -D\` reported ${formatCount(entries)} deleted.`
          : `**Check:** ${problems.length} round(s) did not delete exactly ${formatCount(entries)}: ${problems.map((r) => `ours ${r.deleted} deleted / ${r.left} left / ${r.errors} errors, conntrack -D ${r.cliDeleted}`).join('; ')}.`,
      ],
      targets,
    },
  ];
}

export const bench: Bench = { needsRoot: true, run: conntrackSections };
