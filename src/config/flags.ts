// kube-proxy's command-line flags, with upstream's names and meanings
// (cmd/kube-proxy/app/options.go), parsed by commander into flat values keyed by the
// KubeProxyConfiguration field they set. Accepted the way pflag accepts them:
// --flag=value or --flag value, -v=2 / -v 2 / --v=2, bools as --flag or --flag=false,
// and '_' for '-' in names (upstream's WordSepNormalizeFunc).

import { Command, InvalidArgumentError, Option, type Help } from 'commander';
import { formatDuration, MAX_DURATION_MS, parseDuration } from './duration.ts';
import type { FlatValue } from './schema.ts';
import { errorMessage } from '../base/errors.ts';
import { MAX_MANIFEST_BYTES } from '../sources/read-file.ts';
import { COMMAND_NAMES, COMMANDS, commandNamesText } from './commands.ts';
import { DEFAULT_MODE, modeList } from './modes.ts';
import { resolveConfig } from './resolve.ts';
import { toKubeProxyConfiguration } from './write.ts';
import { LOAD_BALANCING_ANNOTATION, LOAD_BALANCING_VALUES } from '../model/load-balancing.ts';

/** The --config file's size limit (cli.ts reads it with this); said by --config's help. */
export const MAX_CONFIG_BYTES = 1 << 20;
const MIB = (bytes: number): string => `${bytes / 2 ** 20} MiB`;

type ArgKind = 'string' | 'bool' | 'int' | 'float' | 'duration' | 'strings' | 'boolMap';

export interface FlagSpec {
  /** Upstream's flag name without dashes. */
  name: string;
  kind: ArgKind;
  /**
   * The config field it sets. Special targets resolved against the mode:
   * '@syncPeriod', '@minSyncPeriod' (selected mode's section), '@masqueradeAll'.
   */
  target?: string;
  help: string;
  /** Not part of the configuration: what the command line asks for. */
  control?: true;
  /** Still applied when --config is given (upstream: hostname-override and logging flags). */
  overridesFile?: true;
  /** kube-proxy-ts's own flag, not upstream's. */
  ours?: true;
  deprecated?: string;
  /** Accepted for compatibility; has no effect here. */
  noEffect?: true;
}

const IGNORED_WITH_CONFIG = ' Ignored when --config is given (as upstream).';
/** Said by the periods' flags; every duration is held to it (config/duration.ts). */
const AT_MOST = ` At most ${formatDuration(MAX_DURATION_MS)} (the longest timer; a longer value is used as that, with a warning).`;

export const FLAGS: readonly FlagSpec[] = [
  {
    name: 'config',
    kind: 'string',
    control: true,
    help: `The path to the configuration file (KubeProxyConfiguration, YAML or JSON): a regular file of at most ${MIB(MAX_CONFIG_BYTES)}.`,
  },
  {
    name: 'write-config-to',
    kind: 'string',
    control: true,
    help: 'If set, write the effective configuration to this file and exit.',
  },
  {
    name: 'cleanup',
    kind: 'bool',
    control: true,
    help: 'If true, remove every kernel object kube-proxy-ts created (any mode) and what upstream kube-proxy left (its nftables tables, iptables-nft chains, IPVS state), then exit.',
  },
  {
    name: 'kubeconfig',
    kind: 'string',
    target: 'clientConnection.kubeconfig',
    help: 'Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).',
  },
  {
    name: 'master',
    kind: 'string',
    target: 'clientConnection.master',
    overridesFile: true,
    help: 'The address of the Kubernetes API server (overrides any value in kubeconfig).',
  },
  {
    name: 'kube-api-content-type',
    kind: 'string',
    target: 'clientConnection.contentType',
    help: 'Content type of requests sent to apiserver.',
  },
  {
    name: 'kube-api-burst',
    kind: 'int',
    target: 'clientConnection.burst',
    help: 'Burst to use while talking with kubernetes apiserver.',
  },
  {
    name: 'kube-api-qps',
    kind: 'float',
    target: 'clientConnection.qps',
    help: 'QPS to use while talking with kubernetes apiserver.',
  },
  {
    name: 'hostname-override',
    kind: 'string',
    target: 'hostnameOverride',
    overridesFile: true,
    help: "If non-empty, will be used as the name of the Node that kube-proxy is running on. If unset, the node name is assumed to be the same as the node's hostname.",
  },
  {
    name: 'bind-address',
    kind: 'string',
    target: 'bindAddress',
    help:
      "Overrides kube-proxy's idea of what its node's primary IP is. In userspace mode, also the address the proxy sockets bind (0.0.0.0 or :: binds every address)." +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'healthz-bind-address',
    kind: 'string',
    target: 'healthzBindAddress',
    help:
      'The IP address and port for the health check server to serve on, defaulting to "0.0.0.0:10256". Set empty to disable.' +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'metrics-bind-address',
    kind: 'string',
    target: 'metricsBindAddress',
    help:
      'The IP address and port for the metrics server to serve on, defaulting to "127.0.0.1:10249". Set empty to disable.' +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'bind-address-hard-fail',
    kind: 'bool',
    target: 'bindAddressHardFail',
    help: 'If true kube-proxy will treat failure to bind to a port as fatal and exit.',
  },
  {
    name: 'healthz-port',
    kind: 'int',
    help: 'The port to bind the health check server. Use 0 to disable.',
    deprecated: 'use --healthz-bind-address instead',
  },
  {
    name: 'metrics-port',
    kind: 'int',
    help: 'The port to bind the metrics server. Use 0 to disable.',
    deprecated: 'use --metrics-bind-address instead',
  },
  {
    name: 'proxy-mode',
    kind: 'string',
    target: 'mode',
    help:
      `Which proxy mode to use: ${modeList()}. Blank means ${DEFAULT_MODE}, as upstream on Linux.` +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'iptables-masquerade-bit',
    kind: 'int',
    target: 'iptables.masqueradeBit',
    help: 'If using the iptables or ipvs proxy mode, the bit of the fwmark space to mark packets requiring SNAT with. Must be within the range [0, 31].',
  },
  {
    name: 'masquerade-all',
    kind: 'bool',
    target: '@masqueradeAll',
    help: 'SNAT all traffic sent via Service cluster IPs. This may be required with some CNI plugins.',
  },
  {
    name: 'iptables-localhost-nodeports',
    kind: 'bool',
    target: 'iptables.localhostNodePorts',
    help: 'If false, disable the legacy behavior of allowing NodePort services to be accessed via localhost (iptables mode, IPv4 only).',
  },
  {
    name: 'iptables-sync-period',
    kind: 'duration',
    target: '@syncPeriod',
    help:
      "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0. Applies to every mode but ipvs." +
      AT_MOST,
  },
  {
    name: 'iptables-min-sync-period',
    kind: 'duration',
    target: '@minSyncPeriod',
    help: "The minimum period between rule resyncs (e.g. '5s', '1m', '2h22m'). 0 means every change syncs at once. Applies to every mode but ipvs.",
  },
  {
    name: 'ipvs-sync-period',
    kind: 'duration',
    target: '@syncPeriod',
    help:
      "ipvs mode: how frequently rules are fully re-synchronized (e.g. '5s', '1m'). Must be greater than 0." + AT_MOST,
  },
  {
    name: 'ipvs-min-sync-period',
    kind: 'duration',
    target: '@minSyncPeriod',
    help: 'ipvs mode: the minimum period between IPVS rule resyncs. 0 means every change syncs at once.',
  },
  {
    name: 'sync-period',
    kind: 'duration',
    target: '@syncPeriod',
    help:
      'The periodic resync period of the selected mode (same as --iptables-sync-period / --ipvs-sync-period); a full resync happens at most hourly, except in ipvs mode where every periodic one is. Must be greater than 0.' +
      AT_MOST,
  },
  {
    name: 'min-sync-period',
    kind: 'duration',
    target: '@minSyncPeriod',
    help: 'The minimum period between syncs of the selected mode.',
  },
  {
    name: 'ipvs-scheduler',
    kind: 'string',
    target: 'ipvs.scheduler',
    help:
      'The ipvs scheduler type when proxy mode is ipvs (rr, wrr, lc, wlc, lblc, lblcr, sh, dh, sed, nq, mh, ...). ' +
      'A Service annotated kube-proxy-ts.io/load-balancing round-robin, consistent-hash or least-connection ' +
      'gets rr, mh or lc instead.',
  },
  {
    name: 'ipvs-exclude-cidrs',
    kind: 'strings',
    target: 'ipvs.excludeCIDRs',
    help: 'A comma-separated list of CIDRs which the ipvs proxier should not touch when cleaning up IPVS rules.',
  },
  {
    name: 'ipvs-strict-arp',
    kind: 'bool',
    target: 'ipvs.strictARP',
    help: 'Enable strict ARP by setting arp_ignore to 1 and arp_announce to 2.',
  },
  {
    name: 'ipvs-tcp-timeout',
    kind: 'duration',
    target: 'ipvs.tcpTimeout',
    help: 'The timeout for idle IPVS TCP connections, 0 to leave as-is.',
  },
  {
    name: 'ipvs-tcpfin-timeout',
    kind: 'duration',
    target: 'ipvs.tcpFinTimeout',
    help: 'The timeout for IPVS TCP connections after receiving a FIN packet, 0 to leave as-is.',
  },
  {
    name: 'ipvs-udp-timeout',
    kind: 'duration',
    target: 'ipvs.udpTimeout',
    help: 'The timeout for IPVS UDP packets, 0 to leave as-is.',
  },
  {
    name: 'detect-local-mode',
    kind: 'string',
    target: 'detectLocalMode',
    help:
      'Mode to use to detect local traffic: ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix.' +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'pod-bridge-interface',
    kind: 'string',
    target: 'detectLocal.bridgeInterface',
    help: 'A bridge interface name, for --detect-local-mode=BridgeInterface.',
  },
  {
    name: 'pod-interface-name-prefix',
    kind: 'string',
    target: 'detectLocal.interfaceNamePrefix',
    help: 'An interface name prefix, for --detect-local-mode=InterfaceNamePrefix.',
  },
  {
    name: 'cluster-cidr',
    kind: 'string',
    target: 'clusterCIDR',
    help: 'The CIDR range of the pods in the cluster (or a comma-separated dual-stack pair).' + IGNORED_WITH_CONFIG,
  },
  {
    name: 'nodeport-addresses',
    kind: 'strings',
    target: 'nodePortAddresses',
    help:
      "CIDRs of the node IPs that accept NodePort connections, or 'primary' / 'localhost' / 'all'. Default: 'primary' in nftables mode, all local IPs otherwise." +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'oom-score-adj',
    kind: 'int',
    target: 'oomScoreAdj',
    help: 'The oom-score-adj value for the kube-proxy process, in [-1000, 1000].' + IGNORED_WITH_CONFIG,
  },
  {
    name: 'conntrack-max-per-core',
    kind: 'int',
    target: 'conntrack.maxPerCore',
    help: 'Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min).',
  },
  {
    name: 'conntrack-min',
    kind: 'int',
    target: 'conntrack.min',
    help: 'Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core.',
  },
  {
    name: 'conntrack-tcp-timeout-established',
    kind: 'duration',
    target: 'conntrack.tcpEstablishedTimeout',
    help: 'Idle timeout for established TCP connections (0 to leave as-is).',
  },
  {
    name: 'conntrack-tcp-timeout-close-wait',
    kind: 'duration',
    target: 'conntrack.tcpCloseWaitTimeout',
    help: 'NAT timeout for TCP connections in the CLOSE_WAIT state.',
  },
  {
    name: 'conntrack-tcp-be-liberal',
    kind: 'bool',
    target: 'conntrack.tcpBeLiberal',
    help: 'Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1.',
  },
  {
    name: 'conntrack-udp-timeout',
    kind: 'duration',
    target: 'conntrack.udpTimeout',
    help: 'Idle timeout for UNREPLIED UDP connections (0 to leave as-is).',
  },
  {
    name: 'conntrack-udp-timeout-stream',
    kind: 'duration',
    target: 'conntrack.udpStreamTimeout',
    help: 'Idle timeout for ASSURED UDP connections (0 to leave as-is).',
  },
  {
    name: 'proxy-port-range',
    kind: 'string',
    target: 'portRange',
    help:
      'Range of host ports (beginPort-endPort, single port or beginPort+offset, inclusive) that may be consumed in order to proxy service traffic. If unspecified, 0, or 0-0, the kernel chooses each port. Only applicable for proxy-mode=userspace.' +
      IGNORED_WITH_CONFIG,
  },
  {
    name: 'udp-timeout',
    kind: 'duration',
    target: 'udpIdleTimeout',
    help:
      "How long an idle UDP connection will be kept open (e.g. '250ms', '2s'). Must be greater than 0. Only applicable for proxy-mode=userspace (default 250ms)." +
      AT_MOST,
  },
  {
    name: 'config-sync-period',
    kind: 'duration',
    target: 'configSyncPeriod',
    help: 'How often configuration from the apiserver is refreshed. Must be greater than 0.' + AT_MOST,
  },
  {
    name: 'feature-gates',
    kind: 'boolMap',
    target: 'featureGates',
    help: "A set of key=value pairs that describe feature gates for alpha/experimental features; the names are upstream kube-proxy v1.37's (an unknown name is an error).",
  },
  {
    name: 'profiling',
    kind: 'bool',
    target: 'enableProfiling',
    help: "If true, a CPU profile or a heap snapshot can be taken on demand with 'kube-proxy-ts profile' (over the control socket, root only; upstream serves pprof on the metrics port).",
  },
  {
    name: 'show-hidden-metrics-for-version',
    kind: 'string',
    noEffect: true,
    help: 'Accepted for compatibility; no effect.',
  },
  {
    name: 'v',
    kind: 'int',
    target: 'logging.verbosity',
    overridesFile: true,
    help: 'Log verbosity: 0-1 info, 2 and above debug.',
  },
  {
    name: 'logging-format',
    kind: 'string',
    target: 'logging.format',
    overridesFile: true,
    help: "Log format: 'text' (default) or 'json' (one JSON object a line).",
  },
  {
    name: 'init-only',
    kind: 'bool',
    control: true,
    help: "If true, perform the one-time initialization that needs full root privileges (conntrack and OOM score settings, the mode's kernel checks), then exit.",
  },
  // Logging flags of upstream's component-base (logsapi.AddFlags) that have no counterpart here.
  {
    name: 'vmodule',
    kind: 'string',
    overridesFile: true,
    noEffect: true,
    help: 'Comma-separated list of pattern=N settings for file-filtered logging (accepted for compatibility; no effect).',
  },
  {
    name: 'log-flush-frequency',
    kind: 'duration',
    overridesFile: true,
    noEffect: true,
    help: 'Maximum number of seconds between log flushes (accepted for compatibility; logs are written at once).',
  },
  {
    name: 'log-text-split-stream',
    kind: 'bool',
    overridesFile: true,
    noEffect: true,
    help: '[Alpha] In text format, write error messages to stderr and info messages to stdout (accepted for compatibility; no effect).',
  },
  {
    name: 'log-text-info-buffer-size',
    kind: 'string',
    overridesFile: true,
    noEffect: true,
    help: '[Alpha] In text format with split output streams, the size of the info buffer (accepted for compatibility; no effect).',
  },
  {
    name: 'log-json-split-stream',
    kind: 'bool',
    overridesFile: true,
    noEffect: true,
    help: '[Alpha] In JSON format, write error messages to stderr and info messages to stdout (accepted for compatibility; no effect).',
  },
  {
    name: 'log-json-info-buffer-size',
    kind: 'string',
    overridesFile: true,
    noEffect: true,
    help: '[Alpha] In JSON format with split output streams, the size of the info buffer (accepted for compatibility; no effect).',
  },
  // Registered globally by cAdvisor, which upstream links in: part of its --help.
  {
    name: 'boot-id-file',
    kind: 'string',
    noEffect: true,
    help: 'Comma-separated list of files to check for boot-id (accepted for compatibility; no effect).',
  },
  {
    name: 'machine-id-file',
    kind: 'string',
    noEffect: true,
    help: 'Comma-separated list of files to check for machine-id (accepted for compatibility; no effect).',
  },
  {
    name: 'manifest-dir',
    kind: 'string',
    target: 'kubeProxyTS.manifestDir',
    overridesFile: true,
    ours: true,
    help: `[kube-proxy-ts] Standalone mode: read Services and EndpointSlices from YAML/JSON manifests in this directory instead of the Kubernetes API (config file: kubeProxyTS.manifestDir); each a regular file of at most ${MIB(MAX_MANIFEST_BYTES)}.`,
  },
  {
    name: 'control-socket',
    kind: 'string',
    target: 'kubeProxyTS.controlSocket',
    overridesFile: true,
    ours: true,
    help: '[kube-proxy-ts] The local control socket (unix, root only) that `kube-proxy-ts explain` and `trace` ask; empty to serve none (config file: kubeProxyTS.controlSocket). Default /run/kube-proxy-ts/control.sock.',
  },
  {
    name: 'service-traffic-metrics',
    kind: 'bool',
    target: 'kubeProxyTS.serviceTrafficMetrics',
    overridesFile: true,
    ours: true,
    help: '[kube-proxy-ts] Export packets, bytes and connections per Service port (kubeproxyts_service_*), read from the kernel at scrape time; IPVS and nftables modes (nftables: adds counting chains, docs/nftables-ruleset.md), iptables mode connections only (config file: kubeProxyTS.serviceTrafficMetrics).',
  },
  {
    name: 'load-balancing',
    kind: 'string',
    target: 'kubeProxyTS.loadBalancing',
    overridesFile: true,
    ours: true,
    help: `[kube-proxy-ts] How Services pick an endpoint unless their ${LOAD_BALANCING_ANNOTATION} annotation says otherwise: ${LOAD_BALANCING_VALUES.join(', ')}; empty = each mode's upstream behaviour. A value the mode cannot honour leaves its default (docs/load-balancing.md; config file: kubeProxyTS.loadBalancing).`,
  },
];

/** One flag as given on the command line, parsed. */
export interface GivenFlag {
  spec: FlagSpec;
  value: FlatValue;
}

export type FlagParseResult =
  | { ok: true; given: GivenFlag[] }
  | { ok: false; kind: 'help' | 'version'; output: string }
  | { ok: false; kind: 'usage'; output: string };

function parseBool(v: string): boolean {
  if (/^(true|t|1)$/i.test(v)) return true;
  if (/^(false|f|0)$/i.test(v)) return false;
  throw new InvalidArgumentError(`"${v}" is not a boolean (true or false).`);
}

function parseInt32(v: string): number {
  if (!/^[+-]?\d+$/.test(v.trim())) throw new InvalidArgumentError(`"${v}" is not an integer.`);
  const n = Number(v);
  if (n < -(2 ** 31) || n >= 2 ** 31) throw new InvalidArgumentError(`"${v}" is out of range.`);
  return n;
}

function parseFloatArg(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`"${v}" is not a number.`);
  return n;
}

function parseDurationArg(v: string): number {
  try {
    return parseDuration(v);
  } catch (e) {
    throw new InvalidArgumentError(`${errorMessage(e)}.`);
  }
}

function parseBoolMap(v: string, prev: unknown): Record<string, boolean> {
  const out: Record<string, boolean> = { ...((prev as Record<string, boolean> | undefined) ?? {}) };
  for (const pair of v.split(',').filter((s) => s.trim() !== '')) {
    const eq = pair.indexOf('=');
    if (eq < 0) throw new InvalidArgumentError(`"${pair}" must be key=true or key=false.`);
    out[pair.slice(0, eq).trim()] = parseBool(pair.slice(eq + 1).trim());
  }
  return out;
}

/** pflag conventions commander does not have: '_' in names, "-v=2". */
export function normalizeArgv(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (const a of argv) {
    if (a === '--') {
      out.push(a);
      continue;
    }
    const long = /^--([^=]+)(=.*)?$/su.exec(a);
    // verflag's --version takes an optional value (true, false, raw); commander's takes none.
    if (long?.[1] === 'version' && long[2] !== undefined) {
      if (!/^=(false|f|0)$/i.test(long[2])) out.push('--version');
      continue;
    }
    if (long) {
      out.push(`--${long[1]!.replaceAll('_', '-')}${long[2] ?? ''}`);
      continue;
    }
    const shortEq = /^-([a-zA-Z])=(.*)$/su.exec(a);
    if (shortEq) {
      out.push(`-${shortEq[1]}`, shortEq[2]!);
      continue;
    }
    out.push(a);
  }
  return out;
}

/** What a blank command line runs with, per flag (the help shows it); empty values are left out. */
export function flagDefaults(): Map<string, string> {
  const kpc = toKubeProxyConfiguration(resolveConfig(new Map(), new Map()).config);
  const sections: Record<string, string> = {
    '@syncPeriod': 'iptables.syncPeriod',
    '@minSyncPeriod': 'iptables.minSyncPeriod',
    '@masqueradeAll': 'iptables.masqueradeAll',
  };
  const out = new Map<string, string>();
  for (const f of FLAGS) {
    if (f.target === undefined) continue;
    let v: unknown = kpc;
    for (const key of (sections[f.target] ?? f.target).split('.'))
      v = (v as Record<string, unknown> | undefined)?.[key];
    const text = Array.isArray(v)
      ? v.join(',')
      : typeof v === 'object' && v !== null
        ? Object.entries(v)
            .map(([k, b]) => `${k}=${String(b)}`)
            .join(',')
        : v === undefined
          ? ''
          : String(v as string | number | boolean);
    if (text !== '') out.set(f.name, text);
  }
  return out;
}

const DESCRIPTION_INDENT = 8;

/**
 * Each option on its own line, its description below it, wrapped to the terminal (80 columns
 * when not a terminal): upstream's flag names are too long to leave a description column.
 */
function formatItem(term: string, _termWidth: number, description: string, helper: Help): string {
  if (!description) return `  ${term}`;
  const width = Math.max((helper.helpWidth ?? 80) - DESCRIPTION_INDENT, 20);
  const pad = ' '.repeat(DESCRIPTION_INDENT);
  const body = wrapText(description, width)
    .split('\n')
    .map((l) => pad + l)
    .join('\n');
  return `  ${term}\n${body}`;
}

/** Joins words that wrapText keeps on one line, such as "(default 30s)". */
const NO_BREAK = '\u00a0';

/** Greedy word wrap at spaces (not at NO_BREAK); a word longer than the width gets a line of its own. */
export function wrapText(text: string, width: number): string {
  const lines: string[] = [];
  for (const paragraph of text.split('\n')) {
    let line = '';
    for (const word of paragraph.split(/[ \t\r]+/).filter((w) => w !== '')) {
      if (line !== '' && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else line = line === '' ? word : `${line} ${word}`;
    }
    lines.push(line);
  }
  return lines.join('\n').replaceAll(NO_BREAK, ' ');
}

/** The subcommands, for the end of --help. */
function commandsHelp(width: number): string {
  const items = COMMANDS.map((c) => {
    const body = wrapText(c.summary, Math.max(width - DESCRIPTION_INDENT, 20))
      .split('\n')
      .map((l) => ' '.repeat(DESCRIPTION_INDENT) + l)
      .join('\n');
    return `  kube-proxy-ts ${c.name} ${c.args}\n${body}`;
  });
  return `\nCommands (each takes --help):\n${items.join('\n')}\n`;
}

export function buildCommand(version: string, helpWidth?: number): Command {
  const defaults = flagDefaults();
  const cmd = new Command('kube-proxy-ts')
    .usage(`[flags] | ${COMMAND_NAMES.join('|')} ...`)
    .description(
      wrapText(
        'kube-proxy-ts: a drop-in replacement for Kubernetes kube-proxy. It programs the kernel over netlink ' +
          `so that traffic to Services reaches their endpoints, in one of its modes: ${modeList()} ` +
          '(--proxy-mode, or mode in the --config file). Flags and the --config file follow upstream kube-proxy.',
        helpWidth ?? 80,
      ),
    )
    .helpOption('-h, --help', 'Help for kube-proxy-ts.')
    .version(`kube-proxy-ts ${version}`, '--version', 'Print version information and quit.')
    .allowExcessArguments(false)
    .configureHelp({
      formatItem,
      // The flag table writes each default into the text itself; commander would add
      // "(preset: true)" to every [bool] flag, which says only that a bare --flag means true.
      optionDescription: (option) => option.description,
      ...(helpWidth !== undefined ? { helpWidth } : {}),
    })
    .addHelpText('after', () => commandsHelp(helpWidth ?? 80))
    .exitOverride();
  for (const f of FLAGS) {
    const short = f.name === 'v' ? '-v, ' : '';
    const shownDefault = defaults.get(f.name);
    const desc =
      (f.deprecated !== undefined ? `${f.help} (DEPRECATED: ${f.deprecated})` : f.help) +
      // Unless the text already says its default.
      (shownDefault !== undefined && !/\bdefault(ing)?\b/i.test(f.help) ? ` (default${NO_BREAK}${shownDefault})` : '');
    let opt: Option;
    switch (f.kind) {
      case 'bool':
        opt = new Option(`${short}--${f.name} [bool]`, desc).argParser(parseBool).preset(true);
        break;
      case 'int':
        opt = new Option(`${short}--${f.name} <int>`, desc).argParser(parseInt32);
        break;
      case 'float':
        opt = new Option(`--${f.name} <number>`, desc).argParser(parseFloatArg);
        break;
      case 'duration':
        opt = new Option(`--${f.name} <duration>`, desc).argParser(parseDurationArg);
        break;
      case 'strings':
        // pflag StringSlice: comma-separated; repeating the flag appends.
        opt = new Option(`--${f.name} <list>`, desc).argParser((v: string, prev: unknown) => [
          ...((prev as string[] | undefined) ?? []),
          ...v
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== ''),
        ]);
        break;
      case 'boolMap':
        opt = new Option(`--${f.name} <key=bool,...>`, desc).argParser(parseBoolMap);
        break;
      case 'string':
        opt = new Option(`--${f.name} <string>`, desc);
        break;
    }
    cmd.addOption(opt);
  }
  return cmd;
}

/** The terminal's width for --help, 80 when stdout is not a terminal. */
function terminalWidth(): number {
  return process.stdout.isTTY && process.stdout.columns > 0 ? process.stdout.columns : 80;
}

export function parseFlags(argv: readonly string[], version: string, helpWidth = terminalWidth()): FlagParseResult {
  let out = '';
  let errText = '';
  const cmd = buildCommand(version, helpWidth);
  cmd.configureOutput({
    writeOut: (s) => {
      out += s;
    },
    writeErr: (s) => {
      errText += s;
    },
    outputError: (s, write) => write(s),
  });
  try {
    cmd.parse(normalizeArgv(argv), { from: 'user' });
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.help')
      return { ok: false, kind: 'help', output: out };
    if (code === 'commander.version') return { ok: false, kind: 'version', output: out };
    if (code === 'commander.excessArguments') {
      const word = cmd.args[0] ?? '';
      return {
        ok: false,
        kind: 'usage',
        output:
          `kube-proxy-ts: unknown command ${JSON.stringify(word)}: the commands are ${commandNamesText()}; ` +
          `flags start with --\nRun 'kube-proxy-ts --help' for the commands and flags.\n`,
      };
    }
    let msg = errText !== '' ? errText : `${errorMessage(e)}\n`;
    // Commander suggests only for "--name"; do it for "--name=value" too.
    const unknown = /unknown option '--([^=']+)=[^']*'/.exec(msg);
    if (unknown !== null && !msg.includes('Did you mean')) {
      const near = closestFlag(unknown[1]!);
      if (near !== undefined) msg = `${msg.trimEnd()}\n(Did you mean --${near}?)\n`;
    }
    return {
      ok: false,
      kind: 'usage',
      output: `kube-proxy-ts: ${msg.trimEnd()}\nRun 'kube-proxy-ts --help' for the list of flags.\n`,
    };
  }
  const opts = cmd.opts();
  const given: GivenFlag[] = [];
  for (const o of cmd.options) {
    const key = o.attributeName();
    if (cmd.getOptionValueSource(key) !== 'cli') continue;
    const spec = FLAGS.find((f) => `--${f.name}` === o.long);
    const value = opts[key] as FlatValue | undefined;
    if (spec !== undefined && value !== undefined) given.push({ spec, value });
  }
  return { ok: true, given };
}

/** The flag name nearest to `name` (edit distance <= 2), if any. */
export function closestFlag(name: string): string | undefined {
  let best: string | undefined;
  let bestD = 3;
  for (const f of FLAGS) {
    const d = editDistance(name, f.name);
    if (d < bestD) {
      bestD = d;
      best = f.name;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}
