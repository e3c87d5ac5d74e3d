// Where the daemon's memory goes (issue 17): runs the real daemon as the e2e module does, at
// N Services × 10 endpoints, takes a heap snapshot after the first sync (--heapsnapshot-signal)
// and prints the heap by node type and by constructor (self sizes, as DevTools' summary), with
// the process's RSS and V8's own heap statistics beside it.
//
//   node test/bench/heap-summary.ts [N]        (root: namespaces)

import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster } from '../helpers/cluster.ts';
import { makeCluster } from '../helpers/cluster.ts';
import { clusterIP } from './e2e-agent.ts';
import { spawnMeasured } from './e2e.ts';

const AGENT = new URL('./e2e-agent.ts', import.meta.url).href;

export interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export interface HeapBreakdown {
  /** Sum of every node's self size, bytes. */
  total: number;
  /** Node type (string, object, array, code, …) → bytes, largest first. */
  byType: [string, number][];
  /** Constructor (objects, closures) or node type → bytes and count, largest first. */
  byName: [string, { size: number; count: number }][];
}

/** Self sizes by node type and by constructor name (as DevTools' summary view). */
export function heapBreakdown(s: Snapshot): HeapBreakdown {
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const nf = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const byType = new Map<string, number>();
  const byName = new Map<string, { size: number; count: number }>();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += nf) {
    const type = types[s.nodes[i + iType]!]!;
    const size = s.nodes[i + iSize]!;
    total += size;
    byType.set(type, (byType.get(type) ?? 0) + size);
    const name = type === 'object' || type === 'closure' ? `${type}:${s.strings[s.nodes[i + iName]!]}` : type;
    const e = byName.get(name) ?? { size: 0, count: 0 };
    e.size += size;
    e.count++;
    byName.set(name, e);
  }
  return {
    total,
    byType: [...byType].sort((a, b) => b[1] - a[1]),
    byName: [...byName].sort((a, b) => b[1].size - a[1].size),
  };
}

export function summarize(s: Snapshot, top = 25): string {
  const h = heapBreakdown(s);
  const mb = (x: number): string => (x / 2 ** 20).toFixed(1).padStart(7);
  const lines = [`heap (self sizes): ${mb(h.total)} MiB`, 'by type:'];
  for (const [t, size] of h.byType) lines.push(`  ${mb(size)} MiB  ${t}`);
  lines.push('by constructor:');
  for (const [n, e] of h.byName.slice(0, top))
    lines.push(`  ${mb(e.size)} MiB  ${String(e.count).padStart(8)}  ${n.slice(0, 80)}`);
  return lines.join('\n');
}

/** The largest strings, with their first characters: what the string part of a heap is. */
export function topStrings(s: Snapshot, top: number): string {
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const nf = fields.length;
  const [iType, iName, iSize] = [fields.indexOf('type'), fields.indexOf('name'), fields.indexOf('self_size')];
  const found: [number, string][] = [];
  for (let i = 0; i < s.nodes.length; i += nf) {
    if (types[s.nodes[i + iType]!] === 'string')
      found.push([s.nodes[i + iSize]!, s.strings[s.nodes[i + iName]!] ?? '']);
  }
  found.sort((a, b) => b[0] - a[0]);
  return found
    .slice(0, top)
    .map(([size, text]) => `${String(size).padStart(9)}  ${JSON.stringify(text.slice(0, 100))}`)
    .join('\n');
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

/** Asks the daemon for a heap snapshot (it runs with --heapsnapshot-signal=SIGUSR2) and reads it. */
export async function takeSnapshot(signal: () => void, dir: string): Promise<Snapshot> {
  signal();
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot'));
    if (!file) continue;
    try {
      return JSON.parse(await readFile(join(dir, file), 'utf8')) as Snapshot; // complete once it parses
    } catch {
      continue;
    }
  }
  throw new Error('no heap snapshot written within 600 s');
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
      const snap = await takeSnapshot(() => d.signal('SIGUSR2'), dir);
      console.log(summarize(snap));
      if (process.env['TOP_STRINGS']) console.log(topStrings(snap, Number(process.env['TOP_STRINGS'])));
    } finally {
      await d.kill();
    }
  } finally {
    await destroy?.();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();
