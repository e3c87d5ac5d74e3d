// The conntrack tunables kube-proxy sets at start-up (--conntrack-max-per-core, --conntrack-min,
// --conntrack-tcp-timeout-established, --conntrack-tcp-timeout-close-wait, --conntrack-tcp-be-
// liberal, --conntrack-udp-timeout, --conntrack-udp-timeout-stream), as upstream's
// pkg/proxy/conntrack/sysctls.go:
//
//   max = maxPerCore x CPUs, capped at 1048576 (2^20), else min when that is larger; 0
//         per core leaves the limit alone. nf_conntrack_max is written when it differs
//         (lowered too, as upstream's setIntSysCtl), then the hash table is grown to max/4
//         buckets (/sys/module/nf_conntrack/parameters/hashsize) when it is smaller; a
//         larger hash table stays.
//   timeouts and be_liberal: written when they differ; 0 leaves the kernel's value.
//
// Upstream's "Set sysctl" log line, written after the write succeeded (upstream logs its
// "Setting ..." lines before trying). Failures are logged, not fatal: in a container or a non-initial network
// namespace nf_conntrack_max and /sys are read-only.

import { errorMessage } from '../base/errors.ts';
import { readFile, writeFile } from 'node:fs/promises';
import type { Logger } from '../base/logger.ts';
import type { ProxyConfig } from '../config/index.ts';

/** Upstream's cap on the scaled value (memory on many-core machines). */
export const CONNTRACK_MAX_LIMIT = 1_048_576;
export const HASHSIZE_PATH = '/sys/module/nf_conntrack/parameters/hashsize';
const MAX = 'net/netfilter/nf_conntrack_max';

/** What the settings read and write; tests pass a fake. */
export interface ConntrackIO {
  /** The sysctl's value, undefined when it cannot be read. */
  getSysctl(path: string): Promise<number | undefined>;
  setSysctl(path: string, value: number): Promise<void>;
  readFile(path: string): Promise<string>;
  writeFile(path: string, text: string): Promise<void>;
}

export const procConntrackIO = (root = '/proc/sys'): ConntrackIO => ({
  getSysctl: async (path) => {
    const n = Number((await readFile(`${root}/${path}`, 'utf8').catch(() => '')).trim());
    return Number.isInteger(n) && n >= 0 ? n : undefined;
  },
  setSysctl: (path, value) => writeFile(`${root}/${path}`, `${value}\n`),
  readFile: (path) => readFile(path, 'utf8'),
  writeFile: (path, text) => writeFile(path, text, { mode: 0o640 }),
});

/** Upstream's getConntrackMax: 0 = leave nf_conntrack_max alone. */
export function conntrackMax(c: Pick<ProxyConfig['conntrack'], 'maxPerCore' | 'min'>, cpus: number): number {
  if (c.maxPerCore <= 0) return 0;
  const scaled = c.maxPerCore * Math.max(1, cpus);
  if (scaled > CONNTRACK_MAX_LIMIT) return CONNTRACK_MAX_LIMIT;
  return scaled > c.min ? scaled : c.min;
}

const sec = (ms: number): number => Math.floor(ms / 1000);

/** The tunables other than nf_conntrack_max, in upstream's order; pure. */
export function conntrackSysctls(c: ProxyConfig['conntrack']): [string, number][] {
  const out: [string, number][] = [];
  if (c.tcpEstablishedTimeoutMs > 0)
    out.push(['net/netfilter/nf_conntrack_tcp_timeout_established', sec(c.tcpEstablishedTimeoutMs)]);
  if (c.tcpCloseWaitTimeoutMs > 0)
    out.push(['net/netfilter/nf_conntrack_tcp_timeout_close_wait', sec(c.tcpCloseWaitTimeoutMs)]);
  if (c.tcpBeLiberal) out.push(['net/netfilter/nf_conntrack_tcp_be_liberal', 1]);
  if (c.udpTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_udp_timeout', sec(c.udpTimeoutMs)]);
  if (c.udpStreamTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_udp_timeout_stream', sec(c.udpStreamTimeoutMs)]);
  return out;
}

const codeOrMessage = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? errorMessage(e);

function failed(logger: Logger, what: string, value: number, err: unknown): void {
  const text = codeOrMessage(err);
  const fields = { op: 'set conntrack tunable', what, value, err: text };
  // Read-only: a container, or outside the host's network namespace (as upstream tolerates).
  if (/\b(EACCES|EROFS|EPERM)\b/.test(text))
    logger.info('Conntrack tunable is read-only here; leaving the kernel value', fields);
  else logger.warn('Cannot set conntrack tunable; leaving the kernel value', fields);
}

// Each write is logged once it succeeded: a read-only file gets its failure line alone.
async function setMax(max: number, io: ConntrackIO, logger: Logger): Promise<void> {
  const cur = await io.getSysctl(MAX);
  if (cur !== max) {
    await io.setSysctl(MAX, max);
    logger.info('Set sysctl', { entry: MAX, value: max });
  }
  const hashsize = Number((await io.readFile(HASHSIZE_PATH)).trim());
  if (Number.isInteger(hashsize) && hashsize >= Math.floor(max / 4)) return;
  await io.writeFile(HASHSIZE_PATH, String(Math.floor(max / 4)));
  logger.info('Set conntrack hashsize', { conntrackHashsize: Math.floor(max / 4) });
}

export async function applyConntrackSettings(
  c: ProxyConfig['conntrack'],
  cpus: number,
  io: ConntrackIO,
  logger: Logger,
): Promise<void> {
  const max = conntrackMax(c, cpus);
  if (max > 0) await setMax(max, io, logger).catch((err: unknown) => failed(logger, 'nf_conntrack_max', max, err));
  for (const [path, value] of conntrackSysctls(c)) {
    try {
      if ((await io.getSysctl(path)) === value) continue;
      await io.setSysctl(path, value);
      logger.info('Set sysctl', { entry: path, value });
    } catch (err) {
      failed(logger, path, value, err);
    }
  }
}
