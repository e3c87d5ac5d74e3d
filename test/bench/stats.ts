// Statistics and formatting shared by every benchmark module: one definition of median and
// percentile, so that figures side by side in BENCHMARKS.md are computed the same way.
//
// Percentiles interpolate linearly between the two nearest ranks (numpy's default, "type 7"),
// so the median of an even number of samples is the mean of the two middle ones, and p0/p100
// are the minimum and maximum.

export interface Summary {
  runs: number;
  median: number;
  p10: number;
  p90: number;
  min: number;
  max: number;
  mean: number;
}

function sorted(samples: readonly number[]): number[] {
  if (samples.length === 0) throw new RangeError('no samples');
  for (const x of samples) if (!Number.isFinite(x)) throw new RangeError(`sample is not a finite number: ${x}`);
  return [...samples].sort((a, b) => a - b);
}

/** The q-quantile (0 ≤ q ≤ 1) of already sorted, non-empty samples. */
function quantileSorted(s: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile out of [0, 1]: ${q}`);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = s[lo]!;
  const b = s[hi]!;
  return a + (b - a) * (pos - lo);
}

/** The p-th percentile (0 ≤ p ≤ 100) of non-empty samples, in any order. */
export function percentile(samples: readonly number[], p: number): number {
  return quantileSorted(sorted(samples), p / 100);
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

export function summarize(samples: readonly number[]): Summary {
  const s = sorted(samples);
  return {
    runs: s.length,
    median: quantileSorted(s, 0.5),
    p10: quantileSorted(s, 0.1),
    p90: quantileSorted(s, 0.9),
    min: s[0]!,
    max: s[s.length - 1]!,
    mean: s.reduce((a, b) => a + b, 0) / s.length,
  };
}

/** Below this many runs p10/p90 say nothing the extremes do not: the spread is min–max. */
export const PERCENTILE_SPREAD_MIN_RUNS = 10;

/** Three significant digits, without exponent notation and without trailing noise. */
function sig3(x: number): string {
  if (x === 0) return '0';
  const a = Math.abs(x);
  const decimals = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return x.toFixed(decimals);
}

/**
 * A duration given in milliseconds, in the unit that reads best: µs below 1 ms, s from 1 s on.
 * formatMs(0.0421) = "42.1 µs", formatMs(12.34) = "12.3 ms", formatMs(2345) = "2.35 s".
 */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const a = Math.abs(ms);
  if (a < 1) return `${sig3(ms * 1000)} µs`;
  if (a < 1000) return `${sig3(ms)} ms`;
  return `${sig3(ms / 1000)} s`;
}

/** Microseconds, for callers that measure in µs. */
export function formatUs(us: number): string {
  return formatMs(us / 1000);
}

/** The low and high ends of the spread reported for a summary, and which ones they are. */
export function spreadOf(s: Summary): { kind: 'p10–p90' | 'min–max'; low: number; high: number } {
  return s.runs >= PERCENTILE_SPREAD_MIN_RUNS
    ? { kind: 'p10–p90', low: s.p10, high: s.p90 }
    : { kind: 'min–max', low: s.min, high: s.max };
}

/** "p10–p90 1.20–3.40 ms" style: both ends in the unit of the larger, so they read as a range. */
export function formatSpread(s: Summary): string {
  if (s.runs === 1) return 'one run';
  const { kind, low, high } = spreadOf(s);
  return `${kind} ${formatRange(low, high)}`;
}

/** "1.20–3.40 ms": a range of milliseconds in one unit. */
export function formatRange(lowMs: number, highMs: number): string {
  const hi = formatMs(highMs);
  const unit = hi.slice(hi.lastIndexOf(' ') + 1);
  const scale = unit === 'µs' ? 1000 : unit === 's' ? 1 / 1000 : 1;
  return `${sig3(lowMs * scale)}–${hi}`;
}

/** "12.3 ms (p10–p90 11.0–14.2 ms, 20 runs)". */
export function formatSummary(s: Summary): string {
  return `${formatMs(s.median)} (${formatSpread(s)}, ${s.runs} run${s.runs === 1 ? '' : 's'})`;
}

/** 10000 → "10,000". */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** How many times faster `ours` is than `theirs` (both durations): "12.3×", or "0.50×" when slower. */
export function formatRatio(theirs: number, ours: number): string {
  if (!(ours > 0) || !Number.isFinite(theirs)) return '—';
  const r = theirs / ours;
  return `${r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r.toFixed(2)}×`;
}
