// Configuration: kube-proxy's flags and KubeProxyConfiguration file -> one ProxyConfig.
export {
  parseCommandLine,
  readConfigText,
  MAX_CONFIG_BYTES,
  writeConfigFile,
  FLAG_NAMES,
  type CommandLineDeps,
  type CommandLineResult,
} from './cli.ts';
export { parseConfigFile } from './file.ts';
export {
  resolveConfig,
  DEFAULT_CONTROL_SOCKET,
  DEFAULT_MODE,
  DEFAULTED_MODE_WARNING,
  HEALTHZ_PORT,
  METRICS_PORT,
  splitHostPort,
} from './resolve.ts';
export { renderConfigYAML, toKubeProxyConfiguration } from './write.ts';
export { parseDuration, formatDuration } from './duration.ts';
export * from './types.ts';
