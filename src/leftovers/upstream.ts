// Start-up cleanup of other proxies' state, as upstream's platformCleanup does when the mode
// changes, and the upstream part of --cleanup. Each kind of state is one small step; the
// starting mode's LeftoverPolicy (policy.ts) decides which run, because in some modes upstream's
// names are ours:
//
//   upstream's state                          nftables  ipvs               iptables           userspace   --cleanup
//   nftables tables `ip|ip6 kube-proxy`       removed   removed            removed            removed     removed
//   iptables-mode KUBE-* chains (+ jumps)     removed   shared names kept  kept (ours)        removed     removed
//   IPVS-mode KUBE-* chains (+ jumps)         removed   kept (ours)        shared names kept  removed     removed
//   KUBE-PORTALS-*, KUBE-NODEPORT-* (+ jumps) removed   removed            removed            kept (ours) removed
//   KUBE-* ipsets                             removed   kept (ours)        removed            removed     removed
//   IPVS virtual servers, kube-ipvs0          removed   kept (ours)        removed            removed     ipvs cleanup
//   legacy-iptables KUBE-* rules                    detected and named for the operator, every mode
//
// Our own nftables table is `kube-proxy-ts`, so upstream's `kube-proxy` tables are never ours.
// Order: nftables and iptables rules first, since a rule matching an ipset keeps it busy.

import { errorMessage } from '../base/errors.ts';
import { existsSync } from 'node:fs';
import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import { connect, isNotFound, Protocol } from '../netlink/core/index.ts';
import type { NetlinkConnection } from '../netlink/core/index.ts';
import { IpsetClient } from '../netlink/ipset/index.ts';
import { IpvsClient } from '../netlink/ipvs/index.ts';
import { NftClient } from '../netlink/nftables/index.ts';
import type { Family } from '../netlink/nftables/index.ts';
import { RouteClient } from '../netlink/route/index.ts';
import type { CleanupStep } from './steps.ts';
import type { LeftoverPolicy } from './policy.ts';
import { IPTABLES_TABLES, sweepPolicy, sweepTable } from './iptables.ts';
import { IPTABLES_RECV_BYTES } from '../proxier/iptables/index.ts';
import { removeIpvsLeftovers, removeUpstreamIpsets } from './ipvs.ts';
import { warnAboutLegacyIptables } from './legacy.ts';
import type { LegacyProbe } from './legacy.ts';

/** Upstream's nftables-mode table name (pkg/proxy/nftables kubeProxyTable). */
export const UPSTREAM_NFT_TABLE = 'kube-proxy';

export interface LeftoverClients {
  /** A client bound to (family, table). */
  nft(family: Family, table: string): NftClient;
  /** undefined: IPVS is not loaded, so there are no virtual servers. */
  ipvs: IpvsClient | undefined;
  /** undefined: ip_set is not loaded, so there are no sets. */
  ipset: IpsetClient | undefined;
  route: RouteClient;
}

export interface LeftoverOptions {
  logger: Logger;
  /** --ipvs-exclude-cidrs: virtual servers there are never upstream's. */
  excludeCIDRs?: readonly string[];
  legacyProbe?: LegacyProbe;
}

const NFT_FAMILIES: readonly { family: Family; ip: IPFamily }[] = [
  { family: 'ip', ip: 'IPv4' },
  { family: 'ip6', ip: 'IPv6' },
];

/** Deletes upstream's nftables table of one family; true when there was one. */
export async function removeUpstreamNftTable(client: NftClient): Promise<boolean> {
  const tx = client.newTransaction();
  tx.delete({ kind: 'table' });
  try {
    await client.run(tx);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

/** The steps for the starting mode's policy (or --cleanup's), in order. */
export function leftoverSteps(policy: LeftoverPolicy, c: LeftoverClients, o: LeftoverOptions): CleanupStep[] {
  const log = o.logger;
  const steps: CleanupStep[] = [];
  for (const { family } of NFT_FAMILIES) {
    steps.push({
      what: `upstream kube-proxy nftables table ${family} ${UPSTREAM_NFT_TABLE}`,
      run: async () => {
        if (await removeUpstreamNftTable(c.nft(family, UPSTREAM_NFT_TABLE))) {
          log.info('Removed upstream kube-proxy nftables table', { table: `${family} ${UPSTREAM_NFT_TABLE}` });
        }
      },
    });
  }
  for (const { family } of NFT_FAMILIES) {
    for (const table of IPTABLES_TABLES) {
      steps.push({
        what: `upstream kube-proxy iptables-nft chains in ${family} ${table}`,
        run: async () => {
          const r = await sweepTable(c.nft(family, table), sweepPolicy(policy.ownsChain, policy.dropSetRules, table));
          for (const k of r.kept) {
            log.warn('Upstream kube-proxy chain kept: a foreign chain still jumps to it', { table: r.table, ...k });
          }
          if (r.removedChains.length === 0 && r.deletedRules === 0) return;
          const shown = r.removedChains.slice(0, 20).join(',') + (r.removedChains.length > 20 ? ',...' : '');
          log.info('Removed upstream kube-proxy iptables-nft chains', {
            table: r.table,
            chains: r.removedChains.length,
            names: shown,
            jumpRules: r.deletedRules,
          });
        },
      });
    }
  }
  if (policy.ipvsState === 'ipsets') {
    // The IPVS proxier's cleanup removes the virtual servers and kube-ipvs0 (ours and upstream's
    // alike); the sets go here, waiting for the rules just deleted to let go of them.
    steps.push({
      what: 'upstream kube-proxy ipsets',
      run: async () => {
        if (!c.ipset) return;
        const sets = await removeUpstreamIpsets(c.ipset);
        if (sets.length > 0) log.info('Removed upstream kube-proxy ipsets', { sets: sets.join(',') });
      },
    });
  } else if (policy.ipvsState === 'remove') {
    steps.push({
      what: 'upstream kube-proxy IPVS virtual servers, ipsets and kube-ipvs0',
      run: () =>
        removeIpvsLeftovers({
          ipvs: c.ipvs,
          ipset: c.ipset,
          route: c.route,
          excludeCIDRs: o.excludeCIDRs ?? [],
          logger: log,
        }),
    });
  }
  steps.push({
    what: 'legacy iptables check',
    run: async () => void warnAboutLegacyIptables(log, o.legacyProbe),
  });
  return steps;
}

/**
 * Whether a kernel module is loaded (or built in with parameters, as ip_set and ip_vs are).
 * Asking a missing generic-netlink family or nfnetlink subsystem makes the kernel load its
 * module: a node that never ran IPVS would get ip_vs and ip_set loaded by a mere look.
 */
export const moduleLoaded = (name: string): boolean => existsSync(`/sys/module/${name}`);

/** Kernel clients on sockets of their own in this network namespace; close() ends them. */
export async function openLeftoverClients(
  timeoutMs = 30_000,
  loaded: (module: string) => boolean = moduleLoaded,
): Promise<{ clients: LeftoverClients; close(): void }> {
  const conns: NetlinkConnection[] = [];
  const open = (protocol: number, recvMessageBytes?: number): NetlinkConnection => {
    const conn = connect(protocol, { timeoutMs, ...(recvMessageBytes ? { recvMessageBytes } : {}) });
    conns.push(conn);
    return conn;
  };
  const close = (): void => {
    for (const conn of conns.splice(0)) conn.close();
  };
  try {
    // Dumps of large tables in 32 KiB datagrams rather than 4 KiB (IPTABLES_RECV_BYTES).
    const nftConn = open(Protocol.NETFILTER, IPTABLES_RECV_BYTES);
    let ipvs: IpvsClient | undefined = loaded('ip_vs') ? new IpvsClient(open(Protocol.GENERIC)) : undefined;
    await ipvs?.familyId().catch(() => (ipvs = undefined));
    const clients: LeftoverClients = {
      nft: (family, table) => new NftClient({ family, table, transport: nftConn }),
      ipvs,
      ipset: loaded('ip_set') ? new IpsetClient(open(Protocol.NETFILTER)) : undefined,
      route: new RouteClient(open(Protocol.ROUTE)),
    };
    return { clients, close };
  } catch (e) {
    close();
    throw e;
  }
}

/**
 * At start, before the first sync: removes what other proxies left (see the table above).
 * Never stops the start: a step that fails is logged with what it could not remove, and the
 * others still run. Returns the failures.
 */
export async function cleanUpstreamLeftovers(policy: LeftoverPolicy, o: LeftoverOptions): Promise<string[]> {
  let opened: Awaited<ReturnType<typeof openLeftoverClients>>;
  try {
    opened = await openLeftoverClients();
  } catch (e) {
    o.logger.warn('Could not look for leftovers of another proxy', { err: e });
    return [`open netlink sockets: ${errorMessage(e)}`];
  }
  const { clients, close } = opened;
  const failures: string[] = [];
  try {
    for (const s of leftoverSteps(policy, clients, o)) {
      try {
        await s.run();
      } catch (e) {
        failures.push(`${s.what}: ${errorMessage(e)}`);
        o.logger.warn('Could not remove leftovers of another proxy', { what: s.what, err: e });
      }
    }
  } finally {
    close();
  }
  return failures;
}
