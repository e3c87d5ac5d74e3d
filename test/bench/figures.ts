// The structured side of a benchmark run: besides its markdown sections, a module hands the
// runner figures (one number each, with the mode, the cluster shape and who produced it), from
// which run.ts writes the run's JSON, the summary tables and the charts. The summary and the
// charts read only these (results.ts), so they cannot disagree with each other or with the JSON.

export const MODES = ['nftables', 'iptables', 'ipvs', 'userspace'] as const;
export type Mode = (typeof MODES)[number];

/**
 * What a figure measures. End to end (the daemon process against an API server, timed with
 * packets): coldStart, changeE2E, rss, churnCpu, churnP99. In process (the proxier fed by the
 * model, no start-up), where an exec peer stands beside it: fullSync, oneChange. Data path:
 * firstPacket, roundTrip.
 */
export type Metric =
  'coldStart' | 'changeE2E' | 'rss' | 'churnCpu' | 'churnP99' | 'fullSync' | 'oneChange' | 'firstPacket' | 'roundTrip';

export type Unit = 'ms' | 'MiB' | 'cores';

/** Who produced a figure: our daemon or proxier, or the exec tool upstream's way runs. */
export const OURS = 'ours';

export interface Figure {
  mode: Mode;
  metric: Metric;
  /** 'ours', or the exec peer as a reader knows it, e.g. "nft -f (upstream-shaped ruleset)". */
  series: string;
  services: number;
  endpoints: number;
  /** Which reading of the metric, e.g. 'last Service', 'new Service', 'peak', '100/s'. */
  variant?: string;
  /** Updates per second (churn figures). */
  rate?: number;
  value: number;
  unit: Unit;
  /** Conditions a reader must know to compare, e.g. 'under QEMU (software emulation)'. */
  where?: string;
}

/** A figure; drops values that are not finite numbers (a size that did not run), so callers can map freely. */
export function figure(f: Figure): Figure[] {
  return Number.isFinite(f.value) ? [f] : [];
}

export const shape = (services: number, endpoints: number): string =>
  services === 0 ? 'idle' : `${services.toLocaleString('en-US')} × ${endpoints}`;
