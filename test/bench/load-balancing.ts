// Load-balancing benchmark (docs/load-balancing.md), nftables mode, in throwaway network
// namespaces only. Side by side in one run:
//   - N Services × 10 endpoints (N = 1,000 and 10,000; --quick: 200 and 1,000) with 0 %, 10 %
//     and 100 % of them asking for consistent-hash: a full sync from empty, then one endpoint
//     added to one Service (median of a few), and the kernel's slab growth over the sync
//     (machine-wide; one element per bucket: 1,601 per consistent-hash Service);
//   - first-packet latency (connect to SYN-ACK, from a client namespace) to three Services of
//     3 endpoints each: random (the pickers), round-robin and consistent-hash.
// Root. `npm run bench -- load-balancing` (--quick: smaller sizes, fewer connections).

import { readFileSync } from 'node:fs';
import { makeCluster, podIP } from '../helpers/cluster.ts';
import { Netns } from '../helpers/netns.ts';
import type { ChangeResult, FullSyncResult } from './nftables-workload.ts';
import type { Bench, BenchOptions, Section } from './section.ts';

const AGENT = new URL('./nftables-agent.ts', import.meta.url).href;
const SCENARIO = new URL('../kernel/scenarios/nft-proxier.ts', import.meta.url).href;
const sizes = (quick: boolean): number[] => (quick ? [200, 1_000] : [1_000, 10_000]);
const SHARES = [
  { label: '0 %', every: 0 },
  { label: '10 %', every: 10 },
  { label: '100 %', every: 1 },
];
const CHANGES = 3;
const connects = (quick: boolean): number => (quick ? 30 : 200);

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

async function latencyRows(quick: boolean): Promise<string[][]> {
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
    const samples = await c.clientAgent.call<number[][]>(AGENT, 'connectLatency', targets, connects(quick));
    return kinds.map(([name], i) => [name, `${median(samples[i]!).toFixed(0)} µs`, String(samples[i]!.length)]);
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

export const bench: Bench = {
  needsRoot: true,
  async run({ quick, log }: BenchOptions): Promise<Section[]> {
    const rows: string[][] = [];
    for (const n of sizes(quick))
      for (const sh of SHARES) {
        log(`load-balancing: ${n} Services, ${sh.label} consistent-hash`);
        rows.push(await syncRow(n, sh.every));
      }
    const latency = await latencyRows(quick);
    return [
      {
        title: 'Per-Service load balancing (nftables mode): cost of consistent-hash tables',
        description:
          'The nftables proxier in a throwaway namespace, N Services × 10 endpoints with 0 %, 10 % or 100 % of them annotated `kube-proxy-ts.io/load-balancing: consistent-hash` (a Maglev table of 1,601 buckets per Service port): a full sync from empty, then one endpoint added to one Service (median of 3). Kernel slab growth over the sync is machine-wide (/proc/meminfo Slab), so other work on the machine shows in it.',
        columns: [
          { title: 'Services' },
          { title: 'consistent-hash' },
          { title: 'full sync', align: 'right' },
          { title: 'plan / kernel', align: 'right' },
          { title: 'one endpoint change (median)', align: 'right' },
          { title: 'kernel slab growth', align: 'right' },
        ],
        rows,
      },
      {
        title: 'Per-Service load balancing (nftables mode): first-packet latency per algorithm',
        description: `TCP connect to SYN-ACK from a client namespace to three Services of 3 endpoints each (median of ${connects(quick)}): random (the shared pickers, upstream), round-robin (numgen inc) and consistent-hash (jhash into the Maglev table).`,
        columns: [
          { title: 'Service (3 endpoints)' },
          { title: 'first-packet latency (median)', align: 'right' },
          { title: 'samples', align: 'right' },
        ],
        rows: latency,
      },
    ];
  },
};
