// Model benchmark: build N Services x 10 endpoints from scratch, then change one endpoint and
// check out, many times. The single-change figure must not grow with N (the model keeps its
// state incrementally), so it is measured at two cluster sizes side by side.
//
// Run alone: node test/bench/model.ts

import { performance } from 'node:perf_hooks';
import { FakeClock } from '../../src/base/clock.ts';
import { nullLogger } from '../../src/base/logger.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import { ChangeTracker } from '../../src/model/tracker.ts';

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
  /** Of which the first checkout. */
  firstCheckoutMs: number;
  /** One endpoint changed: the slice event plus the checkout. */
  oneEndpointChange: Spread;
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
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  const round = (v: number) => Math.round(v * 1000) / 1000;
  return { runs: s.length, medianMs: round(at(0.5)), p10Ms: round(at(0.1)), p90Ms: round(at(0.9)), minMs: round(s[0]!), maxMs: round(s[s.length - 1]!) };
}

export async function benchModelAt(services: number, runs = 200): Promise<ModelBenchResult> {
  const tracker = new ChangeTracker({ nodeName: 'node-0', family: 'IPv4' }, { logger: nullLogger, clock: new FakeClock() });
  const start = performance.now();
  for (let i = 0; i < services; i++) {
    tracker.onService(undefined, service(i));
    tracker.onEndpointSlice(endpointSlice(i, 0), false);
  }
  const beforeCheckout = performance.now();
  const first = tracker.checkout();
  const end = performance.now();
  if (first.desired.services.size !== services) throw new Error(`expected ${services} service ports, got ${first.desired.services.size}`);

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
    firstCheckoutMs: Math.round(end - beforeCheckout),
    oneEndpointChange: spread(samples),
    changedPortsPerSingleChange: changed,
  };
}

/** 10,000 Services x 10 endpoints (and 1,000 for comparison: the single change must not grow). */
export async function benchModel(): Promise<{ small: ModelBenchResult; large: ModelBenchResult }> {
  const small = await benchModelAt(1_000);
  const large = await benchModelAt(10_000);
  return { small, large };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await benchModel(), null, 2));
}
