// What every mode's proxier offers the daemon. A proxier owns only kernel objects that carry
// its name, is idempotent (the same desired state twice changes nothing), and reports what
// a sync cost so the daemon can fill metrics and logs.

import type { ChangeSet, DesiredState } from '../model/index.ts';

export type ProxyMode = 'nftables' | 'ipvs' | 'iptables' | 'userspace';

export interface SyncReport {
  /** The sync rebuilt or re-read everything (first sync, periodic, after a failure). */
  full: boolean;
  /** Service ports whose rules this sync wrote. */
  servicesChanged: number;
  /** Time spent in kernel calls (netlink round trips), milliseconds. */
  kernelMs: number;
  /** Time spent planning (pure code), milliseconds. */
  planMs: number;
  /** Problems that did not fail the sync (a Service skipped, a retryable cleanup). */
  errors: string[];
  /** Kernel transactions (batches) the sync was cut into. */
  batches?: number;
  /** The longest single kernel commit, milliseconds: what holds the kernel's lock longest. */
  longestBatchMs?: number;
  /** The separate clean-up of stale objects failed (nftables: upstream's cleanup-failure counter). */
  cleanupFailed?: boolean;
  /** Service ports the kernel refused in this sync (each is in `errors`), skipped until they change. */
  refused?: number;
}

export interface Proxier {
  readonly mode: ProxyMode;
  /**
   * Brings the kernel to `desired`. `change` says what moved since the last successful
   * sync; with change.full (or after a failed sync) the proxier re-reads the kernel.
   * Throws on failure; the daemon retries with a full sync.
   */
  sync(desired: DesiredState, change: ChangeSet, signal: AbortSignal): Promise<SyncReport>;
  /** Removes every kernel object this mode created, and nothing else. Safe to run twice. */
  cleanup(): Promise<void>;
}
