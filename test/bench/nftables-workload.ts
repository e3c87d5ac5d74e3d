// The nftables benchmark's workload, shared by the node-namespace agent (real kernel) and the
// runner process (FakeNft, to render the same transactions as `nft -f` text):
//   N ClusterIP Services (TCP port 80 → 8080), one EndpointSlice of 10 ready endpoints each,
//   every endpoint address distinct (100.64.0.0/10, the cluster CIDR), and one-endpoint
//   changes that add an address to one Service's slice.
// A Harness owns one ChangeTracker and one NftablesProxier over whatever NftInterface it is
// given; run() calls on that interface are timed one by one (one run() = one nfnetlink batch).

import { performance } from 'node:perf_hooks';
import { FakeClock } from '../../src/base/clock.ts';
import { nullLogger } from '../../src/base/logger.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import { ChangeTracker } from '../../src/model/index.ts';
import type { NftInterface, NftTransaction } from '../../src/netlink/nftables/index.ts';
import { NftablesProxier } from '../../src/proxier/nftables/index.ts';
import { problemText } from '../../src/proxier/types.ts';

export const ENDPOINTS = 10;
export const SERVICE_PORT = 80;
export const TARGET_PORT = 8080;
export const CLUSTER_CIDR = '100.64.0.0/10';
export const SERVICE_CIDR = '10.96.0.0/12';
export const NODE_NAME = 'bench-node';

const ipv4 = (base: number, offset: number): string => {
  const v = (base + offset) >>> 0;
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
};
const CLUSTER_BASE = (100 << 24) | (64 << 16); // 100.64.0.0
const SERVICE_BASE = (10 << 24) | (96 << 16); // 10.96.0.0
/** Addresses added by one-endpoint changes: far above the initial endpoints (≤ 1,000,000). */
const EXTRA_BASE = 3_000_000;

/** The cluster IP of Service i (0-based): 10.96.0.1, 10.96.0.2, … */
export const clusterIP = (i: number): string => ipv4(SERVICE_BASE, i + 1);
/** Endpoint e of Service i: 100.64.0.1 … (distinct across the whole cluster). */
export const endpointIP = (i: number, e: number): string => ipv4(CLUSTER_BASE, i * ENDPOINTS + e + 1);
/** The address the r-th one-endpoint change adds. */
export const extraIP = (r: number): string => ipv4(CLUSTER_BASE, EXTRA_BASE + r);
export const namespaceOf = (i: number): string => `ns${i % 100}`;
export const nameOf = (i: number): string => `svc${i}`;

export function service(i: number): Service {
  return {
    metadata: { namespace: namespaceOf(i), name: nameOf(i), resourceVersion: '1' },
    spec: {
      type: 'ClusterIP',
      clusterIP: clusterIP(i),
      ports: [{ name: 'http', protocol: 'TCP', port: SERVICE_PORT, targetPort: TARGET_PORT }],
    },
  };
}

export function endpointSlice(i: number, extra: readonly string[], rv: number): EndpointSlice {
  const addrs = [...Array.from({ length: ENDPOINTS }, (_, e) => endpointIP(i, e)), ...extra];
  return {
    metadata: {
      namespace: namespaceOf(i),
      name: `${nameOf(i)}-abcde`,
      labels: { 'kubernetes.io/service-name': nameOf(i) },
      resourceVersion: String(rv),
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: TARGET_PORT }],
    endpoints: addrs.map((a, e) => ({
      addresses: [a],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${e % 5}`,
    })),
  };
}

/** Which Service the r-th change touches: spread over the cluster, never the first or last (the latency probes). */
export const changedService = (r: number, n: number): number => 1 + ((r * 7919) % Math.max(1, n - 2));

export interface Batch {
  /** The whole run(): encoding the messages, then the batch round trip. */
  ms: number;
  messages: number;
  bytes: number;
  /** Of which the batch round trip alone (send to the last ACK: the kernel's processing and commit), when measured. */
  kernelOnlyMs?: number;
}

export interface FullSyncResult {
  services: number;
  servicePorts: number;
  /** Feeding every Service and slice to the tracker, and the checkout. */
  modelMs: number;
  /** From the proxier's SyncReport. */
  planMs: number;
  kernelMs: number;
  /** Model + proxier.sync, wall. */
  totalMs: number;
  /** Each run() on the NftInterface (one nfnetlink batch each), in order. */
  batches: Batch[];
}

export interface ChangeResult {
  modelMs: number;
  planMs: number;
  kernelMs: number;
  totalMs: number;
  batches: Batch[];
  servicesChanged: number;
}

/**
 * Wraps an NftInterface (NftClient or FakeNft) so each run() is timed and, if asked, its
 * transaction kept. A Proxy rather than a class, so members the interface gains later
 * (e.g. a batch-size probe for splitting) still reach the real client.
 */
export function timedNft(
  inner: NftInterface,
  keep: boolean,
): { nft: NftInterface; batches: Batch[]; transactions: NftTransaction[] } {
  const batches: Batch[] = [];
  const transactions: NftTransaction[] = [];
  const run = async (tx: NftTransaction, signal?: AbortSignal): Promise<Awaited<ReturnType<NftInterface['run']>>> => {
    const t0 = performance.now();
    const stats = await inner.run(tx, signal);
    batches.push({ ms: performance.now() - t0, messages: stats.messages, bytes: stats.bytes });
    if (keep) transactions.push(tx);
    return stats;
  };
  const nft = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === 'run') return run;
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { nft, batches, transactions };
}

export class Harness {
  readonly n: number;
  private readonly tracker: ChangeTracker;
  private readonly proxier: NftablesProxier;
  private readonly batches: Batch[];
  private readonly services: Service[];
  private readonly slices: EndpointSlice[];
  private readonly extra = new Map<number, string[]>();
  private rv = 1;
  /** The transactions run, in order, when the harness was asked to keep them. */
  readonly transactions: NftTransaction[];

  /**
   * `maxBatchBytes`: the socket's batch limit, handed to the proxier as the daemon does (it
   * cuts large full syncs into batches under it); give a FakeNft run the kernel run's value
   * so that both split the same way.
   */
  constructor(
    inner: NftInterface,
    n: number,
    opts: {
      keepTransactions?: boolean;
      maxBatchBytes?: number;
      serviceTraffic?: boolean;
      /** Service i's kube-proxy-ts.io/load-balancing annotation, if any (load-balancing bench). */
      loadBalancing?: (i: number) => string | undefined;
    } = {},
  ) {
    this.n = n;
    const t = timedNft(inner, opts.keepTransactions ?? false);
    this.batches = t.batches;
    this.transactions = t.transactions;
    this.tracker = new ChangeTracker(
      { nodeName: NODE_NAME, family: 'IPv4', clusterCIDRs: [CLUSTER_CIDR], serviceCIDRs: [SERVICE_CIDR] },
      { logger: nullLogger, clock: new FakeClock() },
    );
    this.proxier = new NftablesProxier({
      nft: t.nft,
      logger: nullLogger,
      ...(opts.maxBatchBytes !== undefined ? { maxBatchBytes: opts.maxBatchBytes } : {}),
      ...(opts.serviceTraffic !== undefined ? { serviceTraffic: opts.serviceTraffic } : {}),
    });
    // The objects a watch would have decoded: built before the clock starts.
    this.services = Array.from({ length: n }, (_, i) => service(i));
    const lb = opts.loadBalancing;
    if (lb)
      this.services.forEach((s, i) => {
        const v = lb(i);
        if (v !== undefined) s.metadata!.annotations = { 'kube-proxy-ts.io/load-balancing': v };
      });
    this.slices = Array.from({ length: n }, (_, i) => endpointSlice(i, [], 1));
  }

  /** The per-Service traffic counters (--service-traffic-metrics). */
  trafficCounters(): ReturnType<NftablesProxier['trafficCounters']> {
    return this.proxier.trafficCounters();
  }

  async fullSync(): Promise<FullSyncResult> {
    const from = this.batches.length;
    const t0 = performance.now();
    for (let i = 0; i < this.n; i++) {
      this.tracker.onService(undefined, this.services[i]!);
      this.tracker.onEndpointSlice(this.slices[i]!, false);
    }
    const { desired, change } = this.tracker.checkout();
    const t1 = performance.now();
    const r = await this.proxier.sync(desired, change, new AbortController().signal);
    const t2 = performance.now();
    if (!r.full) throw new Error('the first sync was not a full sync');
    if (r.errors.length)
      throw new Error(`full sync reported errors: ${r.errors.slice(0, 3).map(problemText).join('; ')}`);
    return {
      services: this.n,
      servicePorts: desired.services.size,
      modelMs: t1 - t0,
      planMs: r.planMs,
      kernelMs: r.kernelMs,
      totalMs: t2 - t0,
      batches: this.batches.slice(from),
    };
  }

  /** The r-th one-endpoint change: Service changedService(r) gains the address extraIP(r). */
  async change(r: number): Promise<ChangeResult> {
    const i = changedService(r, this.n);
    const extra = [...(this.extra.get(i) ?? []), extraIP(r)];
    this.extra.set(i, extra);
    const slice = endpointSlice(i, extra, ++this.rv);
    const from = this.batches.length;
    const t0 = performance.now();
    this.tracker.onEndpointSlice(slice, false);
    const { desired, change } = this.tracker.checkout();
    const t1 = performance.now();
    const rep = await this.proxier.sync(desired, change, new AbortController().signal);
    const t2 = performance.now();
    if (rep.full) throw new Error('a one-endpoint change ran a full sync');
    if (rep.errors.length)
      throw new Error(`partial sync reported errors: ${rep.errors.slice(0, 3).map(problemText).join('; ')}`);
    return {
      modelMs: t1 - t0,
      planMs: rep.planMs,
      kernelMs: rep.kernelMs,
      totalMs: t2 - t0,
      batches: this.batches.slice(from),
      servicesChanged: rep.servicesChanged,
    };
  }

  async cleanup(): Promise<void> {
    await this.proxier.cleanup();
  }
}
