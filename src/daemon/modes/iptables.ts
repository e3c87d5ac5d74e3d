// iptables mode (upstream's default): one IptablesProxier per family writing upstream's KUBE-*
// chains through iptables-nft's tables, its nfacct counters, the canary and chain drift watches.

import type { Clock } from '../../base/clock.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Logger } from '../../base/logger.ts';
import { Protocol } from '../../netlink/core/index.ts';
import type { NetlinkConnection } from '../../netlink/core/index.ts';
import { NfacctClient } from '../../netlink/nfacct/index.ts';
import { NftClient, nftFamilyOf } from '../../netlink/nftables/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { RouteClient } from '../../netlink/route/index.ts';
import {
  iptablesNftCodec,
  IPTABLES_RECV_BYTES,
  IptablesProxier,
  isOurs,
  removeIptablesObjects,
  writerBudgets,
} from '../../proxier/iptables/index.ts';
import { ChainDriftWatch } from '../../proxier/drift/chain-watch.ts';
import { FullSyncPause } from '../../proxier/drift/pausable.ts';
import { SyncFailedError } from '../../proxier/types.ts';
import type { SyncReport } from '../../proxier/types.ts';
import type { ProxyMetrics } from '../../metrics/index.ts';
import { TRACE_TRAITS } from '../../explain/modes.ts';
import { isUpstreamIptablesChain } from '../../leftovers/iptables.ts';
import type { CleanupStep } from '../../leftovers/steps.ts';
import { checkLegacyIptables } from '../legacy-iptables.ts';
import { ensureNfacctObjects, nfacctReader, OUR_NFACCT_OBJECTS, removeNfacctObjects } from '../nfacct.ts';
import { lbOption } from '../../config/load-balancing-option.ts';
import type { ModeDefinition, ModeSet } from './types.ts';

const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

/** The iptables-nft clients of one family: nat, filter, mangle on one socket (the nat one also sends). */
export function iptablesClients(family: IPFamily, conn: NetlinkConnection): Map<IptTable, NftClient> {
  const nftFamily = nftFamilyOf(family);
  const tables: IptTable[] = ['nat', 'filter', 'mangle'];
  return new Map(tables.map((table) => [table, new NftClient({ family: nftFamily, table, transport: conn })]));
}

/**
 * SO_SNDBUF(FORCE) for the iptables mode's socket: 4 MiB, which the kernel doubles, so full-sync
 * batches of up to 8 MiB whatever net.core.wmem_max says (Debian's stock 212,992 would cut them
 * to 416 KiB). Cold full sync at 10,000 Services (test/bench/iptables-batch-size.ts, 2 runs on
 * a loaded machine): at the stock cap 286 batches and 8.6-10.1 s of system CPU (every commit
 * validates the table again); at 8 MiB 15 batches and 3.4-3.6 s; the whole ruleset in one
 * batch, as iptables-nft-restore sends it, 2.9-3.6 s but 2-3 s more user CPU and the nf_tables
 * lock held 4.7-7.3 s at once instead of at most 2.2 s. The receive buffer is forced alike
 * (16 MiB), so that a partial sync's echoes, budgeted at a quarter of the send buffer, fit.
 */
const IPTABLES_SEND_BYTES = 4 << 20;

/**
 * Upstream's iptables-mode sync metrics: the rule gauges after a sync, and for a failed one the
 * restore failures (the kernel refused a transaction) and partial-restore failures (a partial
 * sync failed; the next is full).
 */
export function countIptablesSync(
  metrics: ProxyMetrics | undefined,
  family: IPFamily,
  report: SyncReport | undefined,
  e?: unknown,
): void {
  if (!metrics) return;
  if (report?.iptables) {
    for (const [table, n] of Object.entries(report.iptables.total))
      metrics.iptablesRulesTotal.set({ ip_family: family, table }, n);
    for (const [table, n] of Object.entries(report.iptables.written))
      metrics.iptablesRulesLast.set({ ip_family: family, table }, n);
  }
  if (e instanceof SyncFailedError) {
    if (e.commitFailed) metrics.iptablesRestoreFailuresTotal.inc({ ip_family: family });
    if (e.partial) metrics.iptablesPartialRestoreFailuresTotal.inc({ ip_family: family });
  }
}

/** The chain drift watch of the iptables mode; not fatal when it cannot listen. */
function chainDriftWatch(
  proxiers: ReadonlyMap<IPFamily, IptablesProxier>,
  ownPorts: ReadonlySet<number>,
  pause: FullSyncPause,
  logger: Logger,
): NonNullable<ModeSet['watchDrift']> {
  return (onDrift, syncing) => {
    const targets = new Map([...proxiers].map(([f, p]) => [nftFamilyOf(f), p]));
    return pause.open(() => new ChainDriftWatch({ targets, ownPorts, onDrift, syncing, logger }), logger);
  };
}

function buildIptables(...[config, families, deps, sockets]: Parameters<ModeDefinition['build']>): ModeSet {
  const route = new RouteClient(sockets.open(Protocol.ROUTE));
  const proxiers = new Map<IPFamily, IptablesProxier>();
  const ownPorts = new Set<number>();
  // Filled by init(); each sync writes the counting rules of the objects in it.
  const nfacctCounters = new Set<string>();
  const nfacct = new NfacctClient(sockets.open(Protocol.NETFILTER));
  // The drift watch stops listening while a full sync of ours runs (proxier/drift/pausable.ts).
  const pause = new FullSyncPause();
  for (const family of families) {
    // A fixed receive buffer: the kernel then sends dumps in 32 KiB datagrams (IPTABLES_RECV_BYTES).
    // Forced buffers (IPTABLES_SEND_BYTES) keep full-sync batches large on stock wmem_max. Its
    // port id marks the kernel's announcements of our own changes (proxier/drift/chain-watch.ts).
    const { conn, port } = sockets.openWithPort(Protocol.NETFILTER, {
      recvMessageBytes: IPTABLES_RECV_BYTES,
      sendBufferBytes: IPTABLES_SEND_BYTES,
      forceBuffers: true,
    });
    ownPorts.add(port);
    const clients = iptablesClients(family, conn);
    proxiers.set(
      family,
      new IptablesProxier({
        family,
        clients,
        sender: clients.get('nat')!,
        codec: iptablesNftCodec(family),
        logger: deps.logger,
        masqueradeBit: config.masqueradeBit,
        localhostNodePorts: config.localhostNodePorts,
        nfacctCounters,
        localAddresses: () => route.nodeAddresses(family),
        sysctl: deps.sysctl,
        maxBatchBytes: conn.maxBatchBytes,
        clock: deps.clock,
        onFullSync: pause.onFullSync,
        ...lbOption(config),
        ...(deps.fullSyncPeriodMs !== undefined ? { rewritePeriodMs: deps.fullSyncPeriodMs } : {}),
      }),
    );
  }
  return {
    mode: 'iptables',
    proxiers,
    preflight: async () => {
      deps.logger.info(
        "iptables mode (upstream's default); nftables mode (--proxy-mode=nftables) is also available and syncs faster",
      );
      const findings = await checkLegacyIptables();
      for (const f of findings) if (!f.fatal) deps.logger.warn(f.message);
      const fatal = findings.filter((f) => f.fatal);
      if (fatal.length > 0) throw new Error(fatal.map((f) => f.message).join('; '));
    },
    init: async () => {
      await ensureNfacctObjects(nfacct, nfacctCounters, deps.logger);
      deps.onNfacct?.(nfacctReader(nfacct, nfacctCounters));
    },
    close: () => {
      for (const p of proxiers.values()) p.stop();
      sockets.close();
    },
    watch: (kick) => {
      for (const p of proxiers.values()) p.watch(kick);
    },
    watchDrift: chainDriftWatch(proxiers, ownPorts, pause, deps.logger),
  };
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
      const budget = writerBudgets(conn.maxBatchBytes).echo;
      await removeIptablesObjects(clients, clients.get('nat')!, iptablesNftCodec(family), isOurs, budget);
    },
  }));
}

export const iptablesMode: ModeDefinition = {
  name: 'iptables',
  build: buildIptables,
  // Upstream's iptables-mode chains carry our names; the IPVS form of a shared chain matches ipsets.
  leftovers: {
    ownsChain: isUpstreamIptablesChain,
    dropSetRules: true,
    ipvsState: 'remove',
    removeNftablesModeTable: true,
  },
  // The chains, then the nfacct objects: an object a rule still counts in cannot be deleted (EBUSY).
  cleanupSteps: (open: (protocol: number) => NetlinkConnection, deps: { logger: Logger; clock: Clock }) =>
    Promise.resolve([...iptablesModeSteps(open), nfacctStep(new NfacctClient(open(Protocol.NETFILTER)), deps.logger)]),
  metrics: {
    groups: ['iptables-sync'],
    failed: (metrics, family, e) => countIptablesSync(metrics, family, undefined, e),
    committed: (metrics, family, report) => countIptablesSync(metrics, family, report),
    noLocalEndpointsPerPort: true,
  },
  proxiesThroughSockets: () => false,
  traceTraits: TRACE_TRAITS.iptables,
};
