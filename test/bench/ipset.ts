// ipset benchmark: adding N hash:ip,port entries (with comments, as kube-proxy's sets carry)
// to a fresh set, three ways, in one throwaway network namespace:
//   - ours, bulk:        IpsetClient.addMany (ADT lists, ~1,500 entries per message)
//   - ours, one by one:  IpsetClient.add per entry (one request and ACK each)
//   - exec:              `ipset restore` of the same entries, timed from outside, process
//                        start-up included (what upstream kube-proxy does)
// Each way runs `runs` times on a new set; medians are reported. Figures are wall-clock on
// whatever machine runs this: compare them side by side, not across machines.
//
// Needs root (it creates a namespace). Run alone: node test/bench/ipset.ts [entries] [runs]

import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Netns } from '../helpers/netns.ts';
import { entries } from '../kernel/scenarios/ipset.ts';

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
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

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
    return { entries: n, runs, bulkMs: median(bulk), oneByOneMs: median(one), restoreExecMs: median(exec), bulkMessages };
  } finally {
    await ns.destroy();
  }
}

export function formatIpsetBench(r: IpsetBenchResult): string {
  const row = (way: string, ms: number): string => `| ${way} | ${ms.toFixed(1)} | ${((r.entries / ms) * 1000).toFixed(0)} |`;
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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const n = Number(process.argv[2] ?? 20_000);
  const runs = Number(process.argv[3] ?? 3);
  console.log(formatIpsetBench(await benchIpsetAdd(n, runs)));
}
