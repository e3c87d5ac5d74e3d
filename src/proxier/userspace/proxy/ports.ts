// ProxyPorts: the sockets of one family, keyed by service port id. apply() opens sockets for
// new ids, swaps the endpoints of existing ones in place, and retires the ones gone: a TCP
// listener stops accepting while its connections finish (draining), a UDP socket closes with
// its associations. One apply() runs at a time.

import { isIP } from 'node:net';
import { unlimitedBudget } from '../../../base/descriptor-budget.ts';
import type { DescriptorBudget } from '../../../base/descriptor-budget.ts';
import { systemClock } from '../../../base/clock.ts';
import type { Clock } from '../../../base/clock.ts';
import type { Logger } from '../../../base/logger.ts';
import { newCounters, RateLimitedLog } from './counters.ts';
import type { PortCounters } from './counters.ts';
import { bindInRange, PortAllocator } from './port-allocator.ts';
import { TcpProxy } from './tcp-proxy.ts';
import { DEFAULT_MAX_UDP_ASSOCIATIONS, UdpProxy } from './udp-proxy.ts';
import type { ApplyResult, PortTotals, ProxyPorts, ProxyPortSpec, ProxyPortsOptions, ProxyStats } from './types.ts';
import { errorMessage } from '../../../base/errors.ts';

export const DEFAULT_TCP_IDLE_TIMEOUT_MS = 24 * 3600_000;

interface Entry {
  spec: ProxyPortSpec;
  readonly proxy: TcpProxy | UdpProxy;
  readonly port: number;
  readonly counters: PortCounters;
}

/**
 * Retired port names whose own counters are kept (a removed Service's totals stay readable for a
 * while); older ones are summed into one record, so that Service churn cannot grow this forever.
 */
export const RETIRED_NAMES_KEPT = 1024;

export class UserspaceProxyPorts implements ProxyPorts {
  private readonly entries = new Map<string, Entry>();
  /** Retired TCP entries whose connections still run. */
  private readonly draining = new Set<Entry>();
  /**
   * The final counters of ports gone, by name (the most recently retired RETIRED_NAMES_KEPT), and
   * of older ones in one sum, so that the counters stay "since start" and sums over them never go
   * backwards (the metrics are Prometheus counters).
   */
  private readonly retired = new Map<string, PortTotals>();
  private retiredOther: PortTotals = newCounters();
  private readonly alloc: PortAllocator | undefined;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly rateLog: RateLimitedLog;
  private readonly opts: ProxyPortsOptions;
  private readonly budget: DescriptorBudget;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(opts: ProxyPortsOptions) {
    if (isIP(opts.listenIP) !== (opts.family === 'IPv4' ? 4 : 6))
      throw new Error(`proxy listen address ${JSON.stringify(opts.listenIP)}: not an ${opts.family} address`);
    if (!(opts.udpIdleTimeoutMs > 0))
      throw new Error(`--udp-timeout ${opts.udpIdleTimeoutMs} ms: must be greater than 0`);
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger.child({ component: 'userspace-proxy', family: opts.family });
    this.rateLog = new RateLimitedLog(this.logger, this.clock);
    this.alloc = opts.portRange ? new PortAllocator(opts.portRange) : undefined;
    this.budget = opts.budget ?? unlimitedBudget();
  }

  apply(specs: readonly ProxyPortSpec[]): Promise<ApplyResult> {
    const run = this.queue.then(() => this.applyNow(specs));
    this.queue = run.catch(() => {});
    return run;
  }

  private async applyNow(specs: readonly ProxyPortSpec[]): Promise<ApplyResult> {
    if (this.closed) throw new Error('userspace proxy ports: apply() after close()');
    const ports = new Map<string, number>();
    const errors = new Map<string, Error>();
    const wanted = new Map<string, ProxyPortSpec>();
    for (const spec of specs) {
      if (wanted.has(spec.id)) errors.set(spec.id, new Error(`service port ${spec.id}: given twice to apply()`));
      else wanted.set(spec.id, spec);
    }
    for (const [id, e] of this.entries) {
      const spec = wanted.get(id);
      if (!spec || spec.protocol !== e.proxy.protocol || spec.listenPort !== e.spec.listenPort) this.retire(id, e);
    }
    for (const [id, spec] of wanted) {
      if (errors.has(id)) continue;
      try {
        const e = this.entries.get(id) ?? (await this.open(spec));
        e.proxy.update(spec);
        e.spec = spec;
        e.proxy.balancer.sweep();
        ports.set(id, e.port);
      } catch (err) {
        errors.set(id, new Error(`service port ${spec.name} (${spec.protocol}): ${errorMessage(err)}`, { cause: err }));
      }
    }
    this.pruneDrained();
    return { ports, errors };
  }

  private async open(spec: ProxyPortSpec): Promise<Entry> {
    if (spec.protocol !== 'TCP' && spec.protocol !== 'UDP')
      throw new Error(`protocol ${String(spec.protocol)}: the userspace proxy serves TCP and UDP only`);
    const counters = newCounters();
    const common = {
      listenIP: this.opts.listenIP,
      clock: this.clock,
      rateLog: this.rateLog,
      counters,
      budget: this.budget,
    };
    const proxy =
      spec.protocol === 'TCP'
        ? new TcpProxy(spec, {
            ...common,
            ipv6Only: this.opts.family === 'IPv6',
            idleTimeoutMs: this.opts.tcpIdleTimeoutMs ?? DEFAULT_TCP_IDLE_TIMEOUT_MS,
          })
        : new UdpProxy(spec, {
            ...common,
            type: this.opts.family === 'IPv4' ? 'udp4' : 'udp6',
            idleTimeoutMs: this.opts.udpIdleTimeoutMs,
            maxAssociations: this.opts.udpMaxAssociations ?? DEFAULT_MAX_UDP_ASSOCIATIONS,
          });
    const port =
      spec.listenPort !== undefined
        ? await proxy.listen(spec.listenPort)
        : this.alloc
          ? await bindInRange(this.alloc, (p) => proxy.listen(p))
          : await proxy.listen(0);
    const e: Entry = { spec, proxy, port, counters };
    this.entries.set(spec.id, e);
    this.logger.debug('Opened proxy socket', { service: spec.name, protocol: spec.protocol, port });
    return e;
  }

  private retire(id: string, e: Entry): void {
    this.entries.delete(id);
    if (e.spec.listenPort === undefined) this.alloc?.release(e.port);
    this.rateLog.forgetPrefix(`${e.spec.name}/`);
    if (e.proxy instanceof TcpProxy) {
      e.proxy.stopListening();
      if (e.counters.active > 0) this.draining.add(e);
      else this.fold(e);
    } else {
      e.proxy.destroy();
      this.fold(e);
    }
    this.logger.debug('Closed proxy socket', { service: e.spec.name, protocol: e.spec.protocol, port: e.port });
  }

  private pruneDrained(): void {
    for (const e of this.draining)
      if (e.counters.active === 0) {
        this.draining.delete(e);
        this.fold(e);
      }
  }

  /** Keeps a finished entry's counters under its name. */
  private fold(e: Entry): void {
    const name = e.spec.name;
    const sum = add(this.retired.get(name), countersOf(e));
    this.retired.delete(name); // re-inserted last: the map's order is the order of retirement
    this.retired.set(name, sum);
    for (const [oldest, totals] of this.retired) {
      if (this.retired.size <= RETIRED_NAMES_KEPT) break;
      this.retired.delete(oldest);
      this.retiredOther = add(this.retiredOther, totals);
    }
  }

  stats(): ProxyStats {
    this.pruneDrained();
    const perPort = new Map<string, PortTotals>(this.retired);
    let activeConnections = 0;
    let activeUdpAssociations = 0;
    let bufferedBytes = 0;
    for (const e of [...this.entries.values(), ...this.draining]) {
      if (e.proxy instanceof TcpProxy) {
        activeConnections += e.counters.active;
        bufferedBytes += e.proxy.buffered();
      } else activeUdpAssociations += e.counters.active;
      perPort.set(e.spec.name, add(perPort.get(e.spec.name), countersOf(e)));
    }
    return { activeConnections, activeUdpAssociations, bufferedBytes, perPort, retiredOther: this.retiredOther };
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    for (const e of [...this.entries.values(), ...this.draining]) e.proxy.destroy();
    this.entries.clear();
    this.draining.clear();
  }
}

/** An entry's counters now; TCP bytes are read from its sockets. */
function countersOf(e: Entry): PortTotals {
  const c = e.counters;
  const bytes = e.proxy instanceof TcpProxy ? e.proxy.bytes() : { in: c.bytesIn, out: c.bytesOut };
  return { ...c, bytesIn: bytes.in, bytesOut: bytes.out };
}

function add(a: PortTotals | undefined, b: PortTotals): PortTotals {
  if (!a) return b;
  return {
    accepted: a.accepted + b.accepted,
    failedOver: a.failedOver + b.failedOver,
    refused: a.refused + b.refused,
    overBudget: a.overBudget + b.overBudget,
    bytesIn: a.bytesIn + b.bytesIn,
    bytesOut: a.bytesOut + b.bytesOut,
    active: a.active + b.active,
  };
}
