// Where the daemon's memory goes (issue 17): runs the real daemon as the e2e module does, at
// N Services × 10 endpoints, takes a heap snapshot after the first sync (--heapsnapshot-signal)
// and prints the heap by node type and by constructor (self sizes, as DevTools' summary), with
// the process's RSS by mapping beside it (TOP_STRINGS=k also prints the k largest strings).
//
//   node test/bench/heap-summary.ts [N]        (root: namespaces)

import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster } from '../helpers/cluster.ts';
import { makeCluster } from '../helpers/cluster.ts';
import { clusterIP } from './e2e-agent.ts';
import type { HeapBreakdown } from './heap-snapshot-reader.ts';
import { readHeapSnapshot } from './heap-snapshot-reader.ts';
import { spawnMeasured } from './e2e.ts';

const AGENT = new URL('./e2e-agent.ts', import.meta.url).href;

export function summarize(h: HeapBreakdown, top = 25): string {
  const mb = (x: number): string => (x / 2 ** 20).toFixed(1).padStart(7);
  const lines = [`heap (self sizes): ${mb(h.total)} MiB`, 'by type:'];
  for (const [t, size] of h.byType) lines.push(`  ${mb(size)} MiB  ${t}`);
  lines.push('by constructor:');
  for (const [n, e] of h.byName.slice(0, top))
    lines.push(`  ${mb(e.size)} MiB  ${String(e.count).padStart(8)}  ${n.slice(0, 80)}`);
  if (h.topStrings.length > 0) lines.push('largest strings:');
  for (const [size, text] of h.topStrings) lines.push(`${String(size).padStart(9)}  ${JSON.stringify(text)}`);
  return lines.join('\n');
}

/** RSS by mapping (file path, or [anon], [heap], [stack]), kB, largest first. */
export function smapsByMapping(smaps: string): [string, number][] {
  const by = new Map<string, number>();
  let name = '';
  for (const line of smaps.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) name = head[1] || '[anon]';
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) by.set(name, (by.get(name) ?? 0) + Number(rss[1]));
  }
  return [...by].sort((a, b) => b[1] - a[1]);
}

export function smapsSummary(smaps: string, top = 8): string {
  const rows = smapsByMapping(smaps).slice(0, top);
  return ['RSS by mapping:', ...rows.map(([n, kb]) => `  ${(kb / 1024).toFixed(1).padStart(7)} MiB  ${n}`)].join('\n');
}

/**
 * Asks the daemon for a heap snapshot (it runs with --heapsnapshot-signal=SIGUSR2), waits until
 * the file stops growing, and reads it as a stream (`top`: how many of the largest strings to keep).
 */
export async function takeSnapshot(signal: () => void, dir: string, top = 0): Promise<HeapBreakdown> {
  signal();
  let lastSize = -1;
  for (let i = 0; i < 900; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot'));
    if (!file) continue;
    const { size } = await stat(join(dir, file));
    if (size === 0 || size !== lastSize) {
      lastSize = size;
      continue;
    }
    try {
      return await readHeapSnapshot(join(dir, file), top); // complete once it reads to its end
    } catch {
      lastSize = -1;
    }
  }
  throw new Error('no complete heap snapshot written within 900 s');
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 10_000);
  const dir = await mkdtemp(join(tmpdir(), 'kpts-heap-'));
  let destroy: (() => Promise<void>) | undefined;
  const c: Cluster = await makeCluster({ teardown: (fn) => void (destroy = fn) }, 'heap', 1);
  try {
    const pods = [Array.from({ length: 10 }, () => '10.244.1.2')];
    const { url } = await c.nodeAgent.call<{ url: string }>(AGENT, 'startApi', n, 10, pods);
    const d = spawnMeasured(c, url, ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`]);
    try {
      const last = await c.clientAgent.call<number | undefined>(
        AGENT,
        'firstAnswer',
        clusterIP(Math.max(0, n - 1)),
        80,
        'pod1',
        120_000,
      );
      if (last === undefined) throw new Error(`not programmed:\n${d.log().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 3000));
      const status = await readFile(`/proc/${d.pid}/status`, 'utf8');
      console.log(`N=${n}: ${/VmRSS.*/.exec(status)?.[0]}; ${/VmHWM.*/.exec(status)?.[0]}`);
      console.log(smapsSummary(await readFile(`/proc/${d.pid}/smaps`, 'utf8')));
      const top = Number(process.env['TOP_STRINGS'] ?? 0);
      console.log(summarize(await takeSnapshot(() => d.signal('SIGUSR2'), dir, top)));
    } finally {
      await d.kill();
    }
  } finally {
    await destroy?.();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();
