// What /flagz lists: every flag of the command line with its value as pflag prints it (upstream
// lists every flag, set or not). A flag that sets a configuration field shows the effective
// value of that field (so a value from --config shows too); the others their defaults.

import { FLAGS, type FlagSpec } from '../config/flags.ts';
import { formatDuration, toKubeProxyConfiguration, type ProxyConfig } from '../config/index.ts';
import { syncSection } from '../config/resolve.ts';

/** pflag's defaults of the flags that set no field here. */
const UNTARGETED_DEFAULTS: Readonly<Record<string, string>> = {
  'write-config-to': '',
  cleanup: 'false',
  'init-only': 'false',
  'show-hidden-metrics-for-version': '',
  vmodule: '',
  'log-flush-frequency': '5s',
  'log-text-split-stream': 'false',
  'log-text-info-buffer-size': '0',
  'log-json-split-stream': 'false',
  'log-json-info-buffer-size': '0',
  'boot-id-file': '/proc/sys/kernel/random/boot_id',
  'machine-id-file': '/etc/machine-id,/var/lib/dbus/machine-id',
};

/** A value as pflag's Value.String() writes it for a flag of this kind. */
export function pflagText(kind: FlagSpec['kind'], v: unknown): string {
  if (v === undefined || v === null) return '';
  switch (kind) {
    case 'duration':
      return typeof v === 'number' ? formatDuration(v) : String(v);
    case 'strings':
      return `[${(Array.isArray(v) ? v : [v]).join(',')}]`;
    case 'boolMap': {
      const m = v as Record<string, boolean>;
      return Object.keys(m)
        .sort()
        .map((k) => `${k}=${m[k]}`)
        .join(',');
    }
    default:
      return String(v);
  }
}

function lookup(obj: unknown, path: string): unknown {
  let cur = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

const portOf = (address: string): string => /:(\d+)$/.exec(address)?.[1] ?? '0';

export function flagzValues(config: ProxyConfig, configFile = ''): Record<string, string> {
  const file = toKubeProxyConfiguration(config);
  const section = syncSection(config.mode);
  const out: Record<string, string> = {};
  for (const f of FLAGS) {
    let path = f.target;
    if (path === '@syncPeriod') path = `${section}.syncPeriod`;
    else if (path === '@minSyncPeriod') path = `${section}.minSyncPeriod`;
    else if (path === '@masqueradeAll') path = 'iptables.masqueradeAll';
    if (f.name === 'config') out[f.name] = configFile;
    else if (f.name === 'healthz-port') out[f.name] = portOf(config.healthzBindAddress);
    else if (f.name === 'metrics-port') out[f.name] = portOf(config.metricsBindAddress);
    else if (path === undefined) out[f.name] = UNTARGETED_DEFAULTS[f.name] ?? '';
    else out[f.name] = pflagText(f.kind, lookup(file, path) ?? lookup(config, path));
  }
  return out;
}
