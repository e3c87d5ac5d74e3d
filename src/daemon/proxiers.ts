// The proxiers of the selected mode, one per IP family, on their own netlink sockets in this
// process's network namespace. How each mode is built is its definition's (modes/); this file
// owns the sockets and the start: the mode's checks, then the removal of what other modes and
// upstream left (cleanup.ts), then the mode's own init.

import type { IPFamily } from '../base/ip.ts';
import type { ProxyConfig } from '../config/index.ts';
import { connect, connectWithPort } from '../netlink/core/index.ts';
import type { SocketOptions } from '../netlink/core/index.ts';
import { removeOtherModesLeftovers } from './cleanup.ts';
import { MODES } from './modes/index.ts';
import type { ProxierDeps, ProxierSet, Sockets } from './modes/index.ts';

/** Sockets with the per-exchange time-out, all closed by close(). */
function socketsOf(timeoutMs: number): Sockets {
  const conns: { close(): void }[] = [];
  return {
    open: (protocol: number, opts: SocketOptions = {}) => {
      const c = connect(protocol, { timeoutMs, ...opts });
      conns.push(c);
      return c;
    },
    openWithPort: (protocol: number, opts: SocketOptions = {}) => {
      const r = connectWithPort(protocol, { timeoutMs, ...opts });
      conns.push(r.conn);
      return r;
    },
    close: () => {
      for (const c of conns.splice(0)) c.close();
    },
  };
}

export function buildProxiers(config: ProxyConfig, families: readonly IPFamily[], deps: ProxierDeps): ProxierSet {
  const def = MODES[config.mode];
  const sockets = socketsOf(deps.timeoutMs ?? 30_000);
  let set;
  try {
    set = def.build(config, families, deps, sockets);
  } catch (e) {
    sockets.close();
    throw e;
  }
  const { preflight, init, ...rest } = set;
  const leftoverDeps = { logger: deps.logger, excludeCIDRs: config.ipvs.excludeCIDRs };
  return {
    ...rest,
    init: async (signal) => {
      await preflight?.(signal);
      await removeOtherModesLeftovers(def.leftovers, leftoverDeps);
      await init?.(signal);
    },
  };
}
