// Runs inside throwaway namespaces (netns agents) for the nftables benchmark:
//   - in the node namespace: the model and the nftables proxier against the real kernel,
//     as a daemon would hold them (this process holds nothing else, so its RSS is daemon-like);
//   - in the client namespace: TCP connects timed to the first SYN-ACK.
import { connect as tcpConnect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { connect, Protocol } from '../../src/netlink/core/index.ts';
import { NftClient } from '../../src/netlink/nftables/index.ts';
import { TABLE } from '../../src/proxier/nftables/index.ts';
import type { Batch, ChangeResult, FullSyncResult } from './nftables-workload.ts';
import { Harness } from './nftables-workload.ts';

let conn: ReturnType<typeof connect> | undefined;
let harness: Harness | undefined;
/** Round trips of transport.batch() (one per NftClient.run that sends), ms, in order. */
let roundTrips: number[] = [];

/**
 * The connection, with batch() timed: the batch round trip alone, without the encoding that
 * NftClient.run does before it, is the kernel's share (processing, commit, ACKs).
 */
function timedTransport(c: ReturnType<typeof connect>): ReturnType<typeof connect> {
  return new Proxy(c, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const f = (v as (...a: unknown[]) => unknown).bind(target);
      if (prop !== 'batch') return f;
      return async (...args: unknown[]): Promise<unknown> => {
        const t0 = performance.now();
        try {
          return await f(...args);
        } finally {
          roundTrips.push(performance.now() - t0);
        }
      };
    },
  });
}

function withRoundTrips<T extends { batches: Batch[] }>(r: T): T {
  if (roundTrips.length === r.batches.length) r.batches.forEach((b, i) => (b.kernelOnlyMs = roundTrips[i]!));
  roundTrips = [];
  return r;
}

/** A fresh tracker and proxier for n Services (objects built, nothing fed yet); returns the socket's batch limit. */
export function start(n: number, serviceTraffic = false, lb?: { value: string; every: number }): number {
  conn?.close();
  conn = connect(Protocol.NETFILTER, { timeoutMs: 300_000 });
  const maxBatchBytes = conn.maxBatchBytes;
  harness = new Harness(new NftClient({ family: 'ip', table: TABLE, transport: timedTransport(conn) }), n, {
    maxBatchBytes,
    serviceTraffic,
    // Every `every`-th Service asks for `value` (load-balancing.ts: 0 %, 10 %, 100 %).
    ...(lb ? { loadBalancing: (i: number) => (lb.every > 0 && i % lb.every === 0 ? lb.value : undefined) } : {}),
  });
  roundTrips = [];
  return maxBatchBytes;
}

export async function fullSync(): Promise<FullSyncResult> {
  return withRoundTrips(await harness!.fullSync());
}

export async function change(r: number): Promise<ChangeResult> {
  return withRoundTrips(await harness!.change(r));
}

/** New connections counted for the first Service's cluster IP (--service-traffic-metrics), or undefined. */
export async function firstServiceConnections(): Promise<number | undefined> {
  const all = await harness!.trafficCounters();
  return all.find((s) => s.id.startsWith('ns0/svc0:') && s.frontend === 'cluster-ip')?.connections;
}

/** Removes the table and drops the tracker and proxier. */
export async function stop(): Promise<void> {
  await harness?.cleanup();
  harness = undefined;
  conn?.close();
  conn = undefined;
}

export interface Memory {
  rssBytes: number;
  heapUsedBytes: number;
  /** Peak resident set size of this process so far. */
  maxRssBytes: number;
}

export function memory(): Memory {
  const m = process.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, maxRssBytes: process.resourceUsage().maxRSS * 1024 };
}

/** Microseconds from connect() to the connection being established (the first SYN-ACK), or an error. */
function connectOnce(host: string, port: number, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const s = tcpConnect({ host, port });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`connect ${host}:${port} timed out`));
    }, timeoutMs);
    s.once('connect', () => {
      const us = (performance.now() - t0) * 1000;
      clearTimeout(timer);
      s.destroy();
      resolve(us);
    });
    s.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/**
 * `n` rounds; each round connects once to every target, in an order that rotates from round
 * to round (no target always goes first). Returns the samples per target, µs.
 */
export async function connectLatency(
  targets: readonly { host: string; port: number }[],
  n: number,
  warmup = 20,
): Promise<number[][]> {
  const out = targets.map(() => [] as number[]);
  for (let r = -warmup; r < n; r++) {
    for (let k = 0; k < targets.length; k++) {
      const j = (k + Math.max(r, 0)) % targets.length;
      const t = targets[j]!;
      const us = await connectOnce(t.host, t.port, 2_000);
      if (r >= 0) out[j]!.push(us);
    }
  }
  return out;
}
