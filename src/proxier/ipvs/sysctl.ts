// The sysctls upstream's IPVS mode needs. The proxier never touches /proc itself (no fs in
// proxiers): the daemon passes a SysctlWriter that writes /proc/sys/<path>.

import type { SysctlWriter } from '../types.ts';
import { Sysctl } from './names.ts';

/** A writer that records what it was asked, for tests and for --init-only dry runs. */
export class RecordingSysctl implements SysctlWriter {
  readonly values = new Map<string, number>();
  fail = new Set<string>();
  set(path: string, value: number): Promise<void> {
    if (this.fail.has(path)) return Promise.reject(new Error(`sysctl ${path}: ENOENT`));
    this.values.set(path, value);
    return Promise.resolve();
  }
}

/**
 * upstream NewProxier: vs/conntrack=1 (IPVS keeps conntrack entries, so SNAT and nf rules
 * see the flows), vs/expire_nodest_conn=1 (drop connections to deleted real servers instead
 * of black-holing them), vs/expire_quiescent_template=1 (persistence templates of weight-0
 * servers expire, so affinity does not pin clients to a draining pod), ip_forward=1, and with
 * strictARP arp_ignore=1/arp_announce=2 (kube-ipvs0 VIPs are not answered on other links).
 * conn_reuse_mode is left as is: upstream only changes it on kernels older than 5.9 (kubernetes issue
 * 93297), and we target newer ones.
 */
export function ipvsSysctls(strictARP: boolean): [string, number][] {
  const out: [string, number][] = [
    [Sysctl.VS_CONNTRACK, 1],
    [Sysctl.VS_EXPIRE_NODEST_CONN, 1],
    [Sysctl.VS_EXPIRE_QUIESCENT_TEMPLATE, 1],
    [Sysctl.IP_FORWARD, 1],
  ];
  if (strictARP) out.push([Sysctl.ARP_IGNORE, 1], [Sysctl.ARP_ANNOUNCE, 2]);
  return out;
}
