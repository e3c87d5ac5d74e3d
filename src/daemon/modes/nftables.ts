// nftables mode: one NftablesProxier per family in its own table `ip|ip6 kube-proxy-ts`, the
// drift watch on nf_tables announcements, and (KubeProxyNFTablesLocalhostNodePorts) the
// localhost node-port listeners.

import { Protocol } from '../../netlink/core/index.ts';
import { NftClient, nftFamilyOf } from '../../netlink/nftables/index.ts';
import { RouteClient } from '../../netlink/route/index.ts';
import type { IPFamily } from '../../base/ip.ts';
import { NftablesProxier, TABLE } from '../../proxier/nftables/index.ts';
import { NftDriftWatch } from '../../proxier/nftables/drift-watch.ts';
import { FullSyncPause } from '../../proxier/drift/pausable.ts';
import type { Proxier } from '../../proxier/types.ts';
import { TRACE_TRAITS } from '../../explain/modes.ts';
import type { Logger } from '../../base/logger.ts';
import { localhostNodePortsEnabled, localhostNodePortsFor } from '../localhost-nodeports-set.ts';
import { lbOption } from '../../config/load-balancing-option.ts';
import type { ModeDefinition, ModeSet } from './types.ts';

/** Listens to nf_tables announcements of others' changes to our tables; not fatal when it cannot. */
function nftDriftWatch(
  families: readonly IPFamily[],
  ownPorts: ReadonlySet<number>,
  pause: FullSyncPause,
  logger: Logger,
): NonNullable<ModeSet['watchDrift']> {
  return (onDrift, syncing) =>
    pause.open(
      () => new NftDriftWatch({ families: families.map(nftFamilyOf), ownPorts, onDrift, syncing, logger }),
      logger,
    );
}

/**
 * The reader socket's receive buffer (the connection's recvMessageBytes): the kernel sizes
 * dump datagrams after it, up to 32 KiB. Its dump replies are the only datagrams it gets.
 */
const DUMP_RECV_BYTES = 65536;

export const nftablesMode: ModeDefinition = {
  name: 'nftables',
  build(config, families, deps, sockets) {
    const route = new RouteClient(sockets.open(Protocol.ROUTE));
    const localhost = localhostNodePortsFor(config, deps);
    const ownPorts = new Set<number>();
    // The drift watch stops listening during the cold start (proxier/drift/pausable.ts).
    const pause = new FullSyncPause();
    const proxiers = new Map<IPFamily, Proxier>();
    for (const family of families) {
      // Its port id marks the kernel's announcements of our own changes (drift-watch.ts).
      const { conn, port } = sockets.openWithPort(Protocol.NETFILTER);
      ownPorts.add(port);
      const nft = new NftClient({ family: nftFamilyOf(family), table: TABLE, transport: conn });
      // A full sync's dumps on a socket of their own (NftablesProxierOptions.reader), read in
      // the largest datagrams the kernel sends: it walks a set from its start for each one.
      const reader = new NftClient({
        family: nftFamilyOf(family),
        table: TABLE,
        transport: sockets.open(Protocol.NETFILTER, { recvMessageBytes: DUMP_RECV_BYTES }),
      });
      const nftProxier = new NftablesProxier({
        nft,
        reader,
        logger: deps.logger,
        masqueradeBit: config.masqueradeBit,
        localAddresses: () => route.nodeAddresses(family),
        serviceTraffic: config.kubeProxyTS.serviceTrafficMetrics,
        // Without it a full sync is one transaction, which the socket refuses (EMSGSIZE) once
        // it passes the batch limit: about 12,000 Services x 10 endpoints on an 8 MiB socket.
        maxBatchBytes: conn.maxBatchBytes,
        onFullSync: pause.firstFullSyncOnly(),
        localhostNodePorts: localhost.enabled,
        ...lbOption(config),
      });
      proxiers.set(family, localhost.enabled ? localhost.wrap(nftProxier, family) : nftProxier);
    }
    return {
      mode: 'nftables',
      proxiers,
      close: localhost.enabled ? () => void localhost.close().then(sockets.close) : sockets.close,
      watchDrift: nftDriftWatch(families, ownPorts, pause, deps.logger),
      ...(localhost.enabled
        ? { localhostNodePorts: localhost.metrics, shutdown: () => localhost.close().then(sockets.close) }
        : {}),
    };
  },
  // Our own table carries our own name: every state of upstream's goes.
  leftovers: { ownsChain: () => false, dropSetRules: false, ipvsState: 'remove', removeNftablesModeTable: false },
  cleanupSteps(open, deps) {
    const families: readonly IPFamily[] = ['IPv4', 'IPv6'];
    return Promise.resolve(
      families.map((family) => {
        const nft = new NftClient({ family: nftFamilyOf(family), table: TABLE, transport: open(Protocol.NETFILTER) });
        const p = new NftablesProxier({ nft, logger: deps.logger });
        return { what: `nftables table ${nft.scope.family} ${TABLE}`, run: () => p.cleanup() };
      }),
    );
  },
  metrics: {
    groups: ['nftables-sync'],
    committed(metrics, family, report) {
      if (report.cleanupFailed === true) metrics.nftablesCleanupFailuresTotal.inc({ ip_family: family });
    },
    loopFailed(metrics, families) {
      for (const f of families) metrics.nftablesSyncFailuresTotal.inc({ ip_family: f });
    },
    noLocalEndpointsPerPort: true,
  },
  // The localhost node-port listeners (KubeProxyNFTablesLocalhostNodePorts) are such sockets.
  proxiesThroughSockets: localhostNodePortsEnabled,
  traceTraits: TRACE_TRAITS.nftables,
};
