// A service port's TCP listener: accepts, dials an endpoint (tcp-dial.ts) and splices the two
// sockets (tcp-splice.ts). Accepted sockets stay paused until their endpoint answers, so a
// client cannot make us buffer data we have nowhere to send.
//
// Each connection takes two descriptors of the daemon's budget (descriptor-budget.ts), the
// client's and the endpoint's, until both close; past the budget a new connection is reset at
// once and counted (overBudget), so a flood of connections cannot spend the descriptors that
// syncs, health checks and the API need, nor one port more than its share. The listener holds
// one, always granted.
//
// EMFILE/ENFILE on accept all the same (libuv already drops the pending connection so the loop
// does not spin): logged once per interval, and for SHED_MS the connections that still come in
// are reset at once instead of holding a descriptor each while their dial would fail for want
// of one.

import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import type { Clock } from '../../../base/clock.ts';
import type { DescriptorBudget } from '../../../base/descriptor-budget.ts';
import { RoundRobinBalancer } from './balancer.ts';
import type { PortCounters, RateLimitedLog } from './counters.ts';
import { dialEndpoint, KEEPALIVE_INITIAL_DELAY_MS } from './tcp-dial.ts';
import type { DialContext } from './tcp-dial.ts';
import { resetSocket, Splice } from './tcp-splice.ts';
import type { ProxyPortSpec } from './types.ts';

/** How long accepting is shed after EMFILE/ENFILE. */
export const SHED_MS = 1000;
/** Queue of connections the kernel completes before we accept them (the kernel caps it at somaxconn). */
const BACKLOG = 4096;

export interface TcpProxyOptions {
  readonly listenIP: string;
  readonly ipv6Only: boolean;
  readonly idleTimeoutMs: number;
  readonly clock: Clock;
  readonly rateLog: RateLimitedLog;
  readonly counters: PortCounters;
  readonly budget: DescriptorBudget;
}

/** Descriptors a proxied TCP connection holds: the client's and the endpoint's. */
const CONNECTION_DESCRIPTORS = 2;

export class TcpProxy {
  readonly protocol = 'TCP';
  readonly balancer: RoundRobinBalancer;
  private name: string;
  /** What every dial of this port needs, made once (not per connection). */
  private dial: DialContext;
  private server: Server | undefined;
  private readonly splices = new Set<Splice>();
  private readonly o: TcpProxyOptions;
  private shedUntil = 0;
  private closedBytesIn = 0;
  private closedBytesOut = 0;

  constructor(spec: ProxyPortSpec, o: TcpProxyOptions) {
    this.o = o;
    this.name = spec.name;
    this.balancer = new RoundRobinBalancer(o.clock, spec.backends, spec.affinitySeconds);
    this.dial = { ...o, name: spec.name, balancer: this.balancer };
  }

  /** Binds the port (0: the kernel picks); resolves the port bound, rejects with the bind error. */
  async listen(port: number): Promise<number> {
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (c) => this.accept(c));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(
        { port, host: this.o.listenIP, ipv6Only: this.o.ipv6Only, exclusive: true, backlog: BACKLOG },
        () => {
          server.off('error', reject);
          resolve();
        },
      );
    });
    server.on('error', (err) => this.onServerError(err));
    this.server = server;
    this.o.budget.force(1);
    return (server.address() as { port: number }).port;
  }

  update(spec: ProxyPortSpec): void {
    this.name = spec.name;
    if (this.dial.name !== spec.name) this.dial = { ...this.dial, name: spec.name };
    this.balancer.update(spec.backends, spec.affinitySeconds);
  }

  /** Stops accepting; live connections go on until they end (draining). */
  stopListening(): void {
    if (this.server === undefined) return;
    this.server.close();
    this.server = undefined;
    this.o.budget.release(1);
  }

  /** Stops accepting and resets every live connection. */
  destroy(): void {
    this.stopListening();
    for (const s of this.splices) s.reset();
  }

  get active(): number {
    return this.o.counters.active;
  }

  /** Bytes from / to clients, live connections included (read on demand, not counted per chunk). */
  bytes(): { in: number; out: number } {
    let bytesIn = this.closedBytesIn;
    let bytesOut = this.closedBytesOut;
    for (const s of this.splices) {
      bytesIn += s.client.bytesRead;
      bytesOut += s.client.bytesWritten;
    }
    return { in: bytesIn, out: bytesOut };
  }

  /** Bytes waiting in our write buffers over all live connections. */
  buffered(): number {
    let n = 0;
    for (const s of this.splices) n += s.buffered;
    return n;
  }

  private accept(client: Socket): void {
    const c = this.o.counters;
    c.accepted++;
    client.on('error', () => {});
    if (this.o.clock.now() < this.shedUntil) {
      c.refused++;
      resetSocket(client);
      return;
    }
    if (!this.o.budget.tryAcquire(CONNECTION_DESCRIPTORS, c.active * CONNECTION_DESCRIPTORS)) {
      c.overBudget++;
      resetSocket(client);
      this.o.rateLog.warn(
        'budget/tcp',
        'The userspace proxy is out of its descriptor budget; refusing new connections',
        {
          service: this.name,
          budget: this.o.budget.limit,
        },
      );
      return;
    }
    client.setKeepAlive(true, KEEPALIVE_INITIAL_DELAY_MS);
    c.active++;
    void dialEndpoint(this.dial, client).then(
      (upstream) => this.connected(client, upstream),
      () => this.connected(client, undefined),
    );
  }

  private connected(client: Socket, upstream: Socket | undefined): void {
    const c = this.o.counters;
    if (!upstream) {
      if (!client.destroyed) {
        c.refused++;
        if (this.balancer.size > 0)
          this.o.rateLog.warn(`${this.name}/refused`, 'No endpoint answered; resetting the client', {
            service: this.name,
          });
      }
      c.active--;
      this.o.budget.release(CONNECTION_DESCRIPTORS);
      resetSocket(client);
      return;
    }
    const splice = new Splice(client, upstream, this.o.idleTimeoutMs, {
      onClosed: (bytesIn, bytesOut) => {
        this.closedBytesIn += bytesIn;
        this.closedBytesOut += bytesOut;
        this.splices.delete(splice);
        c.active--;
        this.o.budget.release(CONNECTION_DESCRIPTORS);
      },
    });
    this.splices.add(splice);
  }

  private onServerError(err: Error): void {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EMFILE' || code === 'ENFILE') {
      this.shedUntil = this.o.clock.now() + SHED_MS;
      this.o.rateLog.warn(
        `${this.name}/accept/${code}`,
        'Out of file descriptors accepting; shedding new connections',
        {
          service: this.name,
          error: code,
          shedMs: SHED_MS,
        },
      );
      return;
    }
    this.o.rateLog.warn(`${this.name}/accept/${code}`, 'Accepting a connection failed', {
      service: this.name,
      error: code || err.message,
    });
  }
}
