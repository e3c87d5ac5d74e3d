// Go duration strings, as upstream's flags and KubeProxyConfiguration (metav1.Duration)
// use them: "30s", "1m30s", "250ms", "1h0m0s", "1.5h", "-5s", "0". We keep milliseconds:
// nothing kube-proxy configures is finer than that, and sub-millisecond parts round (a
// duration that is not zero never rounds to 0, which means "unset" in a config file:
// "1ns" is 1 ms, "-1ns" is -1 ms).
//
// Every configured duration is held to MAX_DURATION_MS (boundDuration, on the way from
// flags and file into the config): the longest a timer can wait. Upstream's Go takes up to
// 290 years; a value above ours means "rarely" there too, so it is clamped with a warning
// rather than refused, and a configuration that ran upstream still starts.

import { MAX_TIMER_MS } from '../base/clock.ts';

/**
 * The longest configured duration: Node's timer limit, 2^31-1 ms (596h31m23.647s). It also
 * fits what the kernel takes for the conntrack sysctls (seconds, at most INT_MAX jiffies:
 * the same 2^31 ms at HZ=1000) and IPVS timeouts (seconds times HZ in an int).
 */
export const MAX_DURATION_MS = MAX_TIMER_MS;

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3, // U+00B5 micro sign
  μs: 1e-3, // U+03BC Greek mu
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parses a Go duration string into milliseconds; throws a message naming the text when it is not one. */
export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === '0' || s === '+0' || s === '-0') return 0;
  const m = /^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/u.exec(s);
  if (m === null || s === '' || s === '+' || s === '-') {
    throw new Error(`"${text}" is not a duration (use a number with a unit, e.g. "30s", "1m30s", "250ms")`);
  }
  const sign = m[1] === '-' ? -1 : 1;
  let total = 0;
  for (const part of s.slice(m[1]!.length).matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gu)) {
    total += Number(part[1]) * UNIT_MS[part[2]!]!;
  }
  if (!Number.isFinite(total)) throw new Error(`"${text}" is out of range`);
  if (total === 0) return 0; // no -0
  return sign * Math.max(1, Math.round(total));
}

/** A duration held to MAX_DURATION_MS; `clamped` when it was longer (the caller warns once). */
export function boundDuration(ms: number): { ms: number; clamped: boolean } {
  return ms > MAX_DURATION_MS ? { ms: MAX_DURATION_MS, clamped: true } : { ms, clamped: false };
}

/** Formats milliseconds the way Go's time.Duration.String() does: "1h0m0s", "1m30s", "250ms", "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${neg ? '-' : ''}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const secText = trimFraction((rest / 1000).toFixed(3));
  let out = '';
  if (h > 0) out = `${h}h${m}m${secText}s`;
  else if (m > 0) out = `${m}m${secText}s`;
  else out = `${secText}s`;
  return neg ? `-${out}` : out;
}

function trimFraction(s: string): string {
  return s.includes('.') ? s.replace(/0+$/u, '').replace(/\.$/u, '') : s;
}
