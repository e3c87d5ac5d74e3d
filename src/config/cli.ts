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

import { InputFileError, readInputFileSync } from '../sources/read-file.ts';
import { fileErrorReason } from './file-errors.ts';
import { parseConfigFile } from './file.ts';
import { FLAGS, MAX_CONFIG_BYTES, parseFlags, type GivenFlag } from './flags.ts';

export { MAX_CONFIG_BYTES };
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
import { formatConfigError, type ConfigAction, type ConfigError, type ProxyConfig } from './types.ts';
import { PROXY_MODES, type ProxyMode } from '../proxier/types.ts';
import { renderConfigYAML } from './write.ts';
import { writeNewFile } from './write-new-file.ts';

// MAX_CONFIG_BYTES (flags.ts, 1 MiB): a KubeProxyConfiguration is a few KiB; the limit keeps a
// path like /dev/zero or a runaway file from filling memory (a FIFO, a device or a socket is
// refused before any read, see sources/read-file.ts).

/** The --config file's text: a regular file of at most MAX_CONFIG_BYTES, as UTF-8. */
export function readConfigText(path: string): string {
  return readInputFileSync(path, MAX_CONFIG_BYTES);
}

export interface CommandLineDeps {
  /** Reads the --config file; default readConfigText. */
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

type ExitResult = Extract<CommandLineResult, { kind: 'exit' }>;

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
  for (const g of flags.given) {
    if (g.spec.deprecated !== undefined) warnings.push(`--${g.spec.name} is deprecated: ${g.spec.deprecated}`);
    if (g.spec.noEffect)
      warnings.push(`--${g.spec.name} is accepted for compatibility and has no effect in kube-proxy-ts`);
  }

  const withFile = configFile !== undefined && configFile !== '';
  const file = withFile ? readConfigFile(configFile, deps, warnings) : { values: new Map(), errors: [] };
  if ('kind' in file) return file;
  const values: FlatValues = file.values;
  const origins = new Map<string, string>();

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
  for (const g of flags.given) applyFlag(g, { values, origins, mode, withFile, warnings });
  if (!withFile) applyPortFlags(byName, values, origins);

  const resolved = resolveConfig(values, origins);
  warnings.push(...resolved.warnings);
  // A value the file set and validation refused: where it is in the file.
  const locate = 'locate' in file ? file.locate : undefined;
  for (const e of resolved.errors) {
    const at = e.flag === undefined ? locate?.(e.field) : undefined;
    if (at !== undefined) e.at = at;
  }
  const errors = [...file.errors, ...resolved.errors];
  if (errors.length > 0) return invalidConfig(errors, withFile ? `--config ${configFile}` : 'the command line');

  const action = actionOf(writeConfigTo, control('cleanup') === true, control('init-only') === true);
  return {
    kind: 'run',
    action,
    config: resolved.config,
    ...(withFile ? { configFile } : {}),
    ...(action === 'write-config' ? { writeConfigTo: writeConfigTo! } : {}),
    warnings,
  };
}

/** The --config file's values, or the exit for a file that cannot be read. */
function readConfigFile(
  configFile: string,
  deps: CommandLineDeps,
  warnings: string[],
): { values: FlatValues; errors: ConfigError[]; locate?: (path: string) => string | undefined } | ExitResult {
  let text: string;
  try {
    text = (deps.readFile ?? readConfigText)(configFile);
  } catch (e) {
    const why = e instanceof InputFileError ? `the file ${e.message}` : fileErrorReason(e);
    return {
      kind: 'exit',
      code: 1,
      stdout: '',
      stderr: `${PROGRAM}: cannot read --config ${configFile}: ${why}\n`,
    };
  }
  const parsed = parseConfigFile(text, configFile);
  warnings.push(...parsed.warnings);
  return { values: parsed.values, errors: parsed.errors, ...(parsed.locate ? { locate: parsed.locate } : {}) };
}

interface FlagTarget {
  values: FlatValues;
  /** Field path -> the flag that set it, for error messages. */
  origins: Map<string, string>;
  mode: ProxyMode;
  withFile: boolean;
  warnings: string[];
}

/** Sets the field a given flag maps to, in the selected mode's section; says why when it is ignored. */
function applyFlag(g: GivenFlag, { values, origins, mode, withFile, warnings }: FlagTarget): void {
  const { spec } = g;
  if (spec.control || spec.noEffect) return;
  if (withFile && !spec.overridesFile) {
    warnings.push(
      `--${spec.name} is ignored because --config is given (as upstream kube-proxy does); set it in the file`,
    );
    return;
  }
  // Upstream applies --iptables-* periods in every mode but ipvs, and --ipvs-* only in ipvs.
  if (
    (spec.name.startsWith('iptables-') && spec.name.endsWith('sync-period') && mode === 'ipvs') ||
    (spec.name.startsWith('ipvs-') && spec.name.endsWith('sync-period') && mode !== 'ipvs')
  ) {
    warnings.push(`--${spec.name} has no effect in ${mode} mode`);
    return;
  }
  if (spec.name === 'healthz-port' || spec.name === 'metrics-port' || spec.name === 'proxy-mode') return; // handled apart
  let target = spec.target;
  if (target === '@syncPeriod') target = `${syncSection(mode)}.syncPeriod`;
  else if (target === '@minSyncPeriod') target = `${syncSection(mode)}.minSyncPeriod`;
  else if (target === '@masqueradeAll') target = `${mode === 'nftables' ? 'nftables' : 'iptables'}.masqueradeAll`;
  if (target === undefined) return;
  values.set(target, g.value);
  origins.set(target, `--${spec.name}`);
}

/** Deprecated --healthz-port / --metrics-port: 0 disables, otherwise replaces the port. */
function applyPortFlags(
  byName: ReadonlyMap<string, GivenFlag>,
  values: FlatValues,
  origins: Map<string, string>,
): void {
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
    const base = typeof cur === 'string' && cur !== '' ? cur : field === 'healthzBindAddress' ? '0.0.0.0' : '127.0.0.1';
    const hp = splitHostPort(appendPortIfNeeded(base, port));
    const host = hp?.host ?? base;
    values.set(field, host.includes(':') ? `[${host}]:${p}` : `${host}:${p}`);
  }
}

/** Exit 2 when a flag set a bad value (a usage error), 1 when only the file did. */
function invalidConfig(errors: readonly ConfigError[], where: string): ExitResult {
  const fromFlags = errors.some((e) => e.flag !== undefined);
  // One error: one line, naming the value and why; several: one line each under a heading.
  const text =
    errors.length === 1
      ? ` ${formatConfigError(errors[0]!)}`
      : `\n${errors.map((e) => `  ${formatConfigError(e)}`).join('\n')}`;
  return {
    kind: 'exit',
    code: fromFlags ? 2 : 1,
    stdout: '',
    stderr: `${PROGRAM}: invalid configuration from ${where}:${text}\n`,
  };
}

/** Upstream's order in Options.Run: write the config, else clean up, else initialise (--init-only: and stop). */
function actionOf(writeConfigTo: string | undefined, cleanup: boolean, initOnly: boolean): ConfigAction {
  if (writeConfigTo !== undefined && writeConfigTo !== '') return 'write-config';
  if (cleanup) return 'cleanup';
  return initOnly ? 'init-only' : 'serve';
}

/** Writes the effective configuration for --write-config-to (the daemon calls this, then exits). */
export function writeConfigFile(path: string, config: ProxyConfig): void {
  writeNewFile(path, renderConfigYAML(config)); // never through a symlink: create, then rename
}

/** Names of every flag accepted, for documentation and tests. */
export const FLAG_NAMES: readonly string[] = FLAGS.map((f) => f.name);
