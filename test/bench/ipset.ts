// ipset benchmark: adding N hash:ip,port entries (with comments, as kube-proxy's sets carry)
// to a fresh set, three ways, in one throwaway network namespace:
//   - ours, bulk:        IpsetClient.addMany (ADT lists, ~1,500 entries per message)
//   - ours, one by one:  IpsetClient.add per entry (one request and ACK each)
//   - exec:              `ipset restore` of the same entries, timed from outside, process
//                        start-up included (what upstream kube-proxy does)
// Each way runs `runs` times on a new set; medians are reported (and the raw samples returned
// for the suite's spread). Figures are wall-clock on whatever machine runs this: compare them
// side by side, not across machines. The suite (npm run bench -- ipset) also times a few
// hundred `ipset add` processes, one per entry, the way upstream filled sets in issue 133773.
//
// Needs root (it creates a namespace). Run alone: node test/bench/ipset.ts [entries] [runs]

import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Netns } from '../helpers/netns.ts';
import { entries } from '../kernel/scenarios/ipset.ts';
import type { Bench, BenchOptions, Section } from './section.ts';
import { formatCount, formatMs, formatRatio, formatSpread, median, summarize } from './stats.ts';

const SCENARIO = new URL('../kernel/scenarios/ipset.ts', import.meta.url).href;

export interface IpsetBenchResult {
  entries: number;
  runs: number;
  /** Median milliseconds per way. */
  bulkMs: number;
  oneByOneMs: number;
  restoreExecMs: number;
  /** Messages the bulk path sent for N entries. */
  bulkMessages: number;
  /** The raw samples per way, ms, in run order. */
  samples: { bulk: number[]; oneByOne: number[]; restoreExec: number[] };
}

function restoreScript(set: string, n: number): string {
  const lines = [`create ${set} hash:ip,port family inet hashsize 1024 maxelem ${Math.max(65536, n * 2)} comment`];
  for (const e of entries(n, true)) lines.push(`add ${set} ${e.ip},${e.proto}:${e.port} comment "${e.comment}"`);
  return lines.join('\n') + '\n';
}

export async function benchIpsetAdd(n = 20_000, runs = 3): Promise<IpsetBenchResult> {
  const ns = await Netns.create('bench-ipset');
  try {
    const agent = await ns.agent();
    const bulk: number[] = [];
    const one: number[] = [];
    const exec: number[] = [];
    let bulkMessages = 0;
    for (let r = 0; r < runs; r++) {
      const b = await agent.call<{ ms: number; messages: number }>(SCENARIO, 'timedAddMany', `KPTS-BULK-${r}`, n, true);
      bulk.push(b.ms);
      bulkMessages = b.messages;
      one.push((await agent.call<{ ms: number }>(SCENARIO, 'timedAddOneByOne', `KPTS-ONE-${r}`, n)).ms);
      const script = restoreScript(`KPTS-EXEC-${r}`, n);
      const t0 = performance.now();
      const res = await ns.exec('ipset', ['restore'], { input: script, timeoutMs: 120_000 });
      exec.push(performance.now() - t0);
      if (res.code !== 0) throw new Error(`ipset restore failed: ${res.stderr}`);
      const count = (await ns.run('ipset', 'list', '-t', `KPTS-EXEC-${r}`)).match(/Number of entries: (\d+)/)?.[1];
      if (Number(count) !== n) throw new Error(`ipset restore left ${count} entries, expected ${n}`);
      // Keep the namespace small between runs.
      await ns.run('ipset', 'destroy', `KPTS-BULK-${r}`);
      await ns.run('ipset', 'destroy', `KPTS-ONE-${r}`);
      await ns.run('ipset', 'destroy', `KPTS-EXEC-${r}`);
    }
    return {
      entries: n,
      runs,
      bulkMs: median(bulk),
      oneByOneMs: median(one),
      restoreExecMs: median(exec),
      bulkMessages,
      samples: { bulk, oneByOne: one, restoreExec: exec },
    };
  } finally {
    await ns.destroy();
  }
}

export function formatIpsetBench(r: IpsetBenchResult): string {
  const row = (way: string, ms: number): string =>
    `| ${way} | ${ms.toFixed(1)} | ${((r.entries / ms) * 1000).toFixed(0)} |`;
  return [
    `ipset: ${r.entries} hash:ip,port entries with comments into a fresh set (median of ${r.runs})`,
    '',
    '| way | ms | entries/s |',
    '| --- | ---: | ---: |',
    row(`IpsetClient.addMany (${r.bulkMessages} messages)`, r.bulkMs),
    row('IpsetClient.add, one request each', r.oneByOneMs),
    row('exec `ipset restore` (process start included)', r.restoreExecMs),
  ].join('\n');
}

/**
 * `n` entries added by one `ipset add` process each (what issue 133773 describes upstream doing),
 * timed as a whole in a namespace of its own. Returns the total, ms.
 */
export async function benchIpsetAddExecPerEntry(n: number): Promise<number> {
  const ns = await Netns.create('bench-ipset-exec');
  try {
    await ns.run(
      'ipset',
      'create',
      'KPTS-PER-ENTRY',
      'hash:ip,port',
      'family',
      'inet',
      'maxelem',
      String(Math.max(65536, n * 2)),
      'comment',
    );
    const list = entries(n, true);
    const t0 = performance.now();
    for (const e of list) {
      const r = await ns.exec('ipset', [
        'add',
        'KPTS-PER-ENTRY',
        `${e.ip},${e.proto}:${e.port}`,
        'comment',
        e.comment ?? '',
      ]);
      if (r.code !== 0) throw new Error(`ipset add failed: ${r.stderr}`);
    }
    const ms = performance.now() - t0;
    const count = (await ns.run('ipset', 'list', '-t', 'KPTS-PER-ENTRY')).match(/Number of entries: (\d+)/)?.[1];
    if (Number(count) !== n) throw new Error(`ipset add per entry left ${count} entries, expected ${n}`);
    return ms;
  } finally {
    await ns.destroy();
  }
}

async function ipsetSections(opts: BenchOptions): Promise<Section[]> {
  const n = opts.quick ? 1_000 : 20_000;
  const runs = opts.quick ? 2 : 5;
  const perEntryN = opts.quick ? 50 : 500;
  opts.log(`ipset: ${formatCount(n)} entries, ${runs} runs of each way`);
  const r = await benchIpsetAdd(n, runs);
  opts.log(`ipset: ${perEntryN} entries by one \`ipset add\` process each`);
  const perEntryMs = await benchIpsetAddExecPerEntry(perEntryN);
  const exec = summarize(r.samples.restoreExec);
  const row = (way: string, samples: number[]): string[] => {
    const s = summarize(samples);
    return [
      way,
      formatCount(n),
      formatMs(s.median),
      formatSpread(s),
      formatCount((n / s.median) * 1000),
      samples === r.samples.restoreExec ? 'baseline' : formatRatio(exec.median, s.median),
      formatCount(s.runs),
    ];
  };
  return [
    {
      title: 'ipset (IPVS mode’s sets): filling a hash:ip,port set',
      description:
        `${formatCount(n)} hash:ip,port entries with comments (as kube-proxy’s sets carry) added to a fresh set in a throwaway network namespace, ` +
        'by our nfnetlink client in bulk (ADT lists, many entries per message), by the same client one request per entry, ' +
        'and by exec of `ipset restore` with the same entries, timed from outside with process start-up included (upstream IPVS mode’s way; through `ip netns exec`, whose own start-up counts against the exec side). ' +
        'The last row is the pattern upstream issue 133773 describes: one `ipset add` process per entry, on fewer entries.',
      columns: [
        { title: 'way' },
        { title: 'entries', align: 'right' },
        { title: 'median', align: 'right' },
        { title: 'spread', align: 'right' },
        { title: 'entries/s', align: 'right' },
        { title: 'vs exec `ipset restore`', align: 'right' },
        { title: 'runs', align: 'right' },
      ],
      rows: [
        row(`ours: IpsetClient.addMany (${r.bulkMessages} message${r.bulkMessages === 1 ? '' : 's'})`, r.samples.bulk),
        row('ours: IpsetClient.add, one request each', r.samples.oneByOne),
        row('exec: `ipset restore` (process start included)', r.samples.restoreExec),
        [
          `exec: one \`ipset add\` process per entry (${formatMs(perEntryMs / perEntryN)} each)`,
          formatCount(perEntryN),
          formatMs(perEntryMs),
          'one run',
          formatCount((perEntryN / perEntryMs) * 1000),
          '—',
          '1',
        ],
      ],
      notes: ['“vs exec” is how many times faster than `ipset restore` of the same entries (below 1×: slower).'],
    },
  ];
}

export const bench: Bench = { needsRoot: true, run: ipsetSections };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const n = Number(process.argv[2] ?? 20_000);
  const runs = Number(process.argv[3] ?? 3);
  console.log(formatIpsetBench(await benchIpsetAdd(n, runs)));
}
