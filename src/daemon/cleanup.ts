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
// Before ours, upstream kube-proxy's leftovers (leftovers/upstream.ts, CLEANUP_POLICY): its nftables
// tables `ip|ip6 kube-proxy`, its iptables-mode and IPVS-mode KUBE-* chains and the jumps to
// them, and the legacy-iptables check; its virtual servers, ipsets and kube-ipvs0 carry the
// names of ours and go with them.
// Each mode's steps are its definition's (modes/, in CLEANUP_ORDER). Starting a mode removes
// what the other modes and upstream left (removeOtherModesLeftovers, the mode's LeftoverPolicy).

import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import { connect, Protocol } from '../netlink/core/index.ts';
import type { NetlinkConnection } from '../netlink/core/index.ts';
import { NftClient, nftFamilyOf } from '../netlink/nftables/index.ts';
import { NftablesProxier, TABLE } from '../proxier/nftables/index.ts';
import { IPTABLES_RECV_BYTES } from '../proxier/iptables/index.ts';
import { removeTraceTables } from '../live-trace/tables.ts';
import { cleanUpstreamLeftovers, leftoverSteps, openLeftoverClients } from '../leftovers/upstream.ts';
import { CLEANUP_POLICY, type LeftoverPolicy } from '../leftovers/policy.ts';
import { runCleanupSteps, type CleanupStep } from '../leftovers/steps.ts';
import { summarize, takeInventory } from '../leftovers/inventory.ts';
import { CLEANUP_ORDER } from './modes/index.ts';

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

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
  const close = (): void => {
    upstream.close();
    for (const c of conns.splice(0)) c.close();
  };
  try {
    const steps: CleanupStep[] = leftoverSteps(CLEANUP_POLICY, upstream.clients, { logger: deps.logger });
    for (const mode of CLEANUP_ORDER) steps.push(...(await mode.cleanupSteps(open, deps)));
    const traceConn = open(Protocol.NETFILTER);
    steps.push({
      what: 'trace --live tables (kube-proxy-ts-trace-*)',
      run: async () => void (await removeTraceTables(traceConn, { all: true, logger: deps.logger })),
    });
    return { steps, close };
  } catch (e) {
    close();
    throw e;
  }
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

/** The nftables mode's tables, when the starting mode is another. */
async function removeNftablesModeTables(logger: Logger): Promise<void> {
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
          await new NftablesProxier({ nft, logger }).cleanup();
          if (there) logger.info('Removed the nftables mode table', { table: `${nft.scope.family} ${TABLE}` });
        },
      };
    });
    const failures = await runCleanupSteps(steps, logger);
    if (failures.length > 0) logger.warn('Some leftovers of other modes remain', { failures: failures.join('; ') });
  } finally {
    for (const c of conns.splice(0)) c.close();
  }
}

/**
 * At start, with the starting mode's policy: removes what kube-proxy-ts's other modes and
 * upstream kube-proxy left. Our iptables and IPVS modes use upstream's names, so
 * leftovers/upstream.ts (it keeps what the policy says the mode owns, and looks for IPVS state
 * only where kube-ipvs0 shows it ran) removes both; only the nftables mode's table is ours alone.
 */
export async function removeOtherModesLeftovers(
  policy: LeftoverPolicy,
  deps: { logger: Logger; excludeCIDRs?: readonly string[] },
): Promise<void> {
  if (policy.removeNftablesModeTable) await removeNftablesModeTables(deps.logger);
  await cleanUpstreamLeftovers(policy, { logger: deps.logger, excludeCIDRs: deps.excludeCIDRs ?? [] });
}
