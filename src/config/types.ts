// The one effective configuration the daemon runs with: upstream's KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1) after defaulting, with the mode-specific sync periods
// and masquerade settings resolved for the selected mode, durations in milliseconds, plus
// the few settings that are kube-proxy-ts's own (`kubeProxyTS`).

import type { LoadBalancing } from '../model/load-balancing.ts';
import type { ProxyMode } from '../proxier/types.ts';

export const DETECT_LOCAL_MODES = ['ClusterCIDR', 'NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix'] as const;
export type DetectLocalMode = (typeof DETECT_LOCAL_MODES)[number];

/** IPVS schedulers the kernel ships (net/netfilter/ipvs/ip_vs_*.c); '' in a file means rr. */
export const IPVS_SCHEDULERS = [
  'rr',
  'wrr',
  'lc',
  'wlc',
  'fo',
  'ovf',
  'lblc',
  'lblcr',
  'dh',
  'sh',
  'sed',
  'nq',
  'mh',
  'twos',
] as const;
export type IpvsScheduler = (typeof IPVS_SCHEDULERS)[number];

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface ProxyConfig {
  mode: ProxyMode;
  /** Node name; '' means the host name (lower-cased), decided by the daemon. */
  hostnameOverride: string;
  /** Overrides the node's primary IP; userspace mode also binds its proxy sockets to it when it is specific. */
  bindAddress: string;
  /** host:port for /healthz and /livez; '' disables the server. */
  healthzBindAddress: string;
  /** host:port for /metrics; '' disables the server. */
  metricsBindAddress: string;
  bindAddressHardFail: boolean;
  clientConnection: {
    kubeconfig: string;
    /** --master: overrides the kubeconfig's server URL. Not part of the file format. */
    master: string;
    contentType: string;
    acceptContentTypes: string;
    qps: number;
    burst: number;
  };
  /** Full resync at least this often (syncPeriod of the selected mode). */
  syncPeriodMs: number;
  /** No two syncs closer than this (minSyncPeriod of the selected mode). */
  minSyncPeriodMs: number;
  configSyncPeriodMs: number;
  /** Bit of the fwmark used to mark packets for SNAT, 0..31. */
  masqueradeBit: number;
  masqueradeAll: boolean;
  /** iptables mode only. */
  localhostNodePorts: boolean;
  ipvs: {
    scheduler: IpvsScheduler;
    excludeCIDRs: string[];
    strictARP: boolean;
    /** 0 leaves the kernel's value as it is. */
    tcpTimeoutMs: number;
    tcpFinTimeoutMs: number;
    udpTimeoutMs: number;
  };
  detectLocalMode: DetectLocalMode;
  detectLocal: { bridgeInterface: string; interfaceNamePrefix: string };
  /** Pod CIDRs (one, or a dual-stack pair); [] when not given. */
  clusterCIDRs: string[];
  /**
   * CIDRs and/or the keywords 'primary' / 'localhost' / 'all'. An empty list in the
   * input means the mode's default, resolved here: ['primary'] for nftables, ['all'] otherwise.
   */
  nodePortAddresses: string[];
  oomScoreAdj: number;
  /** --proxy-port-range (userspace mode): the ports proxy sockets may bind; undefined: the kernel picks. */
  portRange: { first: number; last: number } | undefined;
  /** --udp-timeout (userspace mode): a UDP client association idle this long is closed. */
  udpIdleTimeoutMs: number;
  conntrack: {
    /** 0 leaves nf_conntrack_max as it is. */
    maxPerCore: number;
    min: number;
    /** 0 leaves the kernel's value as it is (for all the timeouts below). */
    tcpEstablishedTimeoutMs: number;
    tcpCloseWaitTimeoutMs: number;
    tcpBeLiberal: boolean;
    udpTimeoutMs: number;
    udpStreamTimeoutMs: number;
  };
  featureGates: Record<string, boolean>;
  /**
   * --profiling: the control socket answers `kube-proxy-ts profile` (a CPU profile or a heap
   * snapshot written to a file), where upstream serves pprof on the metrics port.
   */
  enableProfiling: boolean;
  logging: {
    /** klog -v: 0-1 info, >=2 debug. */
    verbosity: number;
    format: LogFormat;
  };
  /**
   * kube-proxy-ts's own settings (file: top-level `kubeProxyTS`; flags: --manifest-dir).
   * Upstream kube-proxy decodes such a file leniently and ignores this key.
   */
  kubeProxyTS: {
    /**
     * Standalone mode: read Services and EndpointSlices (and optionally the Node) from
     * YAML/JSON manifests in this directory instead of the Kubernetes API. '' = API mode.
     */
    manifestDir: string;
    /**
     * The local control socket (unix, mode 0600) that `kube-proxy-ts explain` and `trace`
     * ask; '' = none. Default /run/kube-proxy-ts/control.sock (systemd's RuntimeDirectory).
     */
    controlSocket: string;
    /**
     * Export per-Service traffic counters (kubeproxyts_service_*), read from the kernel at
     * scrape time. Opt-in: their number grows with the Services. IPVS and nftables modes.
     */
    serviceTrafficMetrics: boolean;
    /**
     * The node's default load balancing for Services without the kube-proxy-ts.io/load-balancing
     * annotation ('' = each mode's upstream behaviour); validated at start (docs/load-balancing.md).
     */
    loadBalancing: LoadBalancing | '';
  };
}

/** What the command line asks the daemon to do with the configuration. */
/** init-only: the one-time privileged set-up (--init-only), then exit 0. */
export type ConfigAction = 'serve' | 'cleanup' | 'write-config' | 'init-only';

export interface ConfigError {
  /** Field path in the file format, e.g. "ipvs.scheduler"; or a flag, e.g. "--sync-period". */
  field: string;
  message: string;
  /** The flag the bad value came from, when it came from one. */
  flag?: string;
  /** Where in the --config file the bad value is: "FILE:LINE:COLUMN". */
  at?: string;
}

export function formatConfigError(e: ConfigError): string {
  if (e.at !== undefined && e.flag === undefined) return `${e.at}: ${e.field}: ${e.message}`;
  return e.flag !== undefined && e.flag !== e.field
    ? `${e.field} (from ${e.flag}): ${e.message}`
    : `${e.field}: ${e.message}`;
}
