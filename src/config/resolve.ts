// Flat values (file and/or flags) -> the effective ProxyConfig: upstream's v1alpha1
// defaults (pkg/proxy/apis/config/v1alpha1/defaults.go), its v1alpha1 -> internal
// conversion (sync periods and masquerade settings come from the selected mode's section),
// then validation with messages that name the field and the bad value.

import { parseCIDR, parseIP } from '../base/ip.ts';
import { isLoadBalancing, LOAD_BALANCING_VALUES, type LoadBalancing } from '../model/load-balancing.ts';
import { boundDuration, formatDuration } from './duration.ts';
import { show } from './file.ts';
import { checkFeatureGates, featureEnabled } from './feature-gates.ts';
import type { FlatValue, FlatValues } from './schema.ts';
import {
  DETECT_LOCAL_MODES,
  IPVS_SCHEDULERS,
  LOG_FORMATS,
  type ConfigError,
  type DetectLocalMode,
  type IpvsScheduler,
  type LogFormat,
  type ProxyConfig,
} from './types.ts';
import { PROXY_MODES, type ProxyMode } from '../proxier/types.ts';

/** Where the daemon listens for `explain`/`trace` (systemd's RuntimeDirectory=kube-proxy-ts). */
export const DEFAULT_CONTROL_SOCKET = '/run/kube-proxy-ts/control.sock';

/** A blank mode means iptables, as upstream on Linux (the packaged config file names nftables). */
export const DEFAULT_MODE: ProxyMode = 'iptables';
/** Upstream 1.37 warns when it picks the mode itself: the Linux default becomes nftables in 1.40. */
export const DEFAULTED_MODE_WARNING =
  "mode: no proxy mode was given, so 'iptables' is used; the default will change to 'nftables' in Kubernetes 1.40: set the mode explicitly to keep 'iptables'";
export const HEALTHZ_PORT = 10256;
export const METRICS_PORT = 10249;
export const DEFAULT_OOM_SCORE_ADJ = -999;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export interface ResolveResult {
  config: ProxyConfig;
  errors: ConfigError[];
  warnings: string[];
}

/** Which mode section ("iptables", "ipvs", "nftables") holds the sync periods for a mode. */
export function syncSection(mode: ProxyMode): 'iptables' | 'ipvs' | 'nftables' {
  return mode === 'ipvs' ? 'ipvs' : mode === 'nftables' ? 'nftables' : 'iptables';
}

/** Reports a bad field: the error names the flag that set it (or `originField`'s) when a flag did. */
type ErrFn = (field: string, message: string, originField?: string) => void;

/** Typed reads of the flat values; a value of another type reads as unset. */
interface Reader {
  str(p: string, d?: string): string;
  num(p: string): number | undefined;
  bool(p: string, d: boolean): boolean;
  /** A list with blank items dropped. */
  list(p: string): string[];
  /** Counts where 0 (or unset) means "use the default", as upstream defaults them. */
  orDefault(p: string, d: number): number;
  /** A duration (ms) held to MAX_DURATION_MS: a longer one is clamped, with a warning naming it. */
  dur(p: string): number | undefined;
  /**
   * A duration where unset, or 0 in the file, means the default (upstream defaults the
   * file's zero values); 0 from a flag stays 0 (upstream applies flags after defaulting),
   * for validation to judge.
   */
  durOrDefault(p: string, d: number): number;
}

function reader(values: FlatValues, origins: ReadonlyMap<string, string>, warnings: string[]): Reader {
  const num = (p: string): number | undefined => {
    const v = values.get(p);
    return typeof v === 'number' ? v : undefined;
  };
  return {
    str: (p, d = '') => {
      const v = values.get(p);
      return typeof v === 'string' ? v : d;
    },
    num,
    bool: (p, d) => {
      const v = values.get(p);
      return typeof v === 'boolean' ? v : d;
    },
    list: (p) => {
      const v: FlatValue | undefined = values.get(p);
      return Array.isArray(v) ? v.map((s) => s.trim()).filter((s) => s !== '') : [];
    },
    orDefault: (p, d) => {
      const v = num(p);
      return v === undefined || v === 0 ? d : v;
    },
    dur: (p) => dur(p),
    durOrDefault: (p, d) => {
      const v = dur(p);
      return v === undefined || (v === 0 && !origins.has(p)) ? d : v;
    },
  };
  function dur(p: string): number | undefined {
    const v = num(p);
    if (v === undefined) return undefined;
    const b = boundDuration(v);
    if (b.clamped) {
      const flag = origins.get(p);
      warnings.push(
        `${p}${flag === undefined ? '' : ` (from ${flag})`}: ${showMs(v)} is longer than the longest timer ` +
          `the runtime can arm; using ${showMs(b.ms)}`,
      );
    }
    return b.ms;
  }
}

/** `text` when it is one of `known`; blank: `fallback`; anything else: `fallback`, after `bad(the known list)`. */
function oneOf<T extends string>(text: string, known: readonly T[], fallback: T, bad: (known: string) => void): T {
  if (text === '') return fallback;
  if ((known as readonly string[]).includes(text)) return text as T;
  bad(known.join(', '));
  return fallback;
}

/**
 * @param origins field path -> the flag that set it; a value set by a flag to '' disables
 *   the healthz/metrics server (upstream: defaulting runs before flags apply).
 */
export function resolveConfig(values: FlatValues, origins: ReadonlyMap<string, string> = new Map()): ResolveResult {
  const errors: ConfigError[] = [];
  const warnings: string[] = [];
  // The flag behind a field: "nodePortAddresses[1]" -> "nodePortAddresses"; errors about a
  // field required by another (detectLocal.* by detectLocalMode) name that one's flag.
  const err: ErrFn = (field, message, originField) => {
    const base = field.replace(/\[\d+\]$/, '');
    const flag = origins.get(base) ?? (originField === undefined ? undefined : origins.get(originField));
    errors.push(flag === undefined ? { field, message } : { field, message, flag });
  };
  const r = reader(values, origins, warnings);
  const modeText = r.str('mode');
  const mode = oneOf(modeText, PROXY_MODES, DEFAULT_MODE, (known) =>
    err('mode', `${show(modeText)} must be one of ${known} (or blank for ${DEFAULT_MODE})`),
  );
  if (modeText === '') warnings.push(DEFAULTED_MODE_WARNING);
  const enums = readEnums(r, mode, err, warnings);
  const config = readConfig(r, values, origins, mode, enums, err);
  validate(config, { section: syncSection(mode), masqSection: masqSectionOf(mode), err, warnings, values });
  return { config, errors, warnings };
}

const masqSectionOf = (mode: ProxyMode): 'iptables' | 'nftables' => (mode === 'nftables' ? 'nftables' : 'iptables');

interface Enums {
  scheduler: IpvsScheduler;
  detectLocalMode: DetectLocalMode;
  format: LogFormat;
}

/** The enum fields besides the mode; an unknown scheduler only matters (is an error) in ipvs mode. */
function readEnums(r: Reader, mode: ProxyMode, err: ErrFn, warnings: string[]): Enums {
  const schedText = r.str('ipvs.scheduler');
  const scheduler = oneOf(schedText, IPVS_SCHEDULERS, 'rr', (known) => {
    if (mode === 'ipvs') err('ipvs.scheduler', `${show(schedText)} is not a known scheduler (one of ${known})`);
    else warnings.push(`ipvs.scheduler: ${show(schedText)} is not a known scheduler; ignored outside ipvs mode`);
  });
  const dlmText = r.str('detectLocalMode');
  const detectLocalMode = oneOf(dlmText, DETECT_LOCAL_MODES, 'ClusterCIDR', (known) =>
    err('detectLocalMode', `${show(dlmText)} must be one of ${known} (or blank for ClusterCIDR)`),
  );
  const formatText = r.str('logging.format');
  const format = oneOf(formatText, LOG_FORMATS, 'text', (known) =>
    err('logging.format', `${show(formatText)} must be one of ${known}`),
  );
  return { scheduler, detectLocalMode, format };
}

/** kubeProxyTS.loadBalancing: one of the known values, or '' (an unknown one is an error at start). */
function readLoadBalancing(r: Reader, err: ErrFn): LoadBalancing | '' {
  const text = r.str('kubeProxyTS.loadBalancing').trim();
  if (text === '' || isLoadBalancing(text)) return text;
  err('kubeProxyTS.loadBalancing', `${show(text)} must be one of ${LOAD_BALANCING_VALUES.join(', ')} (or empty)`);
  return '';
}

/** The healthz and metrics listen addresses: bindAddress's family's default host, or a flag's '' to disable. */
function serverAddresses(
  r: Reader,
  values: FlatValues,
  origins: ReadonlyMap<string, string>,
): Pick<ProxyConfig, 'bindAddress' | 'healthzBindAddress' | 'metricsBindAddress'> {
  const bindAddress = r.str('bindAddress') || '0.0.0.0';
  const bindIsV4 = parseIP(bindAddress)?.family !== 'IPv6';
  const serverAddress = (p: string, v4Host: string, v6Host: string, port: number): string => {
    const v = values.get(p);
    if (typeof v !== 'string' || v === '') {
      if (v === '' && origins.has(p)) return ''; // disabled on the command line
      return `${bindIsV4 ? v4Host : v6Host}:${port}`;
    }
    return appendPortIfNeeded(v, port);
  };
  return {
    bindAddress,
    healthzBindAddress: serverAddress('healthzBindAddress', '0.0.0.0', '[::]', HEALTHZ_PORT),
    metricsBindAddress: serverAddress('metricsBindAddress', '127.0.0.1', '[::1]', METRICS_PORT),
  };
}

/** Sync periods and masquerade settings come from the selected mode's section (upstream's conversion). */
function modeSettings(
  r: Reader,
  mode: ProxyMode,
): Pick<ProxyConfig, 'syncPeriodMs' | 'minSyncPeriodMs' | 'masqueradeBit' | 'masqueradeAll'> {
  const section = syncSection(mode);
  // Upstream defaults ipvs.minSyncPeriod to 0 (every change syncs at once); the others to 1s.
  const minSync = `${section}.minSyncPeriod`;
  const masqSection = masqSectionOf(mode);
  return {
    syncPeriodMs: r.durOrDefault(`${section}.syncPeriod`, 30 * SECOND),
    minSyncPeriodMs: section === 'ipvs' ? (r.dur(minSync) ?? 0) : r.durOrDefault(minSync, SECOND),
    masqueradeBit: r.num(`${masqSection}.masqueradeBit`) ?? 14,
    masqueradeAll: r.bool(`${masqSection}.masqueradeAll`, false),
  };
}

function conntrackConfig(r: Reader): ProxyConfig['conntrack'] {
  return {
    maxPerCore: r.num('conntrack.maxPerCore') ?? 32 * 1024,
    min: r.num('conntrack.min') ?? 128 * 1024,
    tcpEstablishedTimeoutMs: r.dur('conntrack.tcpEstablishedTimeout') ?? 24 * HOUR,
    tcpCloseWaitTimeoutMs: r.dur('conntrack.tcpCloseWaitTimeout') ?? HOUR,
    tcpBeLiberal: r.bool('conntrack.tcpBeLiberal', false),
    udpTimeoutMs: r.dur('conntrack.udpTimeout') ?? 0,
    udpStreamTimeoutMs: r.dur('conntrack.udpStreamTimeout') ?? 0,
  };
}

/** Every field read, defaulted as upstream's v1alpha1 defaults; validation comes after. */
function readConfig(
  r: Reader,
  values: FlatValues,
  origins: ReadonlyMap<string, string>,
  mode: ProxyMode,
  { scheduler, detectLocalMode, format }: Enums,
  err: ErrFn,
): ProxyConfig {
  const nodePortAddresses = r.list('nodePortAddresses');
  const m = modeSettings(r, mode);
  return {
    mode,
    hostnameOverride: r.str('hostnameOverride').trim().toLowerCase(),
    ...serverAddresses(r, values, origins),
    bindAddressHardFail: r.bool('bindAddressHardFail', false),
    clientConnection: {
      kubeconfig: r.str('clientConnection.kubeconfig'),
      master: r.str('clientConnection.master'),
      contentType: r.str('clientConnection.contentType') || 'application/vnd.kubernetes.protobuf',
      acceptContentTypes: r.str('clientConnection.acceptContentTypes'),
      qps: r.orDefault('clientConnection.qps', 5),
      burst: r.orDefault('clientConnection.burst', 10),
    },
    syncPeriodMs: m.syncPeriodMs,
    minSyncPeriodMs: m.minSyncPeriodMs,
    configSyncPeriodMs: r.durOrDefault('configSyncPeriod', 15 * MINUTE),
    masqueradeBit: m.masqueradeBit,
    masqueradeAll: m.masqueradeAll,
    localhostNodePorts: r.bool('iptables.localhostNodePorts', true),
    ipvs: {
      scheduler,
      excludeCIDRs: r.list('ipvs.excludeCIDRs'),
      strictARP: r.bool('ipvs.strictARP', false),
      tcpTimeoutMs: r.dur('ipvs.tcpTimeout') ?? 0,
      tcpFinTimeoutMs: r.dur('ipvs.tcpFinTimeout') ?? 0,
      udpTimeoutMs: r.dur('ipvs.udpTimeout') ?? 0,
    },
    detectLocalMode,
    detectLocal: {
      bridgeInterface: r.str('detectLocal.bridgeInterface'),
      interfaceNamePrefix: r.str('detectLocal.interfaceNamePrefix'),
    },
    clusterCIDRs: r
      .str('clusterCIDR')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    nodePortAddresses: nodePortAddresses.length > 0 ? nodePortAddresses : mode === 'nftables' ? ['primary'] : ['all'],
    oomScoreAdj: r.num('oomScoreAdj') ?? DEFAULT_OOM_SCORE_ADJ,
    portRange: parsePortRange(r.str('portRange'), (msg) => err('portRange', msg)),
    udpIdleTimeoutMs: r.durOrDefault('udpIdleTimeout', 250),
    conntrack: conntrackConfig(r),
    featureGates: { ...((values.get('featureGates') as Record<string, boolean> | undefined) ?? {}) },
    enableProfiling: r.bool('enableProfiling', false),
    logging: { verbosity: r.num('logging.verbosity') ?? 0, format },
    kubeProxyTS: {
      manifestDir: r.str('kubeProxyTS.manifestDir'),
      controlSocket: r.str('kubeProxyTS.controlSocket', DEFAULT_CONTROL_SOCKET),
      serviceTrafficMetrics: r.bool('kubeProxyTS.serviceTrafficMetrics', false),
      loadBalancing: readLoadBalancing(r, err),
    },
  };
}

interface ValidateCtx {
  section: string;
  masqSection: string;
  err: ErrFn;
  warnings: string[];
  values: FlatValues;
}

function validate(c: ProxyConfig, ctx: ValidateCtx): void {
  validatePeriods(c, ctx);
  validateAddresses(c, ctx);
  validateRanges(c, ctx);
  validateDetectLocal(c, ctx);
  validateCounts(c, ctx);
  validateFeatureGates(c, ctx);
  warnIgnored(c, ctx);
}

/** Upstream's featuregate checks; and ipvs mode needs the (deprecated) KubeProxyIPVS gate on, as in v1.37. */
function validateFeatureGates(c: ProxyConfig, { err, warnings }: ValidateCtx): void {
  const check = checkFeatureGates(c.featureGates);
  warnings.push(...check.warnings);
  if (check.unknown !== undefined) err('featureGates', `unrecognized feature gate: ${check.unknown}`);
  if (c.mode === 'ipvs' && !featureEnabled(c.featureGates, 'KubeProxyIPVS'))
    err('mode', '"ipvs" needs the KubeProxyIPVS feature gate, which is set to false', 'featureGates');
}

const showMs = (ms: number): string => show(formatDuration(ms));

function validatePeriods(c: ProxyConfig, { section, err }: ValidateCtx): void {
  const d = showMs;
  if (c.syncPeriodMs <= 0) err(`${section}.syncPeriod`, `${d(c.syncPeriodMs)} must be greater than 0`);
  if (c.minSyncPeriodMs < 0)
    err(`${section}.minSyncPeriod`, `${d(c.minSyncPeriodMs)} must be greater than or equal to 0`);
  else if (c.syncPeriodMs > 0 && c.minSyncPeriodMs > c.syncPeriodMs) {
    err(
      `${section}.syncPeriod`,
      `${d(c.syncPeriodMs)} must be greater than or equal to ${section}.minSyncPeriod (${d(c.minSyncPeriodMs)})`,
    );
  }
  if (c.configSyncPeriodMs <= 0) err('configSyncPeriod', `${d(c.configSyncPeriodMs)} must be greater than 0`);
}

function validateAddresses(c: ProxyConfig, { err, values }: ValidateCtx): void {
  if (parseIP(c.bindAddress) === undefined) err('bindAddress', `${show(c.bindAddress)} is not a valid IP address`);
  if (c.healthzBindAddress !== '') validateHostPort('healthzBindAddress', c.healthzBindAddress, err);
  if (c.metricsBindAddress !== '') validateHostPort('metricsBindAddress', c.metricsBindAddress, err);

  const clusterCIDR = values.get('clusterCIDR');
  if (c.clusterCIDRs.length > 2) {
    err(
      'clusterCIDR',
      `${show(clusterCIDR)} must be one CIDR or a dual-stack pair (e.g. 10.100.0.0/16,fde4:8dba:82e1::/48)`,
    );
  } else if (c.clusterCIDRs.length > 0) {
    const parsed = c.clusterCIDRs.map((s) => (s.includes('/') ? parseCIDR(s) : undefined));
    if (parsed.some((p) => p === undefined)) {
      err('clusterCIDR', `${show(clusterCIDR)} must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)`);
    } else if (parsed.length === 2 && parsed[0]!.family === parsed[1]!.family) {
      err('clusterCIDR', `${show(clusterCIDR)} must be a dual-stack pair: one IPv4 and one IPv6 CIDR`);
    }
  }
}

/** Bits, scores and timeouts within their ranges; in ipvs mode its timeouts and exclude CIDRs too. */
function validateRanges(c: ProxyConfig, { masqSection, err, values }: ValidateCtx): void {
  for (const sec of new Set(['iptables', masqSection])) {
    const bit = values.get(`${sec}.masqueradeBit`);
    if (typeof bit === 'number' && (bit < 0 || bit > 31))
      err(`${sec}.masqueradeBit`, `${bit} must be within the range [0, 31]`);
  }
  if (c.udpIdleTimeoutMs <= 0) err('udpIdleTimeout', `${showMs(c.udpIdleTimeoutMs)} must be greater than 0`);
  if (c.oomScoreAdj < -1000 || c.oomScoreAdj > 1000)
    err('oomScoreAdj', `${c.oomScoreAdj} must be within the range [-1000, 1000]`);

  if (c.conntrack.maxPerCore < 0)
    err('conntrack.maxPerCore', `${c.conntrack.maxPerCore} must be greater than or equal to 0`);
  if (c.conntrack.min < 0) err('conntrack.min', `${c.conntrack.min} must be greater than or equal to 0`);
  const ctDurations: [string, number][] = [
    ['conntrack.tcpEstablishedTimeout', c.conntrack.tcpEstablishedTimeoutMs],
    ['conntrack.tcpCloseWaitTimeout', c.conntrack.tcpCloseWaitTimeoutMs],
    ['conntrack.udpTimeout', c.conntrack.udpTimeoutMs],
    ['conntrack.udpStreamTimeout', c.conntrack.udpStreamTimeoutMs],
  ];
  if (c.mode === 'ipvs') {
    ctDurations.push(
      ['ipvs.tcpTimeout', c.ipvs.tcpTimeoutMs],
      ['ipvs.tcpFinTimeout', c.ipvs.tcpFinTimeoutMs],
      ['ipvs.udpTimeout', c.ipvs.udpTimeoutMs],
    );
    c.ipvs.excludeCIDRs.forEach((s, i) => {
      if (!s.includes('/') || parseCIDR(s) === undefined)
        err(`ipvs.excludeCIDRs[${i}]`, `${show(s)} must be a valid CIDR`);
    });
  }
  for (const [field, ms] of ctDurations) if (ms < 0) err(field, `${showMs(ms)} must be greater than or equal to 0`);

  c.nodePortAddresses.forEach((s, i) => {
    if (s === 'primary' || s === 'localhost' || s === 'all') return;
    if (!s.includes('/') || parseCIDR(s) === undefined) {
      err(`nodePortAddresses[${i}]`, `${show(s)} must be a valid CIDR or one of "primary", "localhost", "all"`);
    }
  });
}

function validateDetectLocal(c: ProxyConfig, { err }: ValidateCtx): void {
  if (c.detectLocalMode === 'BridgeInterface' && c.detectLocal.bridgeInterface === '') {
    err(
      'detectLocal.bridgeInterface',
      `"" must not be empty when detectLocalMode is BridgeInterface`,
      'detectLocalMode',
    );
  }
  if (c.detectLocalMode === 'InterfaceNamePrefix' && c.detectLocal.interfaceNamePrefix === '') {
    err(
      'detectLocal.interfaceNamePrefix',
      `"" must not be empty when detectLocalMode is InterfaceNamePrefix`,
      'detectLocalMode',
    );
  }
}

function validateCounts(c: ProxyConfig, { err }: ValidateCtx): void {
  if (c.clientConnection.burst < 0)
    err('clientConnection.burst', `${c.clientConnection.burst} must be greater than or equal to 0`);
  if (c.clientConnection.qps < 0)
    err('clientConnection.qps', `${c.clientConnection.qps} must be greater than or equal to 0`);
  if (c.logging.verbosity < 0) err('logging.verbosity', `${c.logging.verbosity} must be greater than or equal to 0`);
}

/** Settings that are accepted and ignored, said so. */
function warnIgnored(c: ProxyConfig, { warnings, values }: ValidateCtx): void {
  if (
    c.mode === 'nftables' &&
    values.has('iptables.masqueradeBit') &&
    !values.has('nftables.masqueradeBit') &&
    values.get('iptables.masqueradeBit') !== 14
  ) {
    warnings.push(
      'iptables.masqueradeBit applies to iptables and ipvs modes only; nftables mode uses nftables.masqueradeBit (as upstream)',
    );
  }
}

function validateHostPort(field: string, input: string, err: (field: string, message: string) => void): void {
  const hp = splitHostPort(input);
  if (hp === undefined) {
    err(field, `${show(input)} must be IP:port`);
    return;
  }
  if (parseIP(hp.host) === undefined) err(field, `${show(input)}: ${show(hp.host)} is not a valid IP`);
  const p = Number(hp.port);
  if (!/^\d+$/.test(hp.port) || p < 1 || p > 65535) err(field, `${show(input)}: ${show(hp.port)} is not a valid port`);
}

/** Splits "1.2.3.4:80" or "[::1]:80" as Go's net.SplitHostPort does. */
export function splitHostPort(s: string): { host: string; port: string } | undefined {
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0 || s[end + 1] !== ':') return undefined;
    return { host: s.slice(1, end), port: s.slice(end + 2) };
  }
  const i = s.lastIndexOf(':');
  if (i < 0 || s.indexOf(':') !== i) return undefined;
  return { host: s.slice(0, i), port: s.slice(i + 1) };
}

/** Upstream's AppendPortIfNeeded: a bare IP gets the default port. */
export function appendPortIfNeeded(addr: string, port: number): string {
  if (splitHostPort(addr) !== undefined) return addr;
  // Upstream wants a bare IP here; we also take a bracketed one ("[::]").
  const bare = /^\[(.*)\]$/.exec(addr)?.[1] ?? addr;
  const ip = parseIP(bare);
  if (ip === undefined) return addr; // left for validation to name
  return ip.family === 'IPv6' ? `[${bare}]:${port}` : `${bare}:${port}`;
}

/**
 * --proxy-port-range as upstream's utilnet.PortRange parses it: "begin-end", "begin+offset" or one
 * port, inclusive; '', "0" and "0-0" leave each port to the kernel (undefined).
 */
export function parsePortRange(
  text: string,
  err: (message: string) => void,
): { first: number; last: number } | undefined {
  const t = text.trim();
  if (t === '' || t === '0' || t === '0-0') return undefined;
  const m = /^(\d+)(?:([-+])(\d+))?$/.exec(t);
  if (!m) {
    err(`${show(text)} must be "begin-end", "begin+offset" or a single port (e.g. 30000-32767)`);
    return undefined;
  }
  const first = Number(m[1]);
  const last = m[2] === undefined ? first : m[2] === '-' ? Number(m[3]) : first + Number(m[3]);
  if (first < 1 || last > 65535) {
    err(`${show(text)} must lie within 1-65535`);
    return undefined;
  }
  if (last < first) {
    err(`${show(text)}: the end port ${last} is below the first ${first}`);
    return undefined;
  }
  return { first, last };
}
