// Runs inside a throwaway namespace (netns agent) for the conntrack benchmark: times the ways
// kube-proxy-ts deletes 10,000 stale UDP entries, all in one table that also holds entries
// that must stay (the same Service answered by a healthy endpoint).
//
//   6.12+    ConntrackClient.flushMatching: one IPCTNL_MSG_CT_DELETE carrying CTA_FILTER
//            (plus the two GET_STATS that count what it removed), and the ConntrackFlusher
//            end to end (schedule() to the run's report: planning, the guard against the
//            desired state, the flush), which is what the daemon runs after a sync.
//   <6.12    what Debian 12's 6.1 gets (the kernel refuses the filtered flush): a dump with
//            the kernel-side CTA_FILTER and pipelined DELETEs; both through the client and
//            through the flusher (kernelFlush: false takes that path on this kernel too).
//
// Every step is timed in wall time and in this process's CPU time (user + system: the
// kernel's work for our requests runs inside our sendmsg/recvmsg calls).

import { FakeClock } from '../../src/base/clock.ts';
import { memoryLogger } from '../../src/base/logger.ts';
import { ConntrackFlusher } from '../../src/conntrack/index.ts';
import type { FlushRunReport } from '../../src/conntrack/index.ts';
import { ChangeTracker } from '../../src/model/index.ts';
import type { DesiredState, ServicePortId, StaleTarget } from '../../src/model/index.ts';
import { DEFAULT_PER_DATAGRAM, openConntrack } from '../../src/netlink/conntrack/index.ts';
import type { ConntrackClient, FlowFilter } from '../../src/netlink/conntrack/index.ts';
import { udpFlows } from '../kernel/scenarios/conntrack.ts';

export const VIP = '10.96.0.10';
export const STALE_EP = '10.244.1.5';
export const LIVE_EP = '10.244.1.6';

export interface Timed {
  ms: number;
  cpuMs: number;
}

export interface FlushWays {
  entries: number;
  unrelated: number;
  perDatagram: number;
  /** Whether the kernel did the filtered flush (false on a kernel before 6.12). */
  kernelFlush: boolean;
  flush: Timed & { deleted: number; left: number };
  flusher: Timed & { durationMs: number; deleted: number; kernelFlushes: number; left: number };
  dump: Timed & { found: number };
  delete: Timed & { deleted: number; errors: number; left: number };
  fallbackFlusher: Timed & { durationMs: number; deleted: number; kernelFlushes: number; left: number };
}

async function timed<T>(fn: () => Promise<T>): Promise<Timed & { value: T }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, ms, cpuMs: (c.user + c.system) / 1000 };
}

/** The desired state after the endpoint was removed: the Service answered by LIVE_EP alone. */
function desiredAfterRemoval(): DesiredState {
  const t = new ChangeTracker(
    { nodeName: 'node-a', family: 'IPv4' },
    { logger: memoryLogger(), clock: new FakeClock() },
  );
  t.onService(undefined, {
    metadata: { namespace: 'bench', name: 'dns', resourceVersion: '1' },
    spec: { type: 'ClusterIP', clusterIP: VIP, ports: [{ name: 'p', protocol: 'UDP', port: 53 }] },
  });
  t.onEndpointSlice(
    {
      metadata: {
        namespace: 'bench',
        name: 'dns-1',
        resourceVersion: '1',
        labels: { 'kubernetes.io/service-name': 'dns' },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [LIVE_EP], conditions: { ready: true } }],
      ports: [{ name: 'p', protocol: 'UDP', port: 53 }],
    },
    false,
  );
  return t.checkout().desired;
}

const target = (vip: string, ep: string): StaleTarget => ({
  reason: 'endpoint-removed',
  service: 'bench/dns:p/UDP' as ServicePortId,
  family: 'IPv4',
  protocol: 'UDP',
  serviceIPs: [vip],
  port: 53,
  nodePort: 0,
  endpointIP: ep,
  endpointPort: 53,
});

const staleFilter = (vip: string, ep: string): FlowFilter => ({
  family: 'IPv4',
  proto: 17,
  orig: { dst: vip, dstPort: 53 },
  reply: { src: ep, srcPort: 53 },
});

async function insert(client: ConntrackClient, n: number, vip: string, ep: string, firstPort?: number): Promise<void> {
  const failed = (await client.createMany(udpFlows(n, vip, ep, firstPort))).filter(Boolean);
  if (failed.length) throw new Error(`${failed.length} inserts failed, first: ${failed[0]!.message}`);
}

async function runFlusher(
  client: ConntrackClient,
  kernelFlush: boolean,
  desired: DesiredState,
  vip: string,
  ep: string,
): Promise<Timed & { report: FlushRunReport }> {
  const reports: FlushRunReport[] = [];
  const f = new ConntrackFlusher({
    client,
    logger: memoryLogger(),
    counters: (r) => reports.push(r),
    timeoutMs: 60_000,
    kernelFlush,
  });
  try {
    const r = await timed(async () => {
      f.schedule([target(vip, ep)], desired);
      await f.idle();
    });
    return { ms: r.ms, cpuMs: r.cpuMs, report: reports.at(-1)! };
  } finally {
    await f.close();
  }
}

/**
 * Inserts `n` stale entries four times over (1,000 healthy ones stay throughout) and deletes
 * them each time another way. `warmup` entries go through every way first, on another VIP,
 * so that the figures are those of a running daemon rather than of freshly loaded code.
 */
export async function benchWays(n: number, perDatagram = DEFAULT_PER_DATAGRAM, warmup = 2000): Promise<FlushWays> {
  const { client, conn } = openConntrack({ timeoutMs: 60_000 });
  const { client: fallback, conn: fallbackConn } = openConntrack({ timeoutMs: 60_000, kernelFlushFilter: false });
  try {
    const desired = desiredAfterRemoval();
    if (warmup > 0) {
      for (let i = 0; i < 2; i++) {
        const vip = '10.96.0.99';
        const ep = '10.244.9.9';
        await insert(client, warmup, vip, ep);
        await client.flushMatching(staleFilter(vip, ep));
        await insert(client, warmup, vip, ep);
        await runFlusher(client, true, desired, vip, ep);
        await insert(client, warmup, vip, ep);
        await fallback.deleteMany(await fallback.dump(staleFilter(vip, ep)), { perDatagram });
        await insert(client, warmup, vip, ep);
        await runFlusher(fallback, false, desired, vip, ep);
      }
    }
    const unrelated = 1000;
    await insert(client, unrelated, VIP, LIVE_EP, 40000);
    const left = async (): Promise<number> => (await client.stats()).entries;

    await insert(client, n, VIP, STALE_EP);
    const flush = await timed(() => client.flushMatching(staleFilter(VIP, STALE_EP)));
    const afterFlush = await left();

    await insert(client, n, VIP, STALE_EP);
    const flusher = await runFlusher(client, true, desired, VIP, STALE_EP);
    const afterFlusher = await left();

    await insert(client, n, VIP, STALE_EP);
    const dump = await timed(() => fallback.dump(staleFilter(VIP, STALE_EP)));
    const del = await timed(() => fallback.deleteMany(dump.value, { perDatagram }));
    const afterDelete = await left();

    await insert(client, n, VIP, STALE_EP);
    const fb = await runFlusher(fallback, false, desired, VIP, STALE_EP);
    const afterFallback = await left();

    return {
      entries: n,
      unrelated,
      perDatagram,
      kernelFlush: flush.value !== undefined,
      flush: { ms: flush.ms, cpuMs: flush.cpuMs, deleted: flush.value?.deleted ?? 0, left: afterFlush },
      flusher: {
        ms: flusher.ms,
        cpuMs: flusher.cpuMs,
        durationMs: flusher.report.durationMs,
        deleted: flusher.report.deleted,
        kernelFlushes: flusher.report.kernelFlushes,
        left: afterFlusher,
      },
      dump: { ms: dump.ms, cpuMs: dump.cpuMs, found: dump.value.length },
      delete: {
        ms: del.ms,
        cpuMs: del.cpuMs,
        deleted: del.value.deleted,
        errors: del.value.errors.length,
        left: afterDelete,
      },
      fallbackFlusher: {
        ms: fb.ms,
        cpuMs: fb.cpuMs,
        durationMs: fb.report.durationMs,
        deleted: fb.report.deleted,
        kernelFlushes: fb.report.kernelFlushes,
        left: afterFallback,
      },
    };
  } finally {
    conn.close();
    fallbackConn.close();
  }
}
