// Per-Service health checks for externalTrafficPolicy=Local Services, on their
// healthCheckNodePort (upstream pkg/proxy/healthcheck/service_health.go). Cloud load
// balancers probe these to send traffic only to nodes with local endpoints:
//
//   200 when the Service has local endpoints and the proxy is healthy, 503 otherwise, with
//   {"service": {"namespace": ..., "name": ...}, "localEndpoints": N, "serviceProxyHealthy": bool}
//
// sync() opens listeners for new Services, moves them when the port changes and closes
// them for Services that are gone. A listen failure (port taken) is logged and retried on
// a timer and on every sync; it never fails the sync or the daemon.

import { asError } from '../base/errors.ts';
import { SerialQueue } from '../base/serial.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock, TimerHandle } from '../base/clock.ts';
import { nullLogger, type Logger } from '../base/logger.ts';
import { ConnectionSlots } from './connection-slots.ts';
import { SERVICE_HEALTH_SLOTS } from './http-limits.ts';
import { httpListen, sendJSON, type HttpListener, type ListenFn } from './http.ts';

export interface ServiceHealthEntry {
  /** spec.healthCheckNodePort. */
  port: number;
  /** Ready endpoints of the Service on this node. */
  localEndpoints: number;
}

export interface ServiceHealthOptions {
  /**
   * Addresses to listen on for every Service (node IPs per nodePortAddresses, as upstream's
   * service health server); default [''] = all. sync() may move them.
   */
  addresses?: readonly string[];
  /** The proxy's own health (ProxyHealth.isHealthy). */
  proxyHealthy: () => boolean;
  clock: Clock;
  listen?: ListenFn;
  logger?: Logger;
  /** Delay before retrying a listener that failed to open; default 5 s. */
  retryIntervalMs?: number;
  /** Called when a listener fails to open (for an event or a metric). */
  onListenError?: (service: string, port: number, err: Error) => void;
}

interface Instance {
  namespace: string;
  name: string;
  port: number;
  localEndpoints: number;
  listeners: HttpListener[];
  /** Set while the listeners are not open. */
  lastError: Error | undefined;
}

export interface ServiceHealthStatus {
  port: number;
  localEndpoints: number;
  listening: boolean;
  /** The bound ports, one per address. */
  boundPorts: number[];
  error?: string;
}

export class ServiceHealthServers {
  private addresses: readonly string[];
  private readonly proxyHealthy: () => boolean;
  private readonly clock: Clock;
  private readonly listen: ListenFn;
  private readonly log: Logger;
  private readonly retryMs: number;
  private readonly onListenError: ServiceHealthOptions['onListenError'];
  private readonly services = new Map<string, Instance>();
  private readonly serial = new SerialQueue();
  private retryTimer: TimerHandle | undefined;
  private closed = false;

  constructor(opts: ServiceHealthOptions) {
    this.addresses = opts.addresses !== undefined && opts.addresses.length > 0 ? [...opts.addresses] : [''];
    this.proxyHealthy = opts.proxyHealthy;
    this.clock = opts.clock;
    // One pool of connection slots for every Service's port (connection-slots.ts).
    this.listen = opts.listen ?? httpListen(new ConnectionSlots(SERVICE_HEALTH_SLOTS));
    this.log = opts.logger ?? nullLogger;
    this.retryMs = opts.retryIntervalMs ?? 5000;
    this.onListenError = opts.onListenError;
  }

  /**
   * Makes the open listeners match `services` ("namespace/name" -> port and local endpoint
   * count). Endpoint counts take effect at once; listeners open, move and close. Resolves
   * when done; never rejects for a listen failure.
   */
  sync(services: ReadonlyMap<string, ServiceHealthEntry>, addresses?: readonly string[]): Promise<void> {
    const snapshot = new Map(services);
    const where = addresses === undefined ? undefined : addresses.length > 0 ? [...addresses] : [''];
    return this.enqueue(async () => {
      if (where !== undefined && where.join(',') !== this.addresses.join(',')) await this.moveTo(where);
      await this.doSync(snapshot);
    });
  }

  /** The addresses every listener binds ('' = all), as the last sync set them. */
  listenAddresses(): readonly string[] {
    return this.addresses;
  }

  /** New addresses (the node's IPs changed): every listener reopens on them. */
  private async moveTo(addresses: string[]): Promise<void> {
    this.log.info('Service health checks listen on new addresses', {
      addresses: addresses.map((a) => (a === '' ? '*' : a)).join(','),
    });
    this.addresses = addresses;
    for (const inst of this.services.values()) {
      await this.closeInstance(inst);
      inst.lastError = new Error('not opened yet');
    }
  }

  /** Retries every listener that failed to open, now. */
  retryFailed(): Promise<void> {
    return this.enqueue(() => this.openFailed());
  }

  status(): Map<string, ServiceHealthStatus> {
    const out = new Map<string, ServiceHealthStatus>();
    for (const [key, inst] of this.services) {
      const s: ServiceHealthStatus = {
        port: inst.port,
        localEndpoints: inst.localEndpoints,
        listening: inst.lastError === undefined && inst.listeners.length > 0,
        boundPorts: inst.listeners.map((l) => l.port),
      };
      if (inst.lastError !== undefined) s.error = inst.lastError.message;
      out.set(key, s);
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.retryTimer?.cancel();
    this.retryTimer = undefined;
    await this.enqueue(async () => {
      for (const inst of this.services.values()) await this.closeInstance(inst);
      this.services.clear();
    });
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    return this.serial.run(task);
  }

  private async doSync(wanted: Map<string, ServiceHealthEntry>): Promise<void> {
    if (this.closed) return;
    for (const [key, inst] of [...this.services]) {
      const w = wanted.get(key);
      if (w === undefined || w.port !== inst.port) {
        this.log.debug('Closing service health check', {
          service: key,
          port: inst.port,
          reason: w === undefined ? 'gone' : `moved to ${w.port}`,
        });
        await this.closeInstance(inst);
        this.services.delete(key);
      } else {
        inst.localEndpoints = w.localEndpoints;
      }
    }
    for (const [key, w] of wanted) {
      if (this.services.has(key)) continue;
      const slash = key.indexOf('/');
      const inst: Instance = {
        namespace: slash < 0 ? '' : key.slice(0, slash),
        name: slash < 0 ? key : key.slice(slash + 1),
        port: w.port,
        localEndpoints: w.localEndpoints,
        listeners: [],
        lastError: new Error('not opened yet'),
      };
      this.services.set(key, inst);
    }
    await this.openFailed();
  }

  private async openFailed(): Promise<void> {
    if (this.closed) return;
    for (const [key, inst] of this.services) {
      const previous = inst.lastError;
      if (previous === undefined) continue;
      const first = previous.message === 'not opened yet';
      if (first) this.log.debug('Opening service health check', { service: key, port: inst.port });
      try {
        for (const addr of this.addresses)
          inst.listeners.push(await this.listen(addr, inst.port, (req, res) => this.answer(key, req, res)));
        inst.lastError = undefined;
        if (!first) this.log.info('Service health check listening after retry', { service: key, port: inst.port });
      } catch (e) {
        const err = asError(e);
        // Close what opened, so a retry (or another owner of the port) starts clean.
        await this.closeInstance(inst);
        const repeated = previous.message === err.message;
        inst.lastError = err;
        const fields = { service: key, port: inst.port, op: 'listen', err: err.message, retryInMs: this.retryMs };
        if (repeated) this.log.debug('Service health check still cannot listen', fields);
        else this.log.error('Failed to start service health check; will retry', fields);
        this.onListenError?.(key, inst.port, err);
      }
    }
    this.armRetry();
  }

  private armRetry(): void {
    const anyFailed = [...this.services.values()].some((i) => i.lastError !== undefined);
    if (!anyFailed || this.closed) {
      this.retryTimer?.cancel();
      this.retryTimer = undefined;
      return;
    }
    if (this.retryTimer !== undefined) return;
    this.retryTimer = this.clock.setTimer(this.retryMs, () => {
      this.retryTimer = undefined;
      void this.retryFailed();
    });
  }

  private async closeInstance(inst: Instance): Promise<void> {
    const ls = inst.listeners;
    inst.listeners = [];
    await Promise.all(
      ls.map((l) =>
        l.close().catch((err: unknown) =>
          this.log.warn('Closing service health check failed', {
            service: `${inst.namespace}/${inst.name}`,
            port: inst.port,
            err,
          }),
        ),
      ),
    );
  }

  private answer(key: string, req: IncomingMessage, res: ServerResponse): void {
    const inst = this.services.get(key);
    if (inst === undefined) {
      // A request racing a close; upstream logs and answers nothing useful either.
      res.writeHead(503);
      res.end();
      return;
    }
    const healthy = this.proxyHealthy();
    const count = inst.localEndpoints;
    const code = count !== 0 && healthy ? 200 : 503;
    // Upstream's body, byte for byte (a tab-indented JSON document).
    const body =
      `{\n\t"service": {\n\t\t"namespace": ${JSON.stringify(inst.namespace)},\n\t\t"name": ${JSON.stringify(inst.name)}\n\t},\n` +
      `\t"localEndpoints": ${count},\n\t"serviceProxyHealthy": ${healthy}\n}`;
    // Load balancers that weigh nodes by local endpoints read this header, as upstream sends it.
    sendJSON(req, res, code, body, { 'X-Load-Balancing-Endpoint-Weight': String(count) });
  }
}
