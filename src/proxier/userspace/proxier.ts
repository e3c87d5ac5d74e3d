// The userspace proxier of one IP family: per service port a proxy socket (proxy/, the data
// path) and upstream's KUBE-PORTALS / KUBE-NODEPORT rules sending the port's frontends to it,
// written over nf_tables netlink in iptables-nft form by the shared iptables-nft writer (../iptables-nft).
//
// Every sync is a full one: the sockets are brought to the desired ports first (apply() keeps
// a port's socket and number while its id stays, and swaps its backends in place), then the
// rules are diffed against what the kernel holds in our five chains and the built-in chains'
// jumps. The ruleset is a few rules per service port, so listing it each time is cheap, and a
// restart's rules (pointing at the previous process's ports) are replaced on the first sync.

import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import type { ChangeSet, DesiredState, ServicePortId, ServicePortInfo } from '../../model/index.ts';
import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { DescribeOptions, PortDescription, Proxier, SyncProblem, SyncReport } from '../types.ts';
import { IptablesNftWriter } from '../iptables-nft/index.ts';
import type { BatchSender, RuleCodec, TableClient, UnitSource } from '../iptables-nft/index.ts';
import { describeUserspacePort } from './describe.ts';
import { NodePortClaims } from './node-port-claims.ts';
import { proxySpecs } from './specs.ts';
import { deleteStaleUdp } from './stale-udp.ts';
import type { FlowTable, UdpFrontends } from './stale-udp.ts';
import type { ProxyPorts } from './proxy/types.ts';
import { CHAINS, hostIPOf, isUserspaceChain, jumps, portalComment, servicePortRules } from './rules.ts';
import type { RuleContext } from './rules.ts';
import type { NodePortClaim } from './node-port-claims.ts';

export interface UserspaceProxierOptions {
  readonly family: IPFamily;
  /** The proxy sockets of this family (their listenIP is the bind address). */
  readonly ports: ProxyPorts;
  /** '0.0.0.0' / '::' or --bind-address: REDIRECT when any, else DNAT to it (as upstream). */
  readonly listenIP: string;
  /** Clients bound to (ip|ip6, nat) and (…, filter). */
  readonly clients: ReadonlyMap<IptTable, TableClient>;
  readonly sender: BatchSender;
  readonly codec: RuleCodec;
  readonly logger: Logger;
  readonly maxBatchBytes?: number;
  readonly now?: () => number;
  /**
   * An address of the node of this family, for the host rules when the Node object gives none
   * (upstream's ChooseHostInterface); '' when there is none.
   */
  readonly hostAddress?: () => string;
  /**
   * The conntrack table: UDP entries still leading to a socket that moved are deleted after
   * the rules are written (absent: not done).
   */
  readonly conntrack?: FlowTable;
}

/** What the last successful sync wrote for a service port (for explain). */
interface Written {
  readonly proxyPort: number;
  readonly rules: readonly IptRule[];
}

export class UserspaceProxier implements Proxier {
  readonly mode = 'userspace' as const;
  private readonly o: UserspaceProxierOptions;
  private readonly log: Logger;
  private readonly now: () => number;
  /** Every sync a full one against the kernel: no mirror kept. */
  private readonly writer: IptablesNftWriter;
  private written = new Map<string, Written>();
  private readonly claims: NodePortClaims;
  /** The proxy port of each UDP service port after the last sync. */
  private udpPorts = new Map<string, number>();

  constructor(o: UserspaceProxierOptions) {
    this.o = o;
    this.log = o.logger.child({ proxier: 'userspace', family: o.family });
    this.claims = new NodePortClaims(o.family, o.listenIP);
    this.now = o.now ?? (() => performance.now());
    this.writer = new IptablesNftWriter({
      clients: o.clients,
      sender: o.sender,
      codec: o.codec,
      isOurs: isUserspaceChain,
      logger: this.log,
      ...(o.maxBatchBytes !== undefined ? { maxBatchBytes: o.maxBatchBytes } : {}),
      now: this.now,
      halfBatches: true,
    });
  }

  async sync(desired: DesiredState, _change: ChangeSet, signal: AbortSignal): Promise<SyncReport> {
    if (desired.family !== this.o.family)
      throw new Error(`an ${this.o.family} proxier was given ${desired.family} state`);
    const t0 = this.now();
    const errors: SyncProblem[] = [];
    const specs = proxySpecs(desired, (name) =>
      this.log.debug('SCTP service port skipped: the userspace mode proxies TCP and UDP only', { service: name }),
    );
    const applied = await this.o.ports.apply(specs);
    for (const [id, err] of applied.errors) {
      const name = specs.find((s) => s.id === id)?.name ?? id;
      errors.push({ what: `${name}: no proxy socket, its rules are not written`, cause: err });
    }
    const ctx: RuleContext = {
      family: this.o.family,
      listenIP: this.o.listenIP,
      hostIP: hostIPOf(this.o.listenIP, desired.node.primaryIP || (this.o.hostAddress?.() ?? '')),
    };
    if (ctx.hostIP === '' && specs.length > 0)
      errors.push({
        what: `no node IP of ${this.o.family} (node status or --bind-address): the node's own traffic to Services is not proxied`,
      });
    const unclaimed = await this.claimNodePorts(desired, applied.ports);
    for (const [id, err] of unclaimed) {
      const info = desired.services.get(id as ServicePortId);
      errors.push({ what: `${info ? portalComment(info) : id}: its node port is not proxied`, cause: err });
    }
    const written = new Map<string, Written>();
    const units: UnitSource[] = [];
    for (const [id, info] of desired.services) {
      const proxyPort = applied.ports.get(id);
      if (proxyPort === undefined) continue;
      // As upstream: a node port it could not claim gets no rules (something else holds it).
      const rules = servicePortRules(unclaimed.has(id) ? { ...info, nodePort: 0 } : info, proxyPort, ctx);
      written.set(id, { proxyPort, rules });
      units.push({ id, unchanged: false, unit: () => ({ chains: [], rules }) });
    }
    const planned = this.now();
    const tk = this.now();
    const r = await this.writer.writeFull(
      { skeleton: { chains: [], shared: CHAINS, rules: jumps() }, units, trust: false },
      signal,
    );
    this.written = written;
    await this.forgetMovedUdp(desired, written, errors);
    const kernelMs = this.now() - tk;
    return {
      full: true,
      servicesChanged: written.size,
      kernelMs,
      planMs: Math.max(0, planned - t0),
      errors,
      batches: r.batches,
      longestBatchMs: r.longestBatchMs,
    };
  }

  /** Deletes the conntrack entries of UDP service ports whose socket is new since the last sync. */
  private async forgetMovedUdp(
    desired: DesiredState,
    written: Map<string, Written>,
    errors: SyncProblem[],
  ): Promise<void> {
    const now = new Map<string, number>();
    const moved: UdpFrontends[] = [];
    for (const [id, w] of written) {
      const info = desired.services.get(id as ServicePortId);
      if (info?.protocol !== 'UDP') continue;
      now.set(id, w.proxyPort);
      if (this.udpPorts.get(id) === w.proxyPort) continue;
      const ips = [info.clusterIP, ...info.externalIPs, ...info.loadBalancerVIPs].filter((ip) => ip !== '');
      moved.push({
        portals: ips.map((ip) => ({ ip, port: info.port })),
        nodePort: info.nodePort,
        proxyPort: w.proxyPort,
      });
    }
    if (this.o.conntrack && moved.length > 0) {
      try {
        const n = await deleteStaleUdp(this.o.conntrack, this.o.family, moved);
        if (n > 0) this.log.debug('Deleted conntrack entries of UDP sockets that moved', { entries: n });
      } catch (e) {
        // Retried at the next sync: udpPorts is only updated on success.
        errors.push({ what: 'conntrack entries of moved UDP sockets not deleted', cause: e });
        return;
      }
    }
    this.udpPorts = now;
  }

  /** Holds the node ports of the service ports that have a proxy socket; returns those it could not. */
  private claimNodePorts(desired: DesiredState, ports: ReadonlyMap<string, number>): Promise<Map<string, Error>> {
    const wanted: NodePortClaim[] = [];
    for (const [id, info] of desired.services) {
      if (info.nodePort === 0 || info.protocol === 'SCTP' || !ports.has(id)) continue;
      wanted.push({ protocol: info.protocol, port: info.nodePort, owner: id });
    }
    return this.claims.sync(wanted);
  }

  describe(info: ServicePortInfo, opts?: DescribeOptions): Promise<PortDescription> {
    const w = this.written.get(info.id);
    return describeUserspacePort(
      info,
      { clients: this.o.clients, family: this.o.family, listenIP: this.o.listenIP, ...(w ? { written: w } : {}) },
      opts,
    );
  }

  /** Releases the node ports it holds (daemon exit; the proxy sockets are the daemon's to close). */
  close(): void {
    this.claims.close();
  }

  /** Our jumps, then our chains; the sockets stay (the daemon closes them on exit). */
  async cleanup(): Promise<void> {
    await this.writer.cleanup();
    this.written = new Map();
  }
}
