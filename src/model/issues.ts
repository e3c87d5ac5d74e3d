// Problems found in input objects. Normalizers collect them instead of throwing; the tracker
// reports each rejected object once (one warning per object, naming it and every reason) and
// counts it, so one bad object never affects another.

import type { Logger } from '../base/logger.ts';

export type RejectKind = 'Service' | 'EndpointSlice' | 'Node' | 'ServiceCIDR' | 'Options';

export type RejectReason =
  | 'not-an-object'
  | 'missing-name'
  | 'invalid-name'
  | 'missing-service-name'
  | 'unknown-type'
  | 'invalid-cluster-ip'
  | 'too-many-ports'
  | 'invalid-port'
  | 'unknown-protocol'
  | 'duplicate-port'
  | 'invalid-node-port'
  | 'invalid-external-ip'
  | 'invalid-source-range'
  | 'invalid-load-balancer-ip'
  | 'invalid-health-check-node-port'
  | 'invalid-session-affinity'
  | 'unknown-address-type'
  | 'too-many-endpoints'
  | 'endpoint-without-address'
  | 'invalid-endpoint-ip'
  | 'endpoint-family-mismatch'
  | 'invalid-node-address'
  | 'invalid-cidr'
  | 'internal-error';

export interface Issue {
  readonly reason: RejectReason;
  /** What exactly: "port 'http': 70000", "address 10.0.0.300". */
  readonly detail: string;
}

/** Collects issues while normalizing one object. */
export class Issues {
  readonly list: Issue[] = [];
  add(reason: RejectReason, detail: string): void {
    this.list.push({ reason, detail });
  }
}

export type RejectCallback = (kind: RejectKind, reason: RejectReason) => void;

/** Details beyond this many per reason are summarised as a count, to keep one line short. */
const MAX_DETAILS = 5;

/**
 * Logs and counts rejects. An object re-delivered unchanged (periodic resync) with the same
 * problems is not reported again; a new version of it, or new problems, are.
 */
export class RejectLog {
  /** "Kind/reason" -> how many times it was reported. */
  readonly counts = new Map<string, number>();
  private readonly last = new Map<string, string>();
  private readonly logger: Logger;
  private readonly onReject: RejectCallback | undefined;

  constructor(logger: Logger, onReject?: RejectCallback) {
    this.logger = logger;
    this.onReject = onReject;
  }

  /** Reports the issues of one object (key "ns/name"); no issues clears its memory. */
  report(
    kind: RejectKind,
    key: string,
    issues: readonly Issue[],
    version = '',
    level: 'warn' | 'error' = 'warn',
  ): void {
    if (issues.length === 0) {
      // The common case, once per event: no key text is built unless something is remembered.
      if (this.last.size > 0) this.last.delete(`${kind}/${key}`);
      return;
    }
    const id = `${kind}/${key}`;
    const byReason = new Map<RejectReason, string[]>();
    for (const i of issues) {
      const d = byReason.get(i.reason);
      if (d) d.push(i.detail);
      else byReason.set(i.reason, [i.detail]);
    }
    const reasons = [...byReason.keys()].sort();
    const details = reasons.map((r) => {
      const d = byReason.get(r)!;
      const shown = d.slice(0, MAX_DETAILS).join('; ');
      return d.length > MAX_DETAILS ? `${r}: ${shown}; and ${d.length - MAX_DETAILS} more` : `${r}: ${shown}`;
    });
    const signature = `${version}|${details.join('|')}`;
    if (this.last.get(id) === signature) return;
    this.last.set(id, signature);
    this.logger[level](`skipping invalid parts of ${kind} ${key}: ${details.join(' / ')}`, {
      kind,
      object: key,
      reasons,
    });
    for (const r of reasons) {
      const c = `${kind}/${r}`;
      this.counts.set(c, (this.counts.get(c) ?? 0) + 1);
      this.onReject?.(kind, r);
    }
  }

  /** Forgets a deleted object so that it is reported again if it comes back broken. */
  forget(kind: RejectKind, key: string): void {
    this.last.delete(`${kind}/${key}`);
  }
}
