// The proxiers of the selected mode, one per IP family, on their own netlink sockets in this
// process's network namespace. The only place that knows how each mode is built.

import { errorMessage } from '../base/errors.ts';
import type { Clock } from '../base/clock.ts';
import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import type { ProxyConfig } from '../config/index.ts';
import { connect, connectWithPort, Protocol } from '../netlink/core/index.ts';
import type { NetlinkConnection, SocketOptions } from '../netlink/core/index.ts';
import { IpsetClient } from '../netlink/ipset/index.ts';
import { IpvsClient } from '../netlink/ipvs/index.ts';
import { NftClient } from '../netlink/nftables/index.ts';
import { RouteClient } from '../netlink/route/index.ts';
import { CompanionWriter, IpvsProxier } from '../proxier/ipvs/index.ts';
import type { SysctlWriter } from '../proxier/ipvs/index.ts';
import { NftablesProxier, TABLE } from '../proxier/nftables/index.ts';
import { NftDriftWatch } from '../proxier/nftables/drift-watch.ts';
import { ChainDriftWatch } from '../proxier/drift/chain-watch.ts';
import { LinkDriftWatch } from '../proxier/drift/link-watch.ts';
import { FullSyncPause } from '../proxier/drift/pausable.ts';
import { iptablesNftCodec, IPTABLES_RECV_BYTES, IptablesProxier } from '../proxier/iptables/index.ts';
import type { IptTable } from '../netlink/nftables/iptables/rule.ts';
import { checkLegacyIptables } from './legacy-iptables.ts';
import { removeOtherModesLeftovers } from './cleanup.ts';
import type { Proxier } from '../proxier/types.ts';
import { userspaceSet } from './proxiers-userspace.ts';
import { localhostNodePortsFor, type LocalhostNodePortMetrics } from './localhost-nodeports-set.ts';
import type { DescriptorBudget } from '../base/descriptor-budget.ts';
import type { NfacctReader, UserspaceSample } from '../metrics/index.ts';
import { NfacctClient } from '../netlink/nfacct/index.ts';
import { ensureNfacctObjects, nfacctReader } from './nfacct.ts';

export interface ProxierSet {
  readonly mode: string;
  readonly proxiers: ReadonlyMap<IPFamily, Proxier>;
  /** Start-up checks (IPVS: kernel support, sysctls); rejects with what is missing. */
  init(signal?: AbortSignal): Promise<void>;
  /** Closes the netlink sockets. */
  close(): void;
  /**
   * Calls `onDrift` when someone else changes our kernel objects (nftables: our tables; iptables: our
   * chains; IPVS: the companion chains and kube-ipvs0; proxier/drift/).
   */
  watchDrift?(onDrift: (why: string) => void, syncing: () => boolean): { close(): void };
  /**
   * Every periodic sync is a full one that reads the kernel back (IPVS: virtual servers and ipsets
   * are never announced). Other modes hear drift and sync fully at most hourly (sync-loop.ts).
   */
  readonly periodicFull?: boolean;
  /** Modes that notice kernel drift between syncs (iptables: the canary chains) call `kick` to ask for a sync. */
  watch?(kick: () => void): void;
  /** userspace mode: the proxy sockets' counters per family, for the metrics. */
  proxyStats?(): readonly UserspaceSample[];
  /** nftables mode with KubeProxyNFTablesLocalhostNodePorts: the listeners' figures per family, for the metrics. */
  localhostNodePorts?: LocalhostNodePortMetrics;
  /** close(), awaited (userspace mode: the proxy sockets' listeners and connections end too). */
  shutdown?(): Promise<void>;
}

export interface ProxierDeps {
  logger: Logger;
  clock: Clock;
  sysctl: SysctlWriter;
  /** Per-exchange netlink time-out. Default 30 s. */
  timeoutMs?: number;
  /** The userspace proxy's share of RLIMIT_NOFILE (nofile.ts); unset: none (tests). */
  descriptorBudget?: DescriptorBudget;
  /** iptables mode: told once init() has made the nfacct objects (the metrics read them). */
  onNfacct?: (reader: NfacctReader) => void;
  /**
   * iptables mode: the full-sync period (KUBE_PROXY_TS_FULL_SYNC_PERIOD), after which a full
   * sync rewrites every chain instead of trusting the last; default an hour.
   */
  fullSyncPeriodMs?: number;
}

/** Modes this build can run; the others are a start-up error naming the mode. */
export const AVAILABLE_MODES: readonly string[] = ['nftables', 'ipvs', 'iptables', 'userspace'];

export class ModeUnavailableError extends Error {
  constructor(mode: string) {
    super(`${mode} mode is not available in this build yet (available: ${AVAILABLE_MODES.join(', ')})`);
    this.name = 'ModeUnavailableError';
  }
}

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
  const nftFamily = family === 'IPv4' ? 'ip' : 'ip6';
  return new CompanionWriter(family, {
    nat: new NftClient({ family: nftFamily, table: 'nat', transport: open(Protocol.NETFILTER) }),
    filter: new NftClient({ family: nftFamily, table: 'filter', transport: open(Protocol.NETFILTER) }),
    ipset,
  });
}

export function buildProxiers(config: ProxyConfig, families: readonly IPFamily[], deps: ProxierDeps): ProxierSet {
  const leftoverDeps = { logger: deps.logger, clock: deps.clock, excludeCIDRs: config.ipvs.excludeCIDRs };
  const timeoutMs = deps.timeoutMs ?? 30_000;
  const conns: { close(): void }[] = [];
  const open = (protocol: number, opts: SocketOptions = {}) => {
    const c = connect(protocol, { timeoutMs, ...opts });
    conns.push(c);
    return c;
  };
  const openWithPort = (protocol: number, opts: SocketOptions = {}) => {
    const r = connectWithPort(protocol, { timeoutMs, ...opts });
    conns.push(r.conn);
    return r;
  };
  const close = (): void => {
    for (const c of conns.splice(0)) c.close();
  };
  const proxiers = new Map<IPFamily, Proxier>();
  try {
    if (config.mode === 'nftables') {
      const route = new RouteClient(open(Protocol.ROUTE));
      const localhost = localhostNodePortsFor(config, deps);
      const ownPorts = new Set<number>();
      // The drift watch stops listening during the cold start (proxier/drift/pausable.ts).
      const pause = new FullSyncPause();
      for (const family of families) {
        // Its port id marks the kernel's announcements of our own changes (drift-watch.ts).
        const { conn, port } = connectWithPort(Protocol.NETFILTER, { timeoutMs });
        conns.push(conn);
        ownPorts.add(port);
        const nft = new NftClient({ family: family === 'IPv4' ? 'ip' : 'ip6', table: TABLE, transport: conn });
        const nftProxier = new NftablesProxier({
          nft,
          logger: deps.logger,
          masqueradeBit: config.masqueradeBit,
          localAddresses: () => route.nodeAddresses(family),
          serviceTraffic: config.kubeProxyTS.serviceTrafficMetrics,
          // Without it a full sync is one transaction, which the socket refuses (EMSGSIZE) once
          // it passes the batch limit: about 12,000 Services x 10 endpoints on an 8 MiB socket.
          maxBatchBytes: conn.maxBatchBytes,
          onFullSync: pause.firstFullSyncOnly(),
          localhostNodePorts: localhost.enabled,
        });
        proxiers.set(family, localhost.enabled ? localhost.wrap(nftProxier, family) : nftProxier);
      }
      const nftFamilies = families.map((f) => (f === 'IPv4' ? 'ip' : 'ip6'));
      const watchDrift = (onDrift: (why: string) => void, syncing: () => boolean): { close(): void } => {
        try {
          const w = new NftDriftWatch({ families: nftFamilies, ownPorts, onDrift, syncing, logger: deps.logger });
          const detach = pause.attach(w);
          return {
            close: () => {
              detach();
              w.close();
            },
          };
        } catch (err) {
          // Not fatal: the periodic full sync still repairs drift, only later.
          deps.logger.warn('Cannot listen to nf_tables changes; drift is repaired by the periodic sync only', { err });
          return { close: () => {} };
        }
      };
      const init = (): Promise<void> => removeOtherModesLeftovers('nftables', leftoverDeps);
      return {
        mode: config.mode,
        proxiers,
        init,
        close: localhost.enabled ? () => void localhost.close().then(close) : close,
        watchDrift,
        ...(localhost.enabled
          ? { localhostNodePorts: localhost.metrics, shutdown: () => localhost.close().then(close) }
          : {}),
      };
    }
    if (config.mode === 'iptables') return iptablesSet(config, families, deps, { open, openWithPort }, close);
    if (config.mode === 'userspace') return userspaceSet(config, families, deps, open, close);
    if (config.mode === 'ipvs') return ipvsSet(config, families, deps, { open, openWithPort }, close);
  } catch (e) {
    close();
    throw e;
  }
  throw new ModeUnavailableError(config.mode);
}

/** The iptables-nft clients of one family: nat, filter, mangle on one socket (the nat one also sends). */
export function iptablesClients(family: IPFamily, conn: NetlinkConnection): Map<IptTable, NftClient> {
  const nftFamily = family === 'IPv4' ? 'ip' : 'ip6';
  const tables: IptTable[] = ['nat', 'filter', 'mangle'];
  return new Map(tables.map((table) => [table, new NftClient({ family: nftFamily, table, transport: conn })]));
}

interface Sockets {
  open: (protocol: number, opts?: SocketOptions) => NetlinkConnection;
  openWithPort: (protocol: number, opts?: SocketOptions) => { conn: NetlinkConnection; port: number };
}

/** IPVS mode: one IpvsProxier per family on shared IPVS, ipset and route sockets. */
function ipvsSet(
  config: ProxyConfig,
  families: readonly IPFamily[],
  deps: ProxierDeps,
  { open, openWithPort }: Sockets,
  close: () => void,
): ProxierSet {
  const leftoverDeps = { logger: deps.logger, clock: deps.clock, excludeCIDRs: config.ipvs.excludeCIDRs };
  const proxiers = new Map<IPFamily, Proxier>();
  // Port ids of the sockets whose changes are announced (companion rules, kube-ipvs0): the
  // drift watches pass over our own (proxier/drift/).
  const nfPorts = new Set<number>();
  const routePorts = new Set<number>();
  const openOwn = (ports: Set<number>) => (protocol: number) => {
    const { conn, port } = openWithPort(protocol);
    ports.add(port);
    return conn;
  };
  const route = new RouteClient(openOwn(routePorts)(Protocol.ROUTE));
  const ipvsList: IpvsProxier[] = [];
  const ipvs = new IpvsClient(open(Protocol.GENERIC));
  const ipset = new IpsetClient(open(Protocol.NETFILTER));
  for (const family of families) {
    const companion = companionWriter(family, ipset, openOwn(nfPorts));
    const p = new IpvsProxier(
      {
        family,
        scheduler: config.ipvs.scheduler,
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
    mode: config.mode,
    proxiers,
    init: async (signal) => {
      // Asked first, so a kernel without IPVS is named as such (not as a missing sysctl).
      try {
        await ipvs.familyId();
      } catch (e) {
        throw new Error(`IPVS mode is unavailable: ${errorMessage(e)} (is module ip_vs loadable?)`, { cause: e });
      }
      await removeOtherModesLeftovers('ipvs', leftoverDeps);
      for (const p of ipvsList) await p.init(signal);
    },
    close,
    periodicFull: true,
    watchDrift: (onDrift, syncing) => ipvsDriftWatch(ipvsList, { nfPorts, routePorts, onDrift, syncing }, deps),
  };
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
    const targets = new Map(list.map((p) => [p.family === 'IPv4' ? 'ip' : 'ip6', p]));
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

function iptablesSet(
  config: ProxyConfig,
  families: readonly IPFamily[],
  deps: ProxierDeps,
  sockets: Sockets,
  close: () => void,
): ProxierSet {
  const { open, openWithPort } = sockets;
  const leftoverDeps = { logger: deps.logger, clock: deps.clock, excludeCIDRs: config.ipvs.excludeCIDRs };
  const route = new RouteClient(open(Protocol.ROUTE));
  const proxiers = new Map<IPFamily, IptablesProxier>();
  const ownPorts = new Set<number>();
  // Filled by init(); each sync writes the counting rules of the objects in it.
  const nfacctCounters = new Set<string>();
  const nfacct = new NfacctClient(open(Protocol.NETFILTER));
  // The drift watch stops listening while a full sync of ours runs (proxier/drift/pausable.ts).
  const pause = new FullSyncPause();
  for (const family of families) {
    // A fixed receive buffer: the kernel then sends dumps in 32 KiB datagrams (IPTABLES_RECV_BYTES).
    // Forced buffers (IPTABLES_SEND_BYTES) keep full-sync batches large on stock wmem_max. Its
    // port id marks the kernel's announcements of our own changes (proxier/drift/chain-watch.ts).
    const { conn, port } = openWithPort(Protocol.NETFILTER, {
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
        ...(deps.fullSyncPeriodMs !== undefined ? { rewritePeriodMs: deps.fullSyncPeriodMs } : {}),
      }),
    );
  }
  return {
    mode: 'iptables',
    proxiers,
    init: async () => {
      deps.logger.info(
        "iptables mode (upstream's default); nftables mode (--proxy-mode=nftables) is also available and syncs faster",
      );
      const findings = await checkLegacyIptables();
      for (const f of findings) if (!f.fatal) deps.logger.warn(f.message);
      const fatal = findings.filter((f) => f.fatal);
      if (fatal.length > 0) throw new Error(fatal.map((f) => f.message).join('; '));
      await removeOtherModesLeftovers('iptables', leftoverDeps);
      await ensureNfacctObjects(nfacct, nfacctCounters, deps.logger);
      deps.onNfacct?.(nfacctReader(nfacct, nfacctCounters));
    },
    close: () => {
      for (const p of proxiers.values()) p.stop();
      close();
    },
    watch: (kick) => {
      for (const p of proxiers.values()) p.watch(kick);
    },
    watchDrift: (onDrift, syncing) => {
      const targets = new Map([...proxiers].map(([f, p]) => [f === 'IPv4' ? 'ip' : 'ip6', p]));
      try {
        const w = new ChainDriftWatch({ targets, ownPorts, onDrift, syncing, logger: deps.logger });
        const detach = pause.attach(w);
        return {
          close: () => {
            detach();
            w.close();
          },
        };
      } catch (err) {
        // Not fatal: the periodic full sync still repairs drift of the shared chains, only later.
        deps.logger.warn('Cannot listen to nf_tables changes; drift is repaired by the periodic sync only', { err });
        return { close: () => {} };
      }
    },
  };
}
