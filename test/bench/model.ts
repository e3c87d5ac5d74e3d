// Model benchmark: build N Services x 10 endpoints from scratch, then change one endpoint and
// check out, many times. The single-change figure must not grow with N (the model keeps its
// state incrementally), so it is measured at two cluster sizes side by side. Pure code: there
// is no exec counterpart to stand beside it.
//
// Run alone: node test/bench/model.ts        In the suite: npm run bench -- model

import { performance } from 'node:perf_hooks';
import { FakeClock } from '../../src/base/clock.ts';
import { nullLogger } from '../../src/base/logger.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import { ChangeTracker } from '../../src/model/tracker.ts';
import type { Bench, BenchOptions, Section, Target } from './section.ts';
import { formatCount, formatMs, formatSpread, summarize } from './stats.ts';

export interface Spread {
  runs: number;
  medianMs: number;
  p10Ms: number;
  p90Ms: number;
  minMs: number;
  maxMs: number;
}

export interface ModelBenchResult {
  services: number;
  endpointsPerService: number;
  /** Feeding every Service and EndpointSlice and the first checkout. */
  fromScratchMs: number;
  /** CPU time (user + system) of the process over the same span: steadier than wall time on a shared machine. */
  fromScratchCpuMs: number;
  /** Of which the first checkout. */
  firstCheckoutMs: number;
  /** One endpoint changed: the slice event plus the checkout. */
  oneEndpointChange: Spread;
  /** The raw single-change samples, ms, in run order. */
  oneEndpointChangeSamples: number[];
  /** Service ports the single change reported (must be 1). */
  changedPortsPerSingleChange: number;
}

const ENDPOINTS = 10;

function service(i: number): Service {
  return {
    metadata: { namespace: `ns${i % 100}`, name: `svc${i}`, resourceVersion: '1' },
    spec: {
      type: 'ClusterIP',
      clusterIP: `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }],
    },
  };
}

function endpointSlice(i: number, variant: number): EndpointSlice {
  return {
    metadata: {
      namespace: `ns${i % 100}`,
      name: `svc${i}-abcde`,
      labels: { 'kubernetes.io/service-name': `svc${i}` },
      resourceVersion: String(variant + 1),
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: Array.from({ length: ENDPOINTS }, (_, e) => ({
      // variant moves the last endpoint to another address: one endpoint replaced per change.
      addresses: [e === ENDPOINTS - 1 ? `172.17.${i & 255}.${variant % 250}` : `172.16.${i & 255}.${e}`],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${e}`,
      zone: `zone-${e % 3}`,
    })),
  };
}

function spread(samples: number[]): Spread {
  const s = summarize(samples);
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return {
    runs: s.runs,
    medianMs: round(s.median),
    p10Ms: round(s.p10),
    p90Ms: round(s.p90),
    minMs: round(s.min),
    maxMs: round(s.max),
  };
}

export async function benchModelAt(services: number, runs = 200): Promise<ModelBenchResult> {
  const tracker = new ChangeTracker(
    { nodeName: 'node-0', family: 'IPv4' },
    { logger: nullLogger, clock: new FakeClock() },
  );
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < services; i++) {
    tracker.onService(undefined, service(i));
    tracker.onEndpointSlice(endpointSlice(i, 0), false);
  }
  const beforeCheckout = performance.now();
  const first = tracker.checkout();
  const end = performance.now();
  const cpu = process.cpuUsage(cpu0);
  if (first.desired.services.size !== services)
    throw new Error(`expected ${services} service ports, got ${first.desired.services.size}`);

  const samples: number[] = [];
  let changed = 0;
  for (let r = 0; r < runs; r++) {
    const i = (r * 7919) % services;
    const slice = endpointSlice(i, r + 1);
    const t0 = performance.now();
    tracker.onEndpointSlice(slice, false);
    const { change } = tracker.checkout();
    samples.push(performance.now() - t0);
    changed = Math.max(changed, change.services.size);
    // Yield now and then so a long run does not starve the event loop of a caller.
    if (r % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
  }
  return {
    services,
    endpointsPerService: ENDPOINTS,
    fromScratchMs: Math.round(end - start),
    fromScratchCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    firstCheckoutMs: Math.round(end - beforeCheckout),
    oneEndpointChange: spread(samples),
    oneEndpointChangeSamples: samples,
    changedPortsPerSingleChange: changed,
  };
}

/** 10,000 Services x 10 endpoints (and 1,000 for comparison: the single change must not grow). */
export async function benchModel(): Promise<{ small: ModelBenchResult; large: ModelBenchResult }> {
  const small = await benchModelAt(1_000);
  const large = await benchModelAt(10_000);
  return { small, large };
}

/**
 * The suite's model section: each size built from scratch `repeats` times (a fresh tracker each
 * time), and `runs` single-endpoint changes after each build, all samples pooled.
 */
async function modelSections(opts: BenchOptions): Promise<Section[]> {
  const sizes = opts.quick ? [200, 1_000] : [1_000, 10_000];
  const repeats = opts.quick ? 2 : 5;
  const runs = opts.quick ? 20 : 200;
  const rows: string[][] = [];
  const changeMedians = new Map<number, number>();
  const scratchCpuMedians = new Map<number, number>();
  let maxChangedPorts = 0;
  for (const n of sizes) {
    const scratch: number[] = [];
    const scratchCpu: number[] = [];
    const change: number[] = [];
    for (let r = 0; r < repeats; r++) {
      opts.log(`model: ${formatCount(n)} Services, build ${r + 1}/${repeats}`);
      const res = await benchModelAt(n, runs);
      scratch.push(res.fromScratchMs);
      scratchCpu.push(res.fromScratchCpuMs);
      change.push(...res.oneEndpointChangeSamples);
      maxChangedPorts = Math.max(maxChangedPorts, res.changedPortsPerSingleChange);
    }
    const size = `${formatCount(n)} × ${ENDPOINTS}`;
    const s = summarize(scratch);
    const c = summarize(change);
    changeMedians.set(n, c.median);
    scratchCpuMedians.set(n, summarize(scratchCpu).median);
    rows.push([
      size,
      'from scratch: every Service and slice fed, first checkout',
      formatMs(s.median),
      formatSpread(s),
      formatMs(summarize(scratchCpu).median),
      formatCount(s.runs),
    ]);
    rows.push([
      size,
      'one endpoint replaced: slice event + checkout',
      formatMs(c.median),
      formatSpread(c),
      '—',
      formatCount(c.runs),
    ]);
  }
  const [small, large] = [sizes[0]!, sizes[sizes.length - 1]!];
  const ratio = changeMedians.get(large)! / changeMedians.get(small)!;
  const flat = ratio <= 1.5 && maxChangedPorts === 1;
  const targets: Target[] = [
    {
      what: `#3 model, one endpoint changed, ${formatCount(large)} vs ${formatCount(small)} Services`,
      target: 'cost of the change, not of the cluster (read as: within 1.5×, one service port reported)',
      status: flat ? 'met' : 'missed',
      detail: `${formatMs(changeMedians.get(large)!)} vs ${formatMs(changeMedians.get(small)!)} (${ratio.toFixed(2)}×), ${maxChangedPorts} service port(s) per change`,
    },
    {
      what: `#3 model from scratch, ${formatCount(large)} × ${ENDPOINTS}`,
      target: 'measured (no threshold set)',
      status: 'measured',
      detail: `${rows[rows.length - 2]![2]!} wall, ${formatMs(scratchCpuMedians.get(large)!)} CPU`,
    },
  ];
  return [
    {
      title: 'Model (issue 3): desired state from Services and EndpointSlices',
      description:
        `\`ChangeTracker\` (src/model) fed N ClusterIP Services with one EndpointSlice of ${ENDPOINTS} ready endpoints each, then checked out; ` +
        `then ${runs} times one endpoint of one Service is replaced and the tracker checked out again. ` +
        `Each size is built ${repeats} times from a fresh tracker; the single-change samples of all builds are pooled. ` +
        'Pure computation in the runner process: there is no exec counterpart to stand beside it.',
      columns: [
        { title: 'Services × endpoints' },
        { title: 'step' },
        { title: 'median (wall)', align: 'right' },
        { title: 'spread (wall)', align: 'right' },
        { title: 'median CPU', align: 'right' },
        { title: 'runs', align: 'right' },
      ],
      rows,
      notes: [
        `Single-change median at ${formatCount(large)} Services ÷ at ${formatCount(small)}: ${ratio.toFixed(2)}× (near 1×: the cost does not grow with the cluster); every change reported ${maxChangedPorts} changed service port(s).`,
        'The first build of each size runs on code that is not yet optimised; it is kept in the spread, as a daemon’s cold start would see it.',
        ...(large === 10_000
          ? [
              `Against issue 4’s budget for a full sync of 10,000 × 10 (< 1 s, model and kernel together): the model alone took ${rows[rows.length - 2]![2]} wall, ${formatMs(scratchCpuMedians.get(large)!)} CPU, in this run.`,
            ]
          : []),
      ],
      targets,
    },
  ];
}

export const bench: Bench = { needsRoot: false, run: modelSections };

if (import.meta.url === `file://${process.argv[1]}`) {
  // The raw samples are for the suite's spread; the summary above them is what a reader wants here.
  console.log(
    JSON.stringify(await benchModel(), (k, v: unknown) => (k === 'oneEndpointChangeSamples' ? undefined : v), 2),
  );
}
