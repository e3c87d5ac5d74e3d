// Where the iptables mode's memory goes (issue 14): the iptables benchmark's agent (the model,
// the IptablesProxier and the bench's inputs, with the daemon's V8 flags) at N Services × 10
// endpoints after a cold full sync, a resync and one-endpoint changes: RSS and the heap after
// a full GC, then the heap again with each part let go in turn (what it retains), RSS by
// mapping, and a heap snapshot's breakdown by constructor.
//
//   node test/bench/iptables-heap.ts [N] [changes]     (root: namespaces)

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { Netns } from '../helpers/netns.ts';
import { readHeapSnapshot } from './heap-snapshot-reader.ts';
import { smapsSummary, summarize } from './heap-summary.ts';
import type { SyncTiming } from './iptables-agent.ts';

const AGENT = new URL('./iptables-agent.ts', import.meta.url).href;
type Mem = { rss: number; heapUsed: number; heapTotal: number; external: number };
const mib = (x: number): string => (x / 2 ** 20).toFixed(1);
const line = (what: string, m: Mem): string =>
  `${what}: RSS ${mib(m.rss)} MiB, heap used ${mib(m.heapUsed)} / total ${mib(m.heapTotal)} MiB, external ${mib(m.external)} MiB`;

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 10_000);
  const changes = Number(process.argv[3] ?? 5);
  const dir = await mkdtemp(join(tmpdir(), 'kpts-iptheap-'));
  const ns = await Netns.create('iptheap');
  try {
    const a = await ns.agent([...DAEMON_V8_OPTIONS]);
    const mem = (): Promise<Mem> => a.call<Mem>(AGENT, 'heapAfterGc');
    console.log(line('agent idle', await mem()));
    await a.call(AGENT, 'start', n);
    console.log(line(`inputs made (${n} Services)`, await mem()));
    const cold = await a.call<SyncTiming>(AGENT, 'fullSync');
    const peak = await a.call<{ rssBytes: number; maxRssBytes: number }>(AGENT, 'memory');
    console.log(
      `cold full sync ${cold.totalMs.toFixed(0)} ms; RSS before GC ${mib(peak.rssBytes)} MiB, peak ${mib(peak.maxRssBytes)} MiB`,
    );
    console.log(line('after the full sync', await mem()));
    await a.call(AGENT, 'resync');
    const ch: number[] = [];
    for (let r = 0; r < changes; r++) ch.push((await a.call<SyncTiming>(AGENT, 'change', r)).totalMs);
    console.log(`changes: ${ch.map((x) => x.toFixed(1)).join(' ')} ms`);
    const steady = await a.call<{ rssBytes: number; maxRssBytes: number }>(AGENT, 'memory');
    console.log(`steady before GC: RSS ${mib(steady.rssBytes)} MiB, peak ${mib(steady.maxRssBytes)} MiB`);
    const base = await mem();
    console.log(line('steady (resync + changes), after GC', base));
    console.log(smapsSummary(await a.call<string>(AGENT, 'smaps')));
    const file = await a.call<string>(AGENT, 'writeSnapshot', dir);
    let prev = base;
    for (const part of ['proxier', 'tracker', 'inputs'] as const) {
      await a.call(AGENT, 'drop', part);
      const m = await mem();
      const ext = mib(prev.external - m.external);
      console.log(`${part} retains ${mib(prev.heapUsed - m.heapUsed)} MiB of heap (${ext} MiB external)`);
      prev = m;
    }
    console.log(line('everything dropped', prev));
    a.kill();
    // TOP_STRINGS=n also lists the n largest strings.
    console.log(summarize(await readHeapSnapshot(file, Number(process.env['TOP_STRINGS'] ?? 0)), 40));
  } finally {
    await ns.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();
