// upstream computeProbability(n): fmt.Sprintf("%0.10f", 1.0/float64(n)), the text of
// `-m statistic --mode random --probability` for the i-th of n endpoints (1/(n-i)).
// Go prints the double's exact value rounded half to even; JavaScript's toFixed rounds the
// exact value too but breaks ties upwards. A tie needs 1/n to end in a 5 at the 11th decimal,
// which only an exact power of two can (1/2048 = 0.00048828125), so those are done exactly.

import type { Match } from '../../netlink/nftables/iptables/rule.ts';

const cache: string[] = ['<bad value>'];

function exactPowerOfTwo(n: number): string {
  // 1/2^k = 5^k / 10^k exactly.
  const k = Math.log2(n);
  const scaled = 5n ** BigInt(k); // value * 10^k
  const drop = k > 10 ? 10n ** BigInt(k - 10) : 1n;
  let q = k > 10 ? scaled / drop : scaled * 10n ** BigInt(10 - k);
  const r = k > 10 ? scaled % drop : 0n;
  if (r * 2n > drop || (r * 2n === drop && q % 2n === 1n)) q += 1n;
  const digits = q.toString().padStart(11, '0');
  return `${digits.slice(0, -10)}.${digits.slice(-10)}`;
}

/** The probability text upstream writes for a rule that picks 1 of n remaining endpoints. */
export function probability(n: number): string {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`probability needs a positive endpoint count, not ${n}`);
  let p = cache[n];
  if (p === undefined) {
    p = (n & (n - 1)) === 0 ? exactPowerOfTwo(n) : (1 / n).toFixed(10);
    if (n < 10_000) cache[n] = p;
  }
  return p;
}

/**
 * The match that sends a new connection to the first of `remaining` endpoints, the others
 * going on to the next rule. Random (upstream): probability 1/remaining. Round-robin: every
 * remaining-th connection that reaches the rule (xt_statistic nth mode, one counter per rule),
 * so over any n consecutive new connections the n endpoints get exactly one each.
 */
export function endpointPick(remaining: number, roundRobin: boolean): Match {
  return roundRobin
    ? { m: 'statisticNth', every: remaining, packet: 0 }
    : { m: 'statistic', probability: probability(remaining) };
}
