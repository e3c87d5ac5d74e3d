// IPVS mode: one IpvsProxier per family on shared IPVS, ipset and route sockets, its
// iptables-nft companion rules (CompanionWriter), and drift watches on the companion chains
// and kube-ipvs0.

import { errorMessage } from '../../base/errors.ts';
import type { Clock } from '../../base/clock.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import { Protocol } from '../../netlink/core/index.ts';
import type { NetlinkConnection } from '../../netlink/core/index.ts';
import { IpsetClient } from '../../netlink/ipset/index.ts';
import { IpvsClient } from '../../netlink/ipvs/index.ts';
import type { IpvsService } from '../../netlink/ipvs/index.ts';
import { NftClient, nftFamilyOf } from '../../netlink/nftables/index.ts';
import { RouteClient } from '../../netlink/route/index.ts';
import { CompanionWriter, IpvsProxier, RecordingSysctl } from '../../proxier/ipvs/index.ts';
import { ChainDriftWatch } from '../../proxier/drift/chain-watch.ts';
import { LinkDriftWatch } from '../../proxier/drift/link-watch.ts';
import type { Proxier, SyncReport } from '../../proxier/types.ts';
import type { ProxyMetrics } from '../../metrics/index.ts';
import { TRACE_TRAITS } from '../../explain/modes.ts';
import { isIpvsChain } from '../../leftovers/iptables.ts';
import type { CleanupStep } from '../../leftovers/steps.ts';
import { lbOption } from '../../config/load-balancing-option.ts';
import type { ModeDefinition, ModeSet, ProxierDeps } from './types.ts';

const sec = (ms: number): number => Math.round(ms / 1000);

/**
 * The iptables-nft companion rules of IPVS mode (KUBE-SERVICES, KUBE-POSTROUTING, ...) in the
 * tables iptables-nft uses, so iptables-nft-save shows them as upstream's. The daemon writes
 * them; --cleanup removes them before the ipsets they reference (else IPSET_ERR_BUSY).
 */
export function companionWriter(
  family: IPFamily,
  ipset: IpsetClient,
  open: (protocol: number) => NetlinkConnection,
): CompanionWriter {
  const nftFamily = nftFamilyOf(family);
  return new CompanionWriter(family, {
    nat: new NftClient({ family: nftFamily, table: 'nat', transport: open(Protocol.NETFILTER) }),
    filter: new NftClient({ family: nftFamily, table: 'filter', transport: open(Protocol.NETFILTER) }),
    ipset,
  });
}

/**
 * IPVS mode's drift watches: the companion chains (nf_tables announcements) and kube-ipvs0
 * (rtnetlink). IPVS virtual servers and ipsets are not announced: the periodic sync repairs them.
 */
function ipvsDriftWatch(
  list: readonly IpvsProxier[],
  w: {
    nfPorts: ReadonlySet<number>;
    routePorts: ReadonlySet<number>;
    onDrift: (why: string) => void;
    syncing: () => boolean;
  },
  deps: ProxierDeps,
): { close(): void } {
  const common = { onDrift: w.onDrift, syncing: w.syncing, logger: deps.logger };
  const watches: { close(): void }[] = [];
  try {
    const targets = new Map(list.map((p) => [nftFamilyOf(p.family), p]));
    watches.push(new ChainDriftWatch({ ...common, targets, ownPorts: w.nfPorts }));
  } catch (err) {
    // Not fatal: the periodic full sync still repairs drift, only later.
    deps.logger.warn('Cannot listen to nf_tables changes; drift is repaired by the periodic sync only', { err });
  }
  try {
    const families = list.map((p) => p.family);
    watches.push(new LinkDriftWatch({ ...common, targets: list, families, ownPorts: w.routePorts }));
  } catch (err) {
    deps.logger.warn('Cannot listen to rtnetlink changes; kube-ipvs0 is repaired by the periodic sync only', { err });
  }
  return { close: () => watches.forEach((x) => x.close()) };
}

/** A kernel without IPVS has no virtual servers: listing them yields nothing. */
class AbsentIpvs extends IpvsClient {
  override listServices(): Promise<IpvsService[]> {
    return Promise.resolve([]);
  }
}

/** --cleanup, per family: companion rules, virtual servers, ipsets and kube-ipvs0 (IpvsProxier.cleanup). */
async function ipvsCleanupSteps(
  open: (protocol: number) => NetlinkConnection,
  deps: { logger: Logger; clock: Clock },
): Promise<CleanupStep[]> {
  const genl = open(Protocol.GENERIC);
  let ipvs = new IpvsClient(genl);
  try {
    await ipvs.familyId();
  } catch (e) {
    deps.logger.debug('No IPVS in this kernel; no virtual servers to remove', { err: errorMessage(e) });
    ipvs = new AbsentIpvs(genl);
  }
  const route = new RouteClient(open(Protocol.ROUTE));
  const ipset = new IpsetClient(open(Protocol.NETFILTER));
  const families: readonly IPFamily[] = ['IPv4', 'IPv6'];
  return families.map((family) => {
    const companion = companionWriter(family, ipset, open);
    const p = new IpvsProxier(
      { family },
      { ipvs, ipset, route, sysctl: new RecordingSysctl(), clock: deps.clock, logger: deps.logger, companion },
    );
    return {
      what: `ipvs mode objects (${family}: companion rules, virtual servers, ipsets, kube-ipvs0)`,
      run: () => p.cleanup(),
    };
  });
}

/**
 * Upstream's IPVS mode counts a failed iptables-restore of its companion rules in
 * kubeproxy_sync_proxy_rules_iptables_restore_failures_total; ours writes them over nfnetlink,
 * and a failed write fails the sync with the report saying so.
 */
export function countIpvsSync(metrics: ProxyMetrics, family: IPFamily, e: unknown): void {
  const report = (e as { report?: SyncReport } | undefined)?.report;
  if (report?.companionFailed === true) metrics.iptablesRestoreFailuresTotal.inc({ ip_family: family });
}

function buildIpvs(...[config, families, deps, sockets]: Parameters<ModeDefinition['build']>): ModeSet {
  const proxiers = new Map<IPFamily, Proxier>();
  // Port ids of the sockets whose changes are announced (companion rules, kube-ipvs0): the
  // drift watches pass over our own (proxier/drift/).
  const nfPorts = new Set<number>();
  const routePorts = new Set<number>();
  const openOwn = (ports: Set<number>) => (protocol: number) => {
    const { conn, port } = sockets.openWithPort(protocol);
    ports.add(port);
    return conn;
  };
  const route = new RouteClient(openOwn(routePorts)(Protocol.ROUTE));
  const ipvsList: IpvsProxier[] = [];
  const ipvs = new IpvsClient(sockets.open(Protocol.GENERIC));
  const ipset = new IpsetClient(sockets.open(Protocol.NETFILTER));
  for (const family of families) {
    const companion = companionWriter(family, ipset, openOwn(nfPorts));
    const p = new IpvsProxier(
      {
        family,
        scheduler: config.ipvs.scheduler,
        ...lbOption(config),
        strictARP: config.ipvs.strictARP,
        excludeCIDRs: config.ipvs.excludeCIDRs,
        tcpTimeoutSeconds: sec(config.ipvs.tcpTimeoutMs),
        tcpFinTimeoutSeconds: sec(config.ipvs.tcpFinTimeoutMs),
        udpTimeoutSeconds: sec(config.ipvs.udpTimeoutMs),
      },
      {
        ipvs,
        ipset,
        route,
        sysctl: deps.sysctl,
        clock: deps.clock,
        logger: deps.logger,
        companion,
        masqueradeBit: config.masqueradeBit,
      },
    );
    ipvsList.push(p);
    proxiers.set(family, p);
  }
  return {
    mode: 'ipvs',
    proxiers,
    preflight: async () => {
      // Asked first, so a kernel without IPVS is named as such (not as a missing sysctl).
      try {
        await ipvs.familyId();
      } catch (e) {
        throw new Error(`IPVS mode is unavailable: ${errorMessage(e)} (is module ip_vs loadable?)`, { cause: e });
      }
    },
    init: async (signal) => {
      for (const p of ipvsList) await p.init(signal);
    },
    close: sockets.close,
    periodicFull: true,
    watchDrift: (onDrift, syncing) => ipvsDriftWatch(ipvsList, { nfPorts, routePorts, onDrift, syncing }, deps),
  };
}

export const IPVS_DEPRECATION =
  "The ipvs proxier has been deprecated and will be disabled by default in Kubernetes 1.40 and removed in Kubernetes 1.43. Migrate to the 'nftables' proxier instead.";

export const ipvsMode: ModeDefinition = {
  name: 'ipvs',
  build: buildIpvs,
  // Upstream's IPVS-mode chains, virtual servers, ipsets and kube-ipvs0 carry our names.
  leftovers: { ownsChain: isIpvsChain, dropSetRules: false, ipvsState: 'own', removeNftablesModeTable: true },
  cleanupSteps: ipvsCleanupSteps,
  metrics: {
    // The restore failures only: its companion rules are iptables rules.
    groups: ['iptables-restore'],
    failed: countIpvsSync,
    // Upstream's IPVS proxier counts Services.
    noLocalEndpointsPerPort: false,
  },
  proxiesThroughSockets: () => false,
  deprecation: { reason: 'IPVSDeprecation', message: IPVS_DEPRECATION },
  traceTraits: TRACE_TRAITS.ipvs,
};
