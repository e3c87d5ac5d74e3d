// A service port's UDP socket, as upstream's udpProxySocket: each client address:port gets an
// association, a socket connected to the endpoint the balancer chose. Datagrams from the client
// go out on it; the endpoint's replies are sent back to the client from the service socket, so
// that the kernel's conntrack entry of the KUBE-PORTALS redirect un-NATs them to come from the
// Service's address and port.
//
// An association closes after udpIdleTimeoutMs without a datagram either way (--udp-timeout,
// upstream 250 ms), or when its socket reports an error (ICMP port unreachable: the next
// datagram of that client starts a new association on the next endpoint). Each one holds a
// descriptor, so a port keeps at most maxAssociations (default 4096; upstream had no bound):
// the least recently created gives way to a new client. Associations and the service socket
// also take a descriptor each of the daemon's budget (descriptor-budget.ts): past it a new
// client's datagram is dropped and counted (overBudget).

import { createSocket } from 'node:dgram';
import type { RemoteInfo, Socket } from 'node:dgram';
import type { Clock, TimerHandle } from '../../../base/clock.ts';
import type { DescriptorBudget } from '../../../base/descriptor-budget.ts';
import { RoundRobinBalancer } from './balancer.ts';
import type { PortCounters, RateLimitedLog } from './counters.ts';
import type { ProxyPortSpec } from './types.ts';

export const DEFAULT_MAX_UDP_ASSOCIATIONS = 4096;
/** Datagrams a new association holds while its socket connects. */
const PENDING_LIMIT = 16;

export interface UdpProxyOptions {
  readonly type: 'udp4' | 'udp6';
  readonly listenIP: string;
  readonly idleTimeoutMs: number;
  readonly maxAssociations: number;
  readonly clock: Clock;
  readonly rateLog: RateLimitedLog;
  readonly counters: PortCounters;
  readonly budget: DescriptorBudget;
}

interface Association {
  readonly conn: Socket;
  readonly clientIP: string;
  lastActivity: number;
  /** Datagrams waiting for connect(); undefined once connected. */
  pending: Buffer[] | undefined;
  timer: TimerHandle | undefined;
}

export class UdpProxy {
  readonly protocol = 'UDP';
  readonly balancer: RoundRobinBalancer;
  private name: string;
  private socket: Socket | undefined;
  private readonly assocs = new Map<string, Association>();
  /** Clients whose association failed: their next one skips session affinity. */
  private readonly failed = new Set<string>();
  private readonly o: UdpProxyOptions;

  constructor(spec: ProxyPortSpec, o: UdpProxyOptions) {
    this.o = o;
    this.name = spec.name;
    this.balancer = new RoundRobinBalancer(o.clock, spec.backends, spec.affinitySeconds);
  }

  async listen(port: number): Promise<number> {
    const socket = createSocket({ type: this.o.type, ipv6Only: this.o.type === 'udp6' });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ port, address: this.o.listenIP, exclusive: true }, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    socket.on('message', (msg, rinfo) => this.fromClient(msg, rinfo));
    socket.on('error', (err) =>
      this.o.rateLog.warn(`${this.name}/udp`, 'UDP service socket error', { service: this.name, error: err.message }),
    );
    this.socket = socket;
    this.o.budget.force(1);
    return socket.address().port;
  }

  update(spec: ProxyPortSpec): void {
    this.name = spec.name;
    this.balancer.update(spec.backends, spec.affinitySeconds);
  }

  /** Closes the service socket and every association (replies would have no socket to leave from). */
  destroy(): void {
    if (this.socket !== undefined) {
      this.socket.close();
      this.socket = undefined;
      this.o.budget.release(1);
    }
    for (const key of [...this.assocs.keys()]) this.drop(key);
  }

  get associations(): number {
    return this.assocs.size;
  }

  private fromClient(msg: Buffer, rinfo: RemoteInfo): void {
    const c = this.o.counters;
    c.bytesIn += msg.length;
    const key = `${rinfo.address}|${rinfo.port}`;
    let a = this.assocs.get(key);
    if (!a) {
      a = this.associate(key, rinfo);
      if (!a) return;
    }
    a.lastActivity = this.o.clock.now();
    if (a.pending) {
      if (a.pending.length < PENDING_LIMIT) a.pending.push(msg);
    } else a.conn.send(msg);
  }

  private associate(key: string, rinfo: RemoteInfo): Association | undefined {
    const reset = this.failed.delete(rinfo.address);
    const backend = this.balancer.next(rinfo.address, reset);
    if (!backend || !this.socket) {
      this.o.counters.refused++;
      return undefined;
    }
    if (this.assocs.size >= this.o.maxAssociations) {
      this.o.rateLog.warn(`${this.name}/udp-full`, 'Too many UDP associations; closing the oldest', {
        service: this.name,
        max: this.o.maxAssociations,
      });
      this.drop(this.assocs.keys().next().value!);
    }
    if (!this.o.budget.tryAcquire(1, this.assocs.size)) {
      this.o.counters.overBudget++;
      this.o.rateLog.warn(
        'budget/udp',
        'The userspace proxy is out of its descriptor budget; dropping new UDP clients',
        {
          service: this.name,
          budget: this.o.budget.limit,
        },
      );
      return undefined;
    }
    const conn = createSocket({ type: this.o.type });
    const a: Association = {
      conn,
      clientIP: rinfo.address,
      lastActivity: this.o.clock.now(),
      pending: [],
      timer: undefined,
    };
    this.assocs.set(key, a);
    this.o.counters.accepted++;
    this.o.counters.active++;
    const service = this.socket;
    conn.on('message', (reply) => {
      a.lastActivity = this.o.clock.now();
      this.o.counters.bytesOut += reply.length;
      service.send(reply, rinfo.port, rinfo.address);
    });
    conn.on('error', () => {
      if (this.assocs.get(key) !== a) return;
      this.failed.add(rinfo.address);
      if (this.failed.size > this.o.maxAssociations) this.failed.clear();
      this.drop(key);
    });
    conn.connect(backend.port, backend.ip, () => {
      const queued = a.pending ?? [];
      a.pending = undefined;
      for (const m of queued) conn.send(m);
    });
    this.arm(key, a, this.o.idleTimeoutMs);
    return a;
  }

  /** Checks idleness when the timeout could have passed; re-arms for the rest otherwise (no timer per datagram). */
  private arm(key: string, a: Association, ms: number): void {
    a.timer = this.o.clock.setTimer(ms, () => {
      const idle = this.o.clock.now() - a.lastActivity;
      if (idle >= this.o.idleTimeoutMs) this.drop(key);
      else this.arm(key, a, this.o.idleTimeoutMs - idle);
    });
  }

  private drop(key: string): void {
    const a = this.assocs.get(key);
    if (!a) return;
    this.assocs.delete(key);
    a.timer?.cancel();
    a.conn.removeAllListeners('message');
    a.conn.on('error', () => {});
    try {
      a.conn.close();
    } catch {
      // already closed by an error
    }
    this.o.counters.active--;
    this.o.budget.release(1);
  }
}
