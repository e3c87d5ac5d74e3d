// The KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) file format as a table of
// field paths and kinds. The file reader and the flags both produce "flat values" keyed by
// these paths, so merging them is an overlay and every error can name the field.

export type FieldKind = 'string' | 'bool' | 'int' | 'float' | 'duration' | 'strings' | 'boolMap' | 'ignored';

export type FlatValue = string | number | boolean | string[] | Record<string, boolean>;
/** Field path ("ipvs.scheduler") -> parsed value (durations in milliseconds). */
export type FlatValues = Map<string, FlatValue>;

export const API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';
export const KIND = 'KubeProxyConfiguration';

/**
 * Every field upstream's v1alpha1 type has (staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go),
 * plus `kubeProxyTS.*`, ours. 'ignored' fields are accepted and have no effect here
 * (Windows-only, profiling, logging details we do not implement).
 */
export const FIELDS: ReadonlyMap<string, FieldKind> = new Map<string, FieldKind>([
  ['apiVersion', 'string'],
  ['kind', 'string'],
  ['featureGates', 'boolMap'],
  ['clientConnection.kubeconfig', 'string'],
  ['clientConnection.acceptContentTypes', 'string'],
  ['clientConnection.contentType', 'string'],
  ['clientConnection.qps', 'float'],
  ['clientConnection.burst', 'int'],
  ['logging.format', 'string'],
  ['logging.verbosity', 'int'],
  ['logging.flushFrequency', 'ignored'],
  ['logging.vmodule', 'ignored'],
  ['logging.options', 'ignored'],
  ['hostnameOverride', 'string'],
  ['bindAddress', 'string'],
  ['healthzBindAddress', 'string'],
  ['metricsBindAddress', 'string'],
  ['bindAddressHardFail', 'bool'],
  ['enableProfiling', 'bool'],
  ['showHiddenMetricsForVersion', 'string'],
  ['mode', 'string'],
  ['iptables.masqueradeBit', 'int'],
  ['iptables.masqueradeAll', 'bool'],
  ['iptables.localhostNodePorts', 'bool'],
  ['iptables.snatNodeInternalIP', 'ignored'],
  ['iptables.syncPeriod', 'duration'],
  ['iptables.minSyncPeriod', 'duration'],
  ['ipvs.syncPeriod', 'duration'],
  ['ipvs.minSyncPeriod', 'duration'],
  ['ipvs.scheduler', 'string'],
  ['ipvs.excludeCIDRs', 'strings'],
  ['ipvs.strictARP', 'bool'],
  ['ipvs.tcpTimeout', 'duration'],
  ['ipvs.tcpFinTimeout', 'duration'],
  ['ipvs.udpTimeout', 'duration'],
  ['nftables.masqueradeBit', 'int'],
  ['nftables.masqueradeAll', 'bool'],
  ['nftables.syncPeriod', 'duration'],
  ['nftables.minSyncPeriod', 'duration'],
  ['winkernel', 'ignored'],
  ['detectLocalMode', 'string'],
  ['detectLocal.bridgeInterface', 'string'],
  ['detectLocal.interfaceNamePrefix', 'string'],
  ['clusterCIDR', 'string'],
  ['nodePortAddresses', 'strings'],
  ['oomScoreAdj', 'int'],
  ['conntrack.maxPerCore', 'int'],
  ['conntrack.min', 'int'],
  ['conntrack.tcpEstablishedTimeout', 'duration'],
  ['conntrack.tcpCloseWaitTimeout', 'duration'],
  ['conntrack.tcpBeLiberal', 'bool'],
  ['conntrack.udpTimeout', 'duration'],
  ['conntrack.udpStreamTimeout', 'duration'],
  ['configSyncPeriod', 'duration'],
  ['portRange', 'string'],
  ['udpIdleTimeout', 'duration'],
  ['windowsRunAsService', 'ignored'],
  ['kubeProxyTS.manifestDir', 'string'],
  ['kubeProxyTS.controlSocket', 'string'],
  ['kubeProxyTS.serviceTrafficMetrics', 'bool'],
  ['kubeProxyTS.loadBalancing', 'string'],
]);

/** Objects that hold fields (anything that is a prefix of a field path). */
const OBJECTS: ReadonlySet<string> = new Set(
  [...FIELDS.keys()].flatMap((p) => {
    const parts = p.split('.');
    return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('.'));
  }),
);

export function isObjectPath(path: string): boolean {
  return OBJECTS.has(path);
}
