// Wiring of nftables mode's localhost NodePorts: with the KubeProxyNFTablesLocalhostNodePorts
// gate on, each family's nftables proxier is wrapped by a LocalhostNodePortsProxier whose
// listeners (the userspace proxy's data path, bound to 127.0.0.1 / ::1) follow its syncs; they
// open only where nodePortAddresses asks for loopback (the model's NodePortAddresses.localhost).

import type { IPFamily } from '../base/ip.ts';
import type { ProxyConfig } from '../config/index.ts';
import type { NftablesProxier } from '../proxier/nftables/index.ts';
import { createProxyPorts } from '../proxier/userspace/proxy/index.ts';
import type { ProxyPorts } from '../proxier/userspace/proxy/index.ts';
import { LocalhostNodePortsProxier } from './localhost-nodeports.ts';
import type { LocalhostNodePortMetrics, ProxierDeps } from './modes/types.ts';

export const LOCALHOST_NODEPORTS_GATE = 'KubeProxyNFTablesLocalhostNodePorts';

export interface LocalhostNodePortsSet {
  readonly enabled: boolean;
  wrap(p: NftablesProxier, family: IPFamily): LocalhostNodePortsProxier;
  readonly metrics: LocalhostNodePortMetrics;
  /** Closes every listener and its connections. */
  close(): Promise<void>;
}

/** In nftables mode (the only one that builds the set): whether the gate is on. */
export const localhostNodePortsEnabled = (config: Pick<ProxyConfig, 'featureGates'>): boolean =>
  config.featureGates[LOCALHOST_NODEPORTS_GATE] === true;

export function localhostNodePortsFor(config: ProxyConfig, deps: ProxierDeps): LocalhostNodePortsSet {
  const wrapped: LocalhostNodePortsProxier[] = [];
  const ports: ProxyPorts[] = [];
  let closing: Promise<void> | undefined;
  return {
    enabled: localhostNodePortsEnabled(config),
    wrap(p, family) {
      const listenIP = family === 'IPv4' ? '127.0.0.1' : '::1';
      const pp = createProxyPorts({
        family,
        listenIP,
        // Unused: every listener has its node port, and none is UDP.
        udpIdleTimeoutMs: config.udpIdleTimeoutMs > 0 ? config.udpIdleTimeoutMs : 250,
        logger: deps.logger.child({ component: 'localhost-nodeports', family }),
        clock: deps.clock,
        ...(deps.descriptorBudget ? { budget: deps.descriptorBudget } : {}),
      });
      ports.push(pp);
      const w = new LocalhostNodePortsProxier(p, pp, family, deps.logger);
      wrapped.push(w);
      return w;
    },
    metrics: {
      samples: () => wrapped.map((w) => w.sample()),
      rejected: async () => (await Promise.all(wrapped.map((w) => w.rejected()))).flat(),
    },
    close() {
      closing ??= Promise.all(ports.map((p) => p.close())).then(() => {});
      return closing;
    },
  };
}
