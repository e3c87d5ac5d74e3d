// Connecting a client to an endpoint, upstream's TryConnectEndpoints: up to four attempts with
// growing timeouts (EndpointDialTimeouts: 250 ms, 500 ms, 1 s, 2 s), each on the balancer's
// next choice with sessionAffinityReset after a failure. A refusing or silent endpoint costs
// the client latency, not an error, as long as another endpoint answers.

import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { Clock } from '../../../base/clock.ts';
import type { RoundRobinBalancer } from './balancer.ts';
import type { PortCounters, RateLimitedLog } from './counters.ts';
import type { ProxyBackend } from './types.ts';

export const ENDPOINT_DIAL_TIMEOUTS_MS: readonly number[] = [250, 500, 1000, 2000];
/** TCP keep-alive on both sockets of a proxied connection: dead peers are found, not kept. */
export const KEEPALIVE_INITIAL_DELAY_MS = 60_000;

export interface DialContext {
  readonly name: string;
  readonly balancer: RoundRobinBalancer;
  readonly clock: Clock;
  readonly counters: PortCounters;
  readonly rateLog: RateLimitedLog;
}

/**
 * The connected endpoint socket for a client, or undefined: no endpoint, every attempt failed,
 * or the client went away meanwhile (`client.destroyed`; the attempt in flight is cut short).
 */
export async function dialEndpoint(ctx: DialContext, client: Socket): Promise<Socket | undefined> {
  const clientIP = client.remoteAddress ?? '';
  let reset = false;
  let current: Socket | undefined;
  const abandon = (): void => {
    current?.destroy();
  };
  client.once('close', abandon);
  try {
    for (const timeoutMs of ENDPOINT_DIAL_TIMEOUTS_MS) {
      const backend = ctx.balancer.next(clientIP, reset);
      if (!backend || client.destroyed) return undefined;
      current = openSocket(backend);
      const err = await connected(current, timeoutMs, ctx.clock);
      if (client.destroyed) {
        current.destroy();
        return undefined;
      }
      if (!err) return current;
      current.destroy();
      const code = (err as NodeJS.ErrnoException).code ?? err.message;
      if (code === 'EMFILE' || code === 'ENFILE') {
        // Our own shortage, not the endpoint's fault: another endpoint would fail the same way.
        ctx.rateLog.warn(`${ctx.name}/dial/${code}`, 'Out of file descriptors dialing an endpoint', {
          service: ctx.name,
          error: code,
        });
        return undefined;
      }
      ctx.rateLog.warn(`${ctx.name}/dial/${code}`, 'Dial to an endpoint failed; trying the next one', {
        service: ctx.name,
        endpoint: `${backend.ip}:${backend.port}`,
        error: code,
      });
      ctx.counters.failedOver++;
      reset = true;
    }
    return undefined;
  } finally {
    client.off('close', abandon);
  }
}

function openSocket(b: ProxyBackend): Socket {
  return connect({
    host: b.ip,
    port: b.port,
    allowHalfOpen: true,
    noDelay: true,
    keepAlive: true,
    keepAliveInitialDelay: KEEPALIVE_INITIAL_DELAY_MS,
  });
}

/** Resolves undefined once connected, or the error (a timeout included). */
function connected(s: Socket, timeoutMs: number, clock: Clock): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const done = (err: Error | undefined): void => {
      timer.cancel();
      s.off('connect', onConnect);
      s.off('error', onError);
      s.off('close', onClose);
      resolve(err);
    };
    const onConnect = (): void => done(undefined);
    const onError = (e: Error): void => done(e);
    const onClose = (): void => done(Object.assign(new Error('closed while connecting'), { code: 'ECONNABORTED' }));
    const timer = clock.setTimer(timeoutMs, () =>
      done(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })),
    );
    s.once('connect', onConnect);
    s.once('error', onError);
    s.once('close', onClose);
  });
}
