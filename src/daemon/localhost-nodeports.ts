// nftables mode's localhost NodePorts (KubeProxyNFTablesLocalhostNodePorts, upstream 1.37): the
// kernel cannot DNAT 127.0.0.1 / ::1 to a pod in this mode (no route_localnet equivalent), so
// with "localhost" (or a loopback CIDR) in nodePortAddresses a TCP listener of the userspace
// proxy's data path (proxier/userspace/proxy) takes each TCP node port on the family's
// loopback address and relays to the Service's endpoints. The listeners follow each sync of the
// family's nftables proxier, which this wraps; the descriptor budget is the userspace mode's.

import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import type { ChangeSet, DesiredState, ServicePortInfo } from '../model/index.ts';
import type { DescribeOptions, PortDescription, Proxier, SyncReport, TrafficSample } from '../proxier/types.ts';
import { localhostNodePortSpecs } from '../proxier/userspace/localhost-specs.ts';
import type { ProxyPorts } from '../proxier/userspace/proxy/index.ts';
import type { NftablesProxier } from '../proxier/nftables/index.ts';
import type { LocalhostRejectedSample } from '../metrics/localhost-nodeports.ts';

/** One family's listener figures (the kubeproxy_nftables_localhost_nodeport_* metrics). */
export interface LocalhostNodePortSample {
  readonly family: IPFamily;
  readonly listeners: number;
  readonly creationFailures: number;
}

export class LocalhostNodePortsProxier implements Proxier {
  readonly mode = 'nftables' as const;
  readonly describe?: (info: ServicePortInfo, opts?: DescribeOptions) => Promise<PortDescription>;
  readonly trafficCounters?: (signal?: AbortSignal) => Promise<readonly TrafficSample[]>;
  private readonly log: Logger;
  private listeners = 0;
  private creationFailures = 0;
  private applied = false;
  /** Node ports whose listener failed, with the error last logged for each (said once per error). */
  private failing = new Map<string, string>();

  private readonly inner: NftablesProxier;
  private readonly ports: ProxyPorts;
  private readonly family: IPFamily;

  constructor(inner: NftablesProxier, ports: ProxyPorts, family: IPFamily, logger: Logger) {
    this.inner = inner;
    this.ports = ports;
    this.family = family;
    this.log = logger.child({ component: 'localhost-nodeports', family });
    if (inner.describe) this.describe = inner.describe.bind(inner);
    if (inner.trafficCounters) this.trafficCounters = inner.trafficCounters.bind(inner);
  }

  async sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    const report = await this.inner.sync(desired, change, signal);
    // Node ports and endpoints move only with a changed service port (or a full sync, which
    // also retries listeners that failed): other syncs leave the listeners as they are.
    if (!this.applied || change.full || change.services.size > 0 || this.failing.size > 0) {
      await this.apply(desired);
      this.applied = true;
    }
    return report;
  }

  private async apply(desired: DesiredState): Promise<void> {
    const specs = localhostNodePortSpecs(desired);
    const r = await this.ports.apply(specs);
    const failing = new Map<string, string>();
    for (const spec of specs) {
      const err = r.errors.get(spec.id);
      if (!err) continue;
      this.creationFailures++;
      failing.set(spec.id, err.message);
      if (this.failing.get(spec.id) !== err.message)
        this.log.error('Failed to create localhost nodeport proxy', {
          protocol: spec.protocol,
          port: spec.listenPort,
          service: spec.name,
          err: err.message,
        });
    }
    this.failing = failing;
    if (r.ports.size !== this.listeners)
      this.log.info('Localhost nodeport listeners', { listeners: r.ports.size, failed: failing.size });
    this.listeners = r.ports.size;
  }

  cleanup(): Promise<void> {
    return this.inner.cleanup();
  }

  /** The ruleset's rejected packets on loopback node ports (UDP, SCTP), read now. */
  async rejected(): Promise<LocalhostRejectedSample[]> {
    return (await this.inner.localhostRejectedPackets()).map((r) => ({ family: this.family, ...r }));
  }

  sample(): LocalhostNodePortSample {
    return { family: this.family, listeners: this.listeners, creationFailures: this.creationFailures };
  }
}
