// --cleanup: remove everything any mode of kube-proxy-ts created, and nothing else, then
// exit. Safe to run twice (and on a node that never ran us): what is already gone, or a
// subsystem the kernel does not have, is not an error.
//
//   nftables mode: the tables `ip kube-proxy-ts` and `ip6 kube-proxy-ts` (everything of the
//                  mode lives in them, so deleting a table removes its chains, sets, maps);
//   ipvs mode:     through IpvsProxier.cleanup, per family: its iptables-nft companion rules
//                  (our KUBE-* chains and the jumps to them in `ip|ip6 nat` and `filter`,
//                  which reference the ipsets and so must go first), its virtual servers, its
//                  ipsets and the kube-ipvs0 dummy link. Without IPVS in the kernel there can
//                  be no virtual servers, so only the rules, the ipsets and the link are
//                  looked for.
//
//   iptables mode: (after the IPVS mode's) per family, the jumps to our KUBE-* chains in the built-in chains of
//                  `ip|ip6 nat/filter/mangle`, then those chains (tables and built-in chains
//                  stay: others share them); then its two nfacct objects, by name.
//
// nftables go first: a rule that references an ipset keeps the set busy.
//
// Before ours, upstream kube-proxy's leftovers (leftovers.ts, mode 'cleanup'): its nftables
// tables `ip|ip6 kube-proxy`, its iptables-mode and IPVS-mode KUBE-* chains and the jumps to
// them, and the legacy-iptables check; its virtual servers, ipsets and kube-ipvs0 carry the
// names of ours and go with them.
// Starting a mode removes what the other modes and upstream left (removeOtherModesLeftovers).

import { errorMessage } from '../base/errors.ts';
import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import { connect, Protocol } from '../netlink/core/index.ts';
import type { NetlinkConnection } from '../netlink/core/index.ts';
import { IpsetClient } from '../netlink/ipset/index.ts';
import { IpvsClient } from '../netlink/ipvs/index.ts';
import type { IpvsService } from '../netlink/ipvs/index.ts';
import { NftClient, nftFamilyOf } from '../netlink/nftables/index.ts';
import { RouteClient } from '../netlink/route/index.ts';
import { IpvsProxier, RecordingSysctl } from '../proxier/ipvs/index.ts';
import { NftablesProxier, TABLE } from '../proxier/nftables/index.ts';
import { removeTraceTables } from '../live-trace/tables.ts';
import type { Proxier } from '../proxier/types.ts';
import { cleanUpstreamLeftovers, leftoverSteps, openLeftoverClients } from '../leftovers/upstream.ts';
import { runCleanupSteps, type CleanupStep } from '../leftovers/steps.ts';
import { summarize, takeInventory } from '../leftovers/inventory.ts';
import { iptablesNftCodec, IPTABLES_RECV_BYTES, isOurs, removeIptablesObjects } from '../proxier/iptables/index.ts';
import { companionWriter, iptablesClients } from './proxiers.ts';
import { NfacctClient } from '../netlink/nfacct/index.ts';
import { OUR_NFACCT_OBJECTS, removeNfacctObjects } from './nfacct.ts';

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

/** A kernel without IPVS has no virtual servers: listing them yields nothing. */
class AbsentIpvs extends IpvsClient {
  override listServices(): Promise<IpvsService[]> {
    return Promise.resolve([]);
  }
}

/** The real steps, on netlink sockets in this process's network namespace. */
export async function kernelCleanupSteps(deps: {
  logger: Logger;
  clock: Clock;
}): Promise<{ steps: CleanupStep[]; close(): void }> {
  const conns: NetlinkConnection[] = [];
  const open = (protocol: number): NetlinkConnection => {
    // nf_tables dumps of large tables in 32 KiB datagrams rather than 4 KiB (IPTABLES_RECV_BYTES).
    const big = protocol === Protocol.NETFILTER ? { recvMessageBytes: IPTABLES_RECV_BYTES } : {};
    const c = connect(protocol, { timeoutMs: 30_000, ...big });
    conns.push(c);
    return c;
  };
  const upstream = await openLeftoverClients();
  const steps: CleanupStep[] = leftoverSteps('cleanup', upstream.clients, { logger: deps.logger });
  const proxierStep = (what: string, p: Proxier): CleanupStep => ({ what, run: () => p.cleanup() });
  for (const family of FAMILIES) {
    const nft = new NftClient({
      family: nftFamilyOf(family),
      table: TABLE,
      transport: open(Protocol.NETFILTER),
    });
    steps.push(
      proxierStep(`nftables table ${nft.scope.family} ${TABLE}`, new NftablesProxier({ nft, logger: deps.logger })),
    );
  }
  const traceConn = open(Protocol.NETFILTER);
  steps.push({
    what: 'trace --live tables (kube-proxy-ts-trace-*)',
    run: async () => void (await removeTraceTables(traceConn, { all: true, logger: deps.logger })),
  });
  const genl = open(Protocol.GENERIC);
  let ipvs = new IpvsClient(genl);
  try {
    await ipvs.familyId();
  } catch (e) {
    deps.logger.debug('No IPVS in this kernel; no virtual servers to remove', { err: errorMessage(e) });
    ipvs = new AbsentIpvs(genl);
  }
  const route = new RouteClient(open(Protocol.ROUTE));
  const ipsetConn = connect(Protocol.NETFILTER, { timeoutMs: 30_000 });
  conns.push(ipsetConn);
  const ipset = new IpsetClient(ipsetConn);
  for (const family of FAMILIES) {
    const companion = companionWriter(family, ipset, open);
    const p = new IpvsProxier(
      { family },
      { ipvs, ipset, route, sysctl: new RecordingSysctl(), clock: deps.clock, logger: deps.logger, companion },
    );
    steps.push(proxierStep(`ipvs mode objects (${family}: companion rules, virtual servers, ipsets, kube-ipvs0)`, p));
  }
  // After the IPVS mode's: its chains share names with ours, and those it does not share
  // (KUBE-NODE-PORT, KUBE-LOAD-BALANCER, ...) jump to shared ones (KUBE-MARK-MASQ), which
  // could not be deleted while they remain.
  steps.push(...iptablesModeSteps(open));
  // After the rules: an object a rule still counts in cannot be deleted (EBUSY).
  steps.push(nfacctStep(new NfacctClient(open(Protocol.NETFILTER)), deps.logger));
  return {
    steps,
    close: () => {
      upstream.close();
      for (const c of conns.splice(0)) c.close();
    },
  };
}

/**
 * --cleanup: 0 when everything of ours is gone, 1 otherwise (each failure logged). Ends with
 * one line saying what was removed, or that there was nothing to clean.
 */
export async function cleanupEverything(deps: { logger: Logger; clock: Clock }): Promise<number> {
  const { steps, close } = await kernelCleanupSteps(deps);
  const look = await openLeftoverClients();
  try {
    const before = await takeInventory(look.clients);
    const failures = await runCleanupSteps(steps, deps.logger);
    const summary = summarize(before, await takeInventory(look.clients));
    if (failures.length > 0) {
      deps.logger.error(`Cleanup incomplete (${failures.length} failed): ${summary}`, { failures: failures.length });
      return 1;
    }
    deps.logger.info(`Cleanup done: ${summary}`);
    return 0;
  } finally {
    look.close();
    close();
  }
}

/** iptables mode's nfacct objects (ours by name; nfacct.ts). */
export function nfacctStep(client: NfacctClient, logger: Logger): CleanupStep {
  return {
    what: `nfacct objects (${OUR_NFACCT_OBJECTS.join(', ')})`,
    run: async () => {
      const { removed, kept } = await removeNfacctObjects(client);
      if (removed.length > 0) logger.info('Removed the nfacct counters', { counters: removed.join(',') });
      if (kept.length > 0)
        logger.warn('nfacct counters kept: a rule of another program still counts in them', {
          counters: kept.join(','),
        });
    },
  };
}

/** iptables mode's chains and jumps, per family. */
export function iptablesModeSteps(open: (protocol: number) => NetlinkConnection): CleanupStep[] {
  return FAMILIES.map((family) => ({
    what: `iptables mode chains (${nftFamilyOf(family)} nat/filter/mangle KUBE-*)`,
    run: async () => {
      const conn = open(Protocol.NETFILTER);
      const clients = iptablesClients(family, conn);
      await removeIptablesObjects(clients, clients.get('nat')!, iptablesNftCodec(family), isOurs, {
        bytes: Math.floor(conn.maxBatchBytes / 2),
        echoBytes: Math.floor(conn.maxBatchBytes / 4),
      });
    },
  }));
}

/**
 * At start in `mode`: removes what kube-proxy-ts's other modes and upstream kube-proxy left.
 * Our iptables and IPVS modes use upstream's names, so leftovers.ts (mode-aware: it keeps what
 * `mode` itself owns, and looks for IPVS state only where kube-ipvs0 shows it ran) removes both;
 * only the nftables mode's table is ours alone.
 */
export async function removeOtherModesLeftovers(
  mode: string,
  deps: { logger: Logger; clock: Clock; excludeCIDRs?: readonly string[] },
): Promise<void> {
  if (mode !== 'nftables') {
    const conns: NetlinkConnection[] = [];
    try {
      const steps = FAMILIES.map((family): CleanupStep => {
        const transport = connect(Protocol.NETFILTER, { timeoutMs: 30_000 });
        conns.push(transport);
        const nft = new NftClient({ family: nftFamilyOf(family), table: TABLE, transport });
        return {
          what: `nftables mode table ${nft.scope.family} ${TABLE}`,
          run: async () => {
            const there = (await nft.listTables()).some((t) => t.family === nft.scope.family && t.name === TABLE);
            await new NftablesProxier({ nft, logger: deps.logger }).cleanup();
            if (there) deps.logger.info('Removed the nftables mode table', { table: `${nft.scope.family} ${TABLE}` });
          },
        };
      });
      const failures = await runCleanupSteps(steps, deps.logger);
      if (failures.length > 0)
        deps.logger.warn('Some leftovers of other modes remain', { failures: failures.join('; ') });
    } finally {
      for (const c of conns.splice(0)) c.close();
    }
  }
  await cleanUpstreamLeftovers(mode, { logger: deps.logger, excludeCIDRs: deps.excludeCIDRs ?? [] });
}
