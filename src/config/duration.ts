// Go duration strings, as upstream's flags and KubeProxyConfiguration (metav1.Duration)
// use them: "30s", "1m30s", "250ms", "1h0m0s", "1.5h", "-5s", "0". We keep milliseconds:
// nothing kube-proxy configures is finer than that, and sub-millisecond parts round.

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
  const ms = Math.round(total * sign);
  return ms === 0 ? 0 : ms; // no -0
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
