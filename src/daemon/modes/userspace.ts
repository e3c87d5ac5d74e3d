// The userspace mode's proxiers: per IP family, the proxy sockets (proxier/userspace/proxy, the
// data path) and a UserspaceProxier writing KUBE-PORTALS / KUBE-NODEPORT rules to them.
//
// The sockets bind --bind-address when it is a specific address of the family, else the
// family's any-address (upstream's listenIP); a loopback bind address is refused, as upstream
// (its REDIRECT/DNAT rules cannot reach a socket on lo).

import { networkInterfaces } from 'node:os';
import type { IPFamily } from '../../base/ip.ts';
import { parseIP } from '../../base/ip.ts';
import { Protocol } from '../../netlink/core/index.ts';
import { NftClient, nftFamilyOf } from '../../netlink/nftables/index.ts';
import { ConntrackClient } from '../../netlink/conntrack/index.ts';
import type { IptTable } from '../../netlink/nftables/iptables/rule.ts';
import type { UserspaceSample } from '../../metrics/index.ts';
import { UserspaceProxier } from '../../proxier/userspace/proxier.ts';
import { createProxyPorts } from '../../proxier/userspace/proxy/index.ts';
import type { ProxyPorts, ProxyStats } from '../../proxier/userspace/proxy/index.ts';
import { iptablesNftCodec } from '../../proxier/iptables-nft/index.ts';
import { TRACE_TRAITS } from '../../explain/modes.ts';
import { isUserspaceChain } from '../../proxier/userspace/rules.ts';
import type { ModeDefinition, ModeSet } from './types.ts';

/** '0.0.0.0' / '::', or the bind address when it is a specific address of `family`. */
export function listenIPOf(bindAddress: string, family: IPFamily): string {
  const any = family === 'IPv4' ? '0.0.0.0' : '::';
  const ip = parseIP(bindAddress);
  if (!ip || ip.family !== family || ip.text === any) return any;
  return ip.text;
}

/** The node's first global address of `family` ('' when none): the host rules' DNAT target without a Node IP. */
export function hostAddressOf(family: IPFamily): string {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) {
      if (a.internal || /^fe80:/i.test(a.address) || a.address.startsWith('169.254.')) continue;
      if ((a.family === 'IPv6') === (family === 'IPv6')) return a.address;
    }
  return '';
}

export function isLoopback(ip: string): boolean {
  return ip === '::1' || ip.startsWith('127.');
}

/** Sums a family's per-port counters for the metrics. */
export function sampleOf(family: IPFamily, s: ProxyStats): UserspaceSample {
  let accepted = 0;
  let failedOver = 0;
  let refused = 0;
  let overBudget = 0;
  let bytesIn = 0;
  let bytesOut = 0;
  for (const p of [...s.perPort.values(), s.retiredOther]) {
    accepted += p.accepted;
    failedOver += p.failedOver;
    refused += p.refused;
    overBudget += p.overBudget;
    bytesIn += p.bytesIn;
    bytesOut += p.bytesOut;
  }
  return {
    family,
    activeConnections: s.activeConnections,
    activeUdpAssociations: s.activeUdpAssociations,
    accepted,
    failedOver,
    refused,
    overBudget,
    bytesIn,
    bytesOut,
  };
}

function buildUserspace(...[config, families, deps, sockets]: Parameters<ModeDefinition['build']>): ModeSet {
  if (isLoopback(config.bindAddress))
    throw new Error(`--bind-address ${config.bindAddress}: the userspace mode cannot proxy on localhost (as upstream)`);
  const { open, close } = sockets;
  const proxiers = new Map<IPFamily, UserspaceProxier>();
  const ports = new Map<IPFamily, ProxyPorts>();
  // UDP entries still leading to a socket that moved (a restart) are deleted after each sync.
  const conntrack = new ConntrackClient(open(Protocol.NETFILTER, { recvMessageBytes: 65536 }));
  for (const family of families) {
    const listenIP = listenIPOf(config.bindAddress, family);
    const p = createProxyPorts({
      family,
      listenIP,
      ...(config.portRange ? { portRange: config.portRange } : {}),
      udpIdleTimeoutMs: config.udpIdleTimeoutMs,
      logger: deps.logger.child({ component: 'userspace-proxy', family }),
      clock: deps.clock,
      ...(deps.descriptorBudget ? { budget: deps.descriptorBudget } : {}),
    });
    ports.set(family, p);
    const conn = open(Protocol.NETFILTER);
    const nftFamily = nftFamilyOf(family);
    const tables: IptTable[] = ['nat', 'filter'];
    const clients = new Map(
      tables.map((table) => [table, new NftClient({ family: nftFamily, table, transport: conn })]),
    );
    proxiers.set(
      family,
      new UserspaceProxier({
        family,
        ports: p,
        listenIP,
        clients,
        sender: clients.get('nat')!,
        codec: iptablesNftCodec(family),
        logger: deps.logger,
        maxBatchBytes: conn.maxBatchBytes,
        hostAddress: () => hostAddressOf(family),
        conntrack,
      }),
    );
  }
  let closing: Promise<void> | undefined;
  const closeAll = (): Promise<void> => {
    for (const p of proxiers.values()) p.close();
    closing ??= Promise.all([...ports.values()].map((p) => p.close())).then(() => close());
    return closing;
  };
  return {
    mode: 'userspace',
    proxiers,
    preflight: () => {
      deps.logger.info('userspace mode: Service traffic is proxied through sockets of this process', {
        bindAddress: config.bindAddress,
        portRange: config.portRange ? `${config.portRange.first}-${config.portRange.last}` : 'kernel-chosen',
      });
      return Promise.resolve();
    },
    close: () => void closeAll(),
    shutdown: closeAll,
    proxyStats: () => [...ports].map(([family, p]) => sampleOf(family, p.stats())),
  };
}

export const userspaceMode: ModeDefinition = {
  name: 'userspace',
  build: buildUserspace,
  // Upstream's KUBE-PORTALS-* / KUBE-NODEPORT-* chains carry our names.
  leftovers: { ownsChain: isUserspaceChain, dropSetRules: false, ipvsState: 'remove', removeNftablesModeTable: true },
  // Its chains carry upstream's userspace names, which --cleanup's sweep of upstream's state removes.
  cleanupSteps: () => Promise.resolve([]),
  metrics: { groups: [], noLocalEndpointsPerPort: true },
  proxiesThroughSockets: () => true,
  traceTraits: TRACE_TRAITS.userspace,
};
