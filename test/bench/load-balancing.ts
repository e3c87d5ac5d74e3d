// Load-balancing benchmark (docs/load-balancing.md), nftables mode, in throwaway network
// namespaces only. Side by side in one run:
//   - N Services × 10 endpoints (N = 1,000 and 10,000; --quick: 200 and 1,000) with 0 %, 10 %
//     and 100 % of them asking for consistent-hash: a full sync from empty, then one endpoint
//     added to one Service (median of a few), and the kernel's slab growth over the sync
//     (machine-wide; one element per bucket: 1,601 per consistent-hash Service);
//   - first-packet latency (connect to SYN-ACK, from a client namespace) to three Services of
//     3 endpoints each: random (the pickers), round-robin and consistent-hash.
// Root. Alone: node test/bench/load-balancing.ts [--quick]; prints Markdown.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { makeCluster, podIP } from '../helpers/cluster.ts';
import { Netns } from '../helpers/netns.ts';
import type { ChangeResult, FullSyncResult } from './nftables-workload.ts';

const AGENT = new URL('./nftables-agent.ts', import.meta.url).href;
const SCENARIO = new URL('../kernel/scenarios/nft-proxier.ts', import.meta.url).href;
const quick = process.argv.includes('--quick');
const SIZES = quick ? [200, 1_000] : [1_000, 10_000];
const SHARES = [
  { label: '0 %', every: 0 },
  { label: '10 %', every: 10 },
  { label: '100 %', every: 1 },
];
const CHANGES = 3;
const CONNECTS = quick ? 30 : 200;

/**
 * The kernel's slab memory (/proc/meminfo Slab): machine-wide, so other work on the machine
 * shows in it too; `nft list table` of 1.6 M elements takes longer than any bound we set.
 */
function slabBytes(): number {
  const m = /^Slab:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const ms = (x: number): string => `${x.toFixed(0)} ms`;

async function syncRow(n: number, every: number): Promise<string[]> {
  const ns = await Netns.create(`lbb-${n}-${every}`);
  try {
    const a = await ns.agent(['--max-old-space-size=4096']);
    await a.call(AGENT, 'start', n, false, { value: 'consistent-hash', every });
    const slabBefore = slabBytes();
    const full = await a.call<FullSyncResult>(AGENT, 'fullSync');
    const changes: ChangeResult[] = [];
    for (let r = 0; r < CHANGES; r++) changes.push(await a.call<ChangeResult>(AGENT, 'change', r));
    const slabAfter = slabBytes();
    await a.call(AGENT, 'stop');
    return [
      `${n.toLocaleString('en')} × 10`,
      SHARES.find((s) => s.every === every)!.label,
      ms(full.totalMs),
      `${ms(full.planMs)} / ${ms(full.kernelMs)}`,
      ms(median(changes.map((c) => c.totalMs))),
      `${((slabAfter - slabBefore) / 2 ** 20).toFixed(0)} MiB`,
    ];
  } finally {
    await ns.destroy();
  }
}

async function latencyRows(): Promise<string[][]> {
  const teardowns: (() => Promise<void>)[] = [];
  const c = await makeCluster({ teardown: (fn) => void teardowns.push(fn) }, 'lbb-lat', 3);
  try {
    await c.nodeAgent.call(SCENARIO, 'start', { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] });
    const kinds = [
      ['random', undefined, '10.96.0.40'],
      ['round-robin', 'round-robin', '10.96.0.41'],
      ['consistent-hash', 'consistent-hash', '10.96.0.42'],
    ] as const;
    const services = kinds.map(([name, how, ip]) => ({
      metadata: {
        namespace: 'default',
        name,
        ...(how ? { annotations: { 'kube-proxy-ts.io/load-balancing': how } } : {}),
      },
      spec: { type: 'ClusterIP', clusterIP: ip, ports: [{ name: 'p', protocol: 'TCP', port: 80, targetPort: 8080 }] },
    }));
    const slices = kinds.map(([name]) => ({
      metadata: { namespace: 'default', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: [0, 1, 2].map((i) => ({ addresses: [podIP(i)], conditions: { ready: true } })),
      ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
    }));
    await c.nodeAgent.call(SCENARIO, 'apply', { services, slices });
    const targets = kinds.map(([, , ip]) => ({ host: ip, port: 80 }));
    const samples = await c.clientAgent.call<number[][]>(AGENT, 'connectLatency', targets, CONNECTS);
    return kinds.map(([name], i) => [name, `${median(samples[i]!).toFixed(0)} µs`, String(samples[i]!.length)]);
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const rows: string[][] = [];
  for (const n of SIZES) for (const s of SHARES) rows.push(await syncRow(n, s.every));
  console.log(
    '| Services | consistent-hash | full sync | plan / kernel | one endpoint change (median) | kernel slab growth (machine-wide) |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  console.log('\n| Service (3 endpoints) | first-packet latency (median) | samples |');
  console.log('|---|---|---|');
  for (const r of await latencyRows()) console.log(`| ${r.join(' | ')} |`);
  console.log(`\n(${((performance.now() - t0) / 1000).toFixed(0)} s)`);
}

await main();
