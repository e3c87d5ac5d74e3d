// The command line -> one effective ProxyConfig, or an exit (help, version, usage error,
// bad configuration). Library code: it never calls process.exit or writes to the console;
// the daemon prints the result and exits with its code.
//
// Precedence follows upstream kube-proxy: without --config, flags over defaults. With
// --config, the file wins and flags are ignored (upstream replaces its flag-built config
// with the file's), except --hostname-override, the logging flags (-v, --logging-format),
// --master and our own --manifest-dir, which still apply. Ignored flags are reported as
// warnings instead of silently, as upstream does.
//
// Exit codes: 0 help/version; 2 command-line usage (unknown flag, malformed value, or a
// flag value that fails validation); 1 a bad or unreadable --config file.

import { readFileSync } from 'node:fs';
import { parseConfigFile } from './file.ts';
import { FLAGS, parseFlags, type GivenFlag } from './flags.ts';
import {
  DEFAULT_MODE,
  HEALTHZ_PORT,
  METRICS_PORT,
  appendPortIfNeeded,
  resolveConfig,
  splitHostPort,
  syncSection,
} from './resolve.ts';
import type { FlatValues } from './schema.ts';
import {
  PROXY_MODES,
  formatConfigError,
  type ConfigAction,
  type ConfigError,
  type ProxyConfig,
  type ProxyMode,
} from './types.ts';
import { renderConfigYAML } from './write.ts';
import { writeNewFile } from './write-new-file.ts';

export interface CommandLineDeps {
  /** Reads the --config file; default: node:fs readFileSync as UTF-8. */
  readFile?: (path: string) => string;
  /** Version string printed by --version. */
  version?: string;
}

export type CommandLineResult =
  | {
      kind: 'run';
      action: ConfigAction;
      config: ProxyConfig;
      /** The --config path, when given. */
      configFile?: string;
      /** The --write-config-to path, when action is 'write-config'. */
      writeConfigTo?: string;
      /** Things the operator should know (ignored flags, unknown file fields); log them at start. */
      warnings: string[];
    }
  | { kind: 'exit'; code: 0 | 1 | 2; stdout: string; stderr: string };

const PROGRAM = 'kube-proxy-ts';

export function parseCommandLine(argv: readonly string[], deps: CommandLineDeps = {}): CommandLineResult {
  const version = deps.version ?? 'v0.0.0-unknown';
  const flags = parseFlags(argv, version);
  if (!flags.ok) {
    if (flags.kind === 'usage') return { kind: 'exit', code: 2, stdout: '', stderr: flags.output };
    return { kind: 'exit', code: 0, stdout: flags.output, stderr: '' };
  }
  const warnings: string[] = [];
  const byName = new Map<string, GivenFlag>(flags.given.map((g) => [g.spec.name, g]));
  const control = (name: string): GivenFlag['value'] | undefined => byName.get(name)?.value;

  const configFile = control('config') as string | undefined;
  const writeConfigTo = control('write-config-to') as string | undefined;
  const cleanup = control('cleanup') === true;
  const initOnly = control('init-only') === true;

  for (const g of flags.given) {
    if (g.spec.deprecated !== undefined) warnings.push(`--${g.spec.name} is deprecated: ${g.spec.deprecated}`);
    if (g.spec.noEffect)
      warnings.push(`--${g.spec.name} is accepted for compatibility and has no effect in kube-proxy-ts`);
  }

  let values: FlatValues = new Map();
  const origins = new Map<string, string>();
  let fileErrors: ConfigError[] = [];

  if (configFile !== undefined && configFile !== '') {
    let text: string;
    try {
      text = (deps.readFile ?? ((p: string) => readFileSync(p, 'utf8')))(configFile);
    } catch (e) {
      return {
        kind: 'exit',
        code: 1,
        stdout: '',
        stderr: `${PROGRAM}: cannot read --config ${configFile}: ${(e as Error).message}\n`,
      };
    }
    const parsed = parseConfigFile(text, configFile);
    values = parsed.values;
    fileErrors = parsed.errors;
    warnings.push(...parsed.warnings);
  }
  const withFile = configFile !== undefined && configFile !== '';

  // The mode decides where the mode-dependent flags land, so it is settled first.
  const modeFlag = byName.get('proxy-mode');
  if (modeFlag !== undefined && !withFile) {
    values.set('mode', modeFlag.value);
    origins.set('mode', '--proxy-mode');
  }
  const modeText = values.get('mode');
  const mode: ProxyMode =
    typeof modeText === 'string' && (PROXY_MODES as readonly string[]).includes(modeText)
      ? (modeText as ProxyMode)
      : DEFAULT_MODE;

  for (const g of flags.given) {
    const { spec } = g;
    if (spec.control || spec.noEffect) continue;
    if (withFile && !spec.overridesFile) {
      warnings.push(
        `--${spec.name} is ignored because --config is given (as upstream kube-proxy does); set it in the file`,
      );
      continue;
    }
    // Upstream applies --iptables-* periods in every mode but ipvs, and --ipvs-* only in ipvs.
    if (
      (spec.name.startsWith('iptables-') && spec.name.endsWith('sync-period') && mode === 'ipvs') ||
      (spec.name.startsWith('ipvs-') && spec.name.endsWith('sync-period') && mode !== 'ipvs')
    ) {
      warnings.push(`--${spec.name} has no effect in ${mode} mode`);
      continue;
    }
    if (spec.name === 'healthz-port' || spec.name === 'metrics-port' || spec.name === 'proxy-mode') continue; // handled apart
    let target = spec.target;
    if (target === '@syncPeriod') target = `${syncSection(mode)}.syncPeriod`;
    else if (target === '@minSyncPeriod') target = `${syncSection(mode)}.minSyncPeriod`;
    else if (target === '@masqueradeAll') target = `${mode === 'nftables' ? 'nftables' : 'iptables'}.masqueradeAll`;
    if (target === undefined) continue;
    values.set(target, g.value);
    origins.set(target, `--${spec.name}`);
  }

  // Deprecated --healthz-port / --metrics-port: 0 disables, otherwise replaces the port.
  if (!withFile) {
    for (const [flag, field, port] of [
      ['healthz-port', 'healthzBindAddress', HEALTHZ_PORT],
      ['metrics-port', 'metricsBindAddress', METRICS_PORT],
    ] as const) {
      const g = byName.get(flag);
      if (g === undefined) continue;
      const p = g.value as number;
      const cur = values.get(field);
      origins.set(field, `--${flag}`);
      if (p === 0) {
        values.set(field, '');
        continue;
      }
      const base =
        typeof cur === 'string' && cur !== '' ? cur : field === 'healthzBindAddress' ? '0.0.0.0' : '127.0.0.1';
      const hp = splitHostPort(appendPortIfNeeded(base, port));
      const host = hp?.host ?? base;
      values.set(field, host.includes(':') ? `[${host}]:${p}` : `${host}:${p}`);
    }
  }

  const resolved = resolveConfig(values, origins);
  warnings.push(...resolved.warnings);
  const errors = [...fileErrors, ...resolved.errors];
  if (errors.length > 0) {
    const fromFlags = errors.some((e) => e.flag !== undefined);
    const where = withFile ? `--config ${configFile}` : 'the command line';
    const lines = errors.map((e) => `  ${formatConfigError(e)}`).join('\n');
    return {
      kind: 'exit',
      code: fromFlags ? 2 : 1,
      stdout: '',
      stderr: `${PROGRAM}: invalid configuration from ${where}:\n${lines}\n`,
    };
  }

  // Upstream's order in Options.Run: write the config, else clean up, else initialise (and stop there with --init-
  // only).
  const action: ConfigAction =
    writeConfigTo !== undefined && writeConfigTo !== ''
      ? 'write-config'
      : cleanup
        ? 'cleanup'
        : initOnly
          ? 'init-only'
          : 'serve';
  return {
    kind: 'run',
    action,
    config: resolved.config,
    ...(withFile ? { configFile } : {}),
    ...(action === 'write-config' ? { writeConfigTo: writeConfigTo! } : {}),
    warnings,
  };
}

/** Writes the effective configuration for --write-config-to (the daemon calls this, then exits). */
export function writeConfigFile(path: string, config: ProxyConfig): void {
  writeNewFile(path, renderConfigYAML(config)); // never through a symlink: create, then rename
}

/** Names of every flag accepted, for documentation and tests. */
export const FLAG_NAMES: readonly string[] = FLAGS.map((f) => f.name);
