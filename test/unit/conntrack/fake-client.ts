// A conntrack table in memory behind the FlusherClient interface, with knobs for failures:
// dumps that fail or hang until aborted, deletes that fail for chosen entries. Flushing adds
// the kernel-side flush by filter of Linux 6.12+ (or a kernel that refuses it, as 6.1 does).
import { compileFilter, exactInKernel, IPPROTO, IPS, tupleText } from '../../../src/netlink/conntrack/index.ts';
import type {
  DeleteOptions,
  DeleteReport,
  Flow,
  FlowFilter,
  FlushResult,
} from '../../../src/netlink/conntrack/index.ts';
import { errnoNumber, NetlinkError } from '../../../src/netlink/core/index.ts';
import type { FlusherClient } from '../../../src/conntrack/index.ts';

let nextId = 1;

/** An entry to `dst:dport` answered by `replySrc:replyPort` (DNATed unless they are the same). */
export function flow(o: {
  dst: string;
  dport: number;
  replySrc: string;
  replyPort?: number;
  src?: string;
  sport?: number;
  proto?: number;
  family?: 'IPv4' | 'IPv6';
}): Flow {
  const proto = o.proto ?? IPPROTO.UDP;
  const src = o.src ?? '10.1.0.2';
  const sport = o.sport ?? 40000;
  const replyPort = o.replyPort ?? 8080;
  const dnat = o.replySrc !== o.dst || replyPort !== o.dport;
  return {
    family: o.family ?? 'IPv4',
    orig: { src, dst: o.dst, proto, srcPort: sport, dstPort: o.dport },
    reply: { src: o.replySrc, dst: src, proto, srcPort: replyPort, dstPort: sport },
    status: IPS.CONFIRMED | (dnat ? IPS.DST_NAT | IPS.DST_NAT_DONE : 0),
    id: nextId++,
    unknown: [],
  };
}

export const show = (f: Flow): string => `${tupleText(f.orig)} <- ${f.reply.src}:${f.reply.srcPort}`;

export class FakeConntrack implements FlusherClient {
  table: Flow[];
  dumps: FlowFilter[] = [];
  deleteCalls: number[] = [];
  /** Dumps fail with this error while set. */
  dumpError: Error | undefined;
  /** Deletes of entries this selects fail (EPERM). */
  failDelete: ((f: Flow) => boolean) | undefined;
  /** Dumps wait for this promise (or for the abort signal). */
  dumpGate: Promise<void> | undefined;
  /** Dumps never end by themselves: only the abort signal ends them. */
  hang = false;

  constructor(flows: Flow[] = []) {
    this.table = [...flows];
  }

  has(f: Flow): boolean {
    return this.table.includes(f);
  }

  async dump(filter: FlowFilter, opts: { signal?: AbortSignal } = {}): Promise<Flow[]> {
    this.dumps.push(filter);
    const aborted = new Promise<never>((_, reject) => {
      if (opts.signal?.aborted) reject(opts.signal.reason);
      opts.signal?.addEventListener('abort', () => reject(opts.signal!.reason), { once: true });
    });
    aborted.catch(() => {});
    if (this.hang) await aborted;
    if (this.dumpGate) await Promise.race([this.dumpGate, aborted]);
    if (this.dumpError) throw this.dumpError;
    const m = compileFilter(filter);
    return this.table.filter(m);
  }

  async deleteMany(targets: Iterable<Flow>, opts: DeleteOptions = {}): Promise<DeleteReport> {
    if (opts.signal?.aborted) throw opts.signal.reason;
    const list = [...targets];
    this.deleteCalls.push(list.length);
    const report: DeleteReport = { deleted: 0, notFound: 0, errors: [] };
    for (const f of list) {
      if (this.failDelete?.(f)) {
        report.errors.push(new NetlinkError(`delete conntrack ${tupleText(f.orig)}`, errnoNumber('EPERM')));
        continue;
      }
      const i = this.table.indexOf(f);
      if (i < 0) report.notFound++;
      else {
        this.table.splice(i, 1);
        report.deleted++;
      }
    }
    return report;
  }
}

/**
 * The table with ConntrackClient's flush by filter: `kernel` '6.12' deletes what the filter
 * matches (the kernel matches exactly what exactInKernel accepts), '6.1' refuses every flush
 * (remembered, as the client does). flushError makes flushes fail instead.
 */
export class FlushingConntrack extends FakeConntrack {
  kernel: '6.12' | '6.1';
  flushes: FlowFilter[] = [];
  refused = 0;
  flushError: Error | undefined;
  private unable = false;

  constructor(flows: Flow[] = [], kernel: '6.12' | '6.1' = '6.12') {
    super(flows);
    this.kernel = kernel;
  }

  canFlush(filter: FlowFilter): boolean {
    return !this.unable && exactInKernel(filter);
  }

  async flushMatching(filter: FlowFilter, opts: { signal?: AbortSignal } = {}): Promise<FlushResult | undefined> {
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (!this.canFlush(filter)) return undefined;
    if (this.kernel === '6.1') {
      this.refused++;
      this.unable = true;
      return undefined;
    }
    if (this.flushError) throw this.flushError;
    this.flushes.push(filter);
    const m = compileFilter(filter);
    const before = this.table.length;
    this.table = this.table.filter((f) => !m(f));
    return { deleted: before - this.table.length };
  }
}
