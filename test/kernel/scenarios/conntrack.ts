// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/conntrack against the real kernel and report plain data. Tests compare what
// they report with `conntrack -L` (an independent reader).

import { createServer, connect as tcpConnect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import type { Socket as UdpSocket } from 'node:dgram';
import { connect, NfnlSubsys, Protocol } from '../../../src/netlink/core/index.ts';
import { DEFAULT_PER_DATAGRAM, deleteRequest, openConntrack } from '../../../src/netlink/conntrack/index.ts';
import type {
  ConntrackClient,
  DeleteReport,
  Flow,
  FlowFilter,
  NewFlow,
  Tuple,
} from '../../../src/netlink/conntrack/index.ts';
import { errorView as view } from './outcomes.ts';
import type { ErrorView } from './outcomes.ts';

export type { ErrorView };

async function withClient<T>(fn: (c: ConntrackClient) => Promise<T>): Promise<T> {
  const { client, conn } = openConntrack({ timeoutMs: 20_000 });
  try {
    return await fn(client);
  } finally {
    conn.close();
  }
}

export function dump(
  filter: FlowFilter = {},
): Promise<{ flows: Flow[]; received: number; kernelTupleFilter: boolean }> {
  return withClient((c) => c.dumpDetailed(filter));
}

export interface ReportView {
  deleted: number;
  notFound: number;
  errors: ErrorView[];
}
const reportView = (r: DeleteReport): ReportView => ({
  deleted: r.deleted,
  notFound: r.notFound,
  errors: r.errors.map(view),
});

/** Dumps with `filter`, then deletes every entry found (with their ids). */
export function dumpAndDelete(filter: FlowFilter): Promise<{ found: number; report: ReportView }> {
  return withClient(async (c) => {
    const flows = await c.dump(filter);
    return { found: flows.length, report: reportView(await c.deleteMany(flows)) };
  });
}

export function deleteMatching(
  filters: FlowFilter[],
  kernelFlush = true,
): Promise<ReportView & { matched: number; dumps: number; flushes: number }> {
  return withClient(async (c) => {
    const r = await c.deleteMatching(filters, { kernelFlush });
    return { ...reportView(r), matched: r.matched, dumps: r.dumps, flushes: r.flushes };
  });
}

/**
 * ConntrackClient.flushMatching: { deleted } after a kernel-side flush, null when it could not flush (and deleted
 * nothing).
 */
export function flushMatching(
  filter: FlowFilter,
): Promise<{ deleted: number; kernelFlushFilter: boolean | null } | null> {
  return withClient(async (c) => {
    const r = await c.flushMatching(filter);
    return r ? { deleted: r.deleted, kernelFlushFilter: c.kernelFlushFilter ?? null } : null;
  });
}

/**
 * A DELETE with CTA_FILTER built from any filter, bypassing exactInKernel (the kernel's own
 * matching, for tests that show why some filters never go to it). Null when the kernel
 * accepted it, else the error.
 */
export async function rawFlush(filter: FlowFilter, family: 'IPv4' | 'IPv6'): Promise<ErrorView | null> {
  const { AF_INET, AF_INET6, nfMessage, NfnlSubsys: Subsys } = await import('../../../src/netlink/core/index.ts');
  const { CtMsg, writeDumpFilter } = await import('../../../src/netlink/conntrack/index.ts');
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 20_000 });
  try {
    await conn.request(
      nfMessage(Subsys.CTNETLINK, CtMsg.DELETE, family === 'IPv4' ? AF_INET : AF_INET6, 0, 'raw flush', (w) =>
        writeDumpFilter(w, filter, true),
      ),
    );
    return null;
  } catch (e) {
    return view(e);
  } finally {
    conn.close();
  }
}

export function deleteTargets(targets: (Tuple | Flow)[], matchId = true): Promise<ReportView> {
  return withClient(async (c) => reportView(await c.deleteMany(targets, { matchId })));
}

/**
 * deleteMany of `n` entries that do not exist, on a socket whose receive buffer is asked for
 * `recvBufferBytes` (212992: what the stock net.core.rmem_max grants): every request fails
 * with ENOENT, and every error reply must fit before we read any.
 */
export async function deleteAbsent(n: number, recvBufferBytes: number): Promise<ReportView> {
  const { client, conn } = openConntrack({ timeoutMs: 20_000, recvBufferBytes });
  try {
    return reportView(await client.deleteMany(udpFlows(n, '10.96.0.77', '10.244.7.7').map((f) => f.orig)));
  } finally {
    conn.close();
  }
}

export function deleteOne(target: Tuple | Flow): Promise<boolean | ErrorView> {
  return withClient(async (c) => {
    try {
      return await c.delete(target);
    } catch (e) {
      return view(e);
    }
  });
}

export function get(target: Tuple): Promise<Flow | null> {
  return withClient(async (c) => (await c.get(target)) ?? null);
}

export function create(flows: NewFlow[]): Promise<(ErrorView | null)[]> {
  return withClient(async (c) => (await c.createMany(flows)).map((e) => (e ? view(e) : null)));
}

export function stats(): Promise<{ entries: number; maxEntries: number; cpus: number }> {
  return withClient(async (c) => ({ ...(await c.stats()), cpus: (await c.statsPerCpu()).length }));
}

/** Sends one DELETE inside an nfnetlink batch: ctnetlink has no batches, the kernel refuses. */
export async function deleteInBatch(t: Tuple): Promise<ErrorView | null> {
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 5000 });
  try {
    await conn.batch(NfnlSubsys.CTNETLINK, [deleteRequest({ orig: t })]);
    return null;
  } catch (e) {
    return view(e);
  } finally {
    conn.close();
  }
}

/** n UDP entries 10.1.x.y:port -> vip:53 with replies from `endpoint`, as NewFlows. */
export function udpFlows(n: number, vip: string, endpoint: string, firstPort = 1024): NewFlow[] {
  const out: NewFlow[] = [];
  for (let i = 0; i < n; i++) {
    const client = `10.1.${(i >> 8) & 0xff}.${i & 0xff}`;
    const sport = firstPort + (i % 60000);
    out.push({
      orig: { src: client, dst: vip, proto: 17, srcPort: sport, dstPort: 53 },
      reply: { src: endpoint, dst: client, proto: 17, srcPort: 53, dstPort: sport },
      timeout: 600,
    });
  }
  return out;
}

export interface DeleteBench {
  entries: number;
  perDatagram: number;
  insertMs: number;
  dumpMs: number;
  deleteMs: number;
  /**
   * CPU time (user + system) of this process over the step. The kernel's work for our
   * requests runs in our sendmsg/recvmsg calls and counts as system time, so on a busy
   * machine this is a fairer figure than wall time.
   */
  insertCpuMs: number;
  dumpCpuMs: number;
  deleteCpuMs: number;
  deleted: number;
  notFound: number;
  errors: number;
  left: number;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, ms, cpuMs: (c.user + c.system) / 1000 };
}

/** Inserts n entries, dumps them with a kernel-side filter, deletes them all, and times each step. */
export async function benchDelete(n: number, perDatagram = DEFAULT_PER_DATAGRAM, warmup = 0): Promise<DeleteBench> {
  const { client, conn } = openConntrack({ timeoutMs: 60_000 });
  try {
    if (warmup > 0) {
      // A running daemon has its code compiled: the same steps once on other entries first.
      await client.createMany(udpFlows(warmup, '10.96.0.99', '10.244.9.9'), { perDatagram });
      await client.deleteMany(
        await client.dump({
          family: 'IPv4',
          proto: 17,
          orig: { dst: '10.96.0.99', dstPort: 53 },
          reply: { src: '10.244.9.9' },
        }),
        { perDatagram },
      );
    }
    const flows = udpFlows(n, '10.96.0.10', '10.244.1.5');
    const ins = await timed(() => client.createMany(flows, { perDatagram }));
    const failed = ins.value.filter(Boolean);
    if (failed.length) throw new Error(`${failed.length} inserts failed, first: ${failed[0]!.message}`);
    const dump = await timed(() =>
      client.dump({
        family: 'IPv4',
        proto: 17,
        orig: { dst: '10.96.0.10', dstPort: 53 },
        reply: { src: '10.244.1.5' },
      }),
    );
    const del = await timed(() => client.deleteMany(dump.value, { perDatagram }));
    const left = (await client.stats()).entries;
    const r = del.value;
    return {
      entries: dump.value.length,
      perDatagram,
      insertMs: ins.ms,
      dumpMs: dump.ms,
      deleteMs: del.ms,
      insertCpuMs: ins.cpuMs,
      dumpCpuMs: dump.cpuMs,
      deleteCpuMs: del.cpuMs,
      deleted: r.deleted,
      notFound: r.notFound,
      errors: r.errors.length,
      left,
    };
  } finally {
    conn.close();
  }
}

// Real traffic: servers in one namespace, clients in another.
const held: (Server | Socket | UdpSocket)[] = [];

export async function startServers(addr: string, tcpPort: number, udpPort: number): Promise<null> {
  const tcp = createServer((s) => {
    held.push(s);
    s.on('error', () => {});
  });
  await new Promise<void>((resolve) => tcp.listen(tcpPort, addr, resolve));
  const udp = createSocket(addr.includes(':') ? 'udp6' : 'udp4');
  udp.on('message', (msg, rinfo) => udp.send(msg, rinfo.port, rinfo.address));
  await new Promise<void>((resolve) => udp.bind(udpPort, addr, resolve));
  held.push(tcp, udp);
  return null;
}

/** One UDP exchange from a fixed source port; resolves when the echo comes back. */
export async function udpExchange(local: string, localPort: number, host: string, port: number): Promise<string> {
  const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
  await new Promise<void>((resolve) => s.bind(localPort, local, resolve));
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no UDP echo from ${host}:${port}`)), 3000);
      s.on('message', (m) => {
        clearTimeout(timer);
        resolve(m.toString());
      });
      s.send('ping', port, host);
    });
  } finally {
    s.close();
  }
}

/** Opens a TCP connection from a fixed source port and keeps it open. */
export async function tcpOpen(local: string, localPort: number, host: string, port: number): Promise<null> {
  const s = tcpConnect({ host, port, localAddress: local, localPort });
  await new Promise<void>((resolve, reject) => {
    s.once('connect', resolve);
    s.once('error', reject);
  });
  held.push(s);
  return null;
}

/**
 * Asks the kernel itself to match an IPv6 original destination (CTA_FILTER with IP_DST), which
 * our client never does, and reports what comes back: 'correct' when only entries to `dst`
 * return, 'inverted' when only the others do (the bug that keeps IPv6 addresses client-side).
 */
export async function probeIpv6AddressFilter(
  dst: string,
): Promise<{ verdict: 'correct' | 'inverted' | 'mixed' | 'empty'; returned: string[]; total: number }> {
  const { AF_INET6, nfMessage, NfnlSubsys: Subsys } = await import('../../../src/netlink/core/index.ts');
  const { CTA, CTA_FILTER, CTA_FILTER_F, CTA_IP, CTA_TUPLE, CtMsg, decodeReply } =
    await import('../../../src/netlink/conntrack/index.ts');
  const { parseIP } = await import('../../../src/base/ip.ts');
  const { client, conn } = openConntrack({ timeoutMs: 20_000 });
  try {
    const total = (await client.dump({ family: 'IPv6' })).length;
    const msg = nfMessage(Subsys.CTNETLINK, CtMsg.GET, AF_INET6, 0, `probe ipv6 dst ${dst}`, (w) => {
      w.nested(CTA.FILTER, (f) => f.u32(CTA_FILTER.ORIG_FLAGS, CTA_FILTER_F.IP_DST).u32(CTA_FILTER.REPLY_FLAGS, 0));
      w.nested(CTA.TUPLE_ORIG, (t) => t.nested(CTA_TUPLE.IP, (ip) => ip.bytes(CTA_IP.V6_DST, parseIP(dst)!.bytes)));
    });
    const replies = await conn.request(msg, { dump: true });
    const returned = replies.map((m, i) => decodeReply(m, `probe entry ${i}`).orig.dst);
    const want = parseIP(dst)!.text;
    const verdict =
      returned.length === 0
        ? 'empty'
        : returned.every((d) => d === want)
          ? 'correct'
          : returned.every((d) => d !== want)
            ? 'inverted'
            : 'mixed';
    return { verdict, returned, total };
  } finally {
    conn.close();
  }
}
