// The effective configuration back in KubeProxyConfiguration v1alpha1 form, for
// --write-config-to. Like upstream's internal -> v1alpha1 conversion, the resolved sync
// periods are written to every mode section, so the file means the same in any mode.
// Reading the output back yields the same ProxyConfig (tested).

import { stringify } from 'yaml';
import { formatDuration } from './duration.ts';
import { API_VERSION, KIND } from './schema.ts';
import type { ProxyConfig } from './types.ts';

export function toKubeProxyConfiguration(c: ProxyConfig): Record<string, unknown> {
  const d = formatDuration;
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    bindAddress: c.bindAddress,
    bindAddressHardFail: c.bindAddressHardFail,
    clientConnection: {
      acceptContentTypes: c.clientConnection.acceptContentTypes,
      burst: c.clientConnection.burst,
      contentType: c.clientConnection.contentType,
      kubeconfig: c.clientConnection.kubeconfig,
      qps: c.clientConnection.qps,
    },
    clusterCIDR: c.clusterCIDRs.join(','),
    configSyncPeriod: d(c.configSyncPeriodMs),
    conntrack: {
      maxPerCore: c.conntrack.maxPerCore,
      min: c.conntrack.min,
      tcpBeLiberal: c.conntrack.tcpBeLiberal,
      tcpCloseWaitTimeout: d(c.conntrack.tcpCloseWaitTimeoutMs),
      tcpEstablishedTimeout: d(c.conntrack.tcpEstablishedTimeoutMs),
      udpStreamTimeout: d(c.conntrack.udpStreamTimeoutMs),
      udpTimeout: d(c.conntrack.udpTimeoutMs),
    },
    detectLocal: { ...c.detectLocal },
    detectLocalMode: c.detectLocalMode,
    enableProfiling: c.enableProfiling,
    featureGates: { ...c.featureGates },
    healthzBindAddress: c.healthzBindAddress,
    hostnameOverride: c.hostnameOverride,
    iptables: {
      localhostNodePorts: c.localhostNodePorts,
      masqueradeAll: c.masqueradeAll,
      masqueradeBit: c.masqueradeBit,
      minSyncPeriod: d(c.minSyncPeriodMs),
      syncPeriod: d(c.syncPeriodMs),
    },
    ipvs: {
      excludeCIDRs: [...c.ipvs.excludeCIDRs],
      minSyncPeriod: d(c.minSyncPeriodMs),
      scheduler: c.ipvs.scheduler,
      strictARP: c.ipvs.strictARP,
      syncPeriod: d(c.syncPeriodMs),
      tcpFinTimeout: d(c.ipvs.tcpFinTimeoutMs),
      tcpTimeout: d(c.ipvs.tcpTimeoutMs),
      udpTimeout: d(c.ipvs.udpTimeoutMs),
    },
    logging: { format: c.logging.format, verbosity: c.logging.verbosity },
    metricsBindAddress: c.metricsBindAddress,
    mode: c.mode,
    nftables: {
      masqueradeAll: c.masqueradeAll,
      masqueradeBit: c.masqueradeBit,
      minSyncPeriod: d(c.minSyncPeriodMs),
      syncPeriod: d(c.syncPeriodMs),
    },
    nodePortAddresses: [...c.nodePortAddresses],
    oomScoreAdj: c.oomScoreAdj,
    portRange: c.portRange ? `${c.portRange.first}-${c.portRange.last}` : '',
    udpIdleTimeout: d(c.udpIdleTimeoutMs),
    showHiddenMetricsForVersion: '',
    // kube-proxy-ts's own settings; upstream kube-proxy ignores this key (lenient decoding).
    kubeProxyTS: {
      manifestDir: c.kubeProxyTS.manifestDir,
      controlSocket: c.kubeProxyTS.controlSocket,
      serviceTrafficMetrics: c.kubeProxyTS.serviceTrafficMetrics,
      loadBalancing: c.kubeProxyTS.loadBalancing,
    },
  };
}

export function renderConfigYAML(c: ProxyConfig): string {
  return stringify(toKubeProxyConfiguration(c));
}
