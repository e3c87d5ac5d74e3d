// The conntrack tunables kube-proxy sets at start-up (--conntrack-max-per-core, --conntrack-min,
// --conntrack-tcp-timeout-established, --conntrack-tcp-timeout-close-wait, --conntrack-tcp-be-
// liberal, --conntrack-udp-timeout, --conntrack-udp-timeout-stream), as upstream's
// cmd/kube-proxy/app/server_linux.go: a value of 0 leaves the kernel's setting alone.
//
// Failures are logged, not fatal: in a container or a non-initial network namespace
// nf_conntrack_max is read-only, which upstream also tolerates. Upstream also raises the
// nf_conntrack hashsize (a module parameter under /sys); we do not touch /sys.

import type { Logger } from '../base/logger.ts';
import type { ProxyConfig } from '../config/index.ts';
import type { SysctlWriter } from '../proxier/ipvs/index.ts';

const sec = (ms: number): number => Math.floor(ms / 1000);

/** The sysctls to write, in order; pure. */
export function conntrackSysctls(c: ProxyConfig['conntrack'], cpus: number): [string, number][] {
  const out: [string, number][] = [];
  if (c.maxPerCore > 0) out.push(['net/netfilter/nf_conntrack_max', Math.max(c.maxPerCore * Math.max(1, cpus), c.min)]);
  if (c.tcpEstablishedTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_tcp_timeout_established', sec(c.tcpEstablishedTimeoutMs)]);
  if (c.tcpCloseWaitTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_tcp_timeout_close_wait', sec(c.tcpCloseWaitTimeoutMs)]);
  if (c.tcpBeLiberal) out.push(['net/netfilter/nf_conntrack_tcp_be_liberal', 1]);
  if (c.udpTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_udp_timeout', sec(c.udpTimeoutMs)]);
  if (c.udpStreamTimeoutMs > 0) out.push(['net/netfilter/nf_conntrack_udp_timeout_stream', sec(c.udpStreamTimeoutMs)]);
  return out;
}

export async function applyConntrackSettings(c: ProxyConfig['conntrack'], cpus: number, sysctl: SysctlWriter, logger: Logger): Promise<void> {
  for (const [path, value] of conntrackSysctls(c, cpus)) {
    try {
      await sysctl.set(path, value);
      logger.debug('Set conntrack tunable', { sysctl: path, value });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      const fields = { op: 'set sysctl', sysctl: path, value, err: text };
      // Read-only: a container, or nf_conntrack_max outside the host's network namespace.
      if (/\b(EACCES|EROFS|EPERM)\b/.test(text)) logger.info('Conntrack tunable is read-only here; leaving the kernel value', fields);
      else logger.warn('Cannot set conntrack tunable; leaving the kernel value', fields);
    }
  }
}
