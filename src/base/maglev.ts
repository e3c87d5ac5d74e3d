// Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network
// Load Balancer", NSDI 2016, section 3.4): a lookup table of M buckets, M prime, filled so
// that each endpoint owns M/N buckets (±1) and a change of endpoints moves few buckets of
// the others. Packets pick a bucket by `jhash` of their source address (rules in
// balancing.ts), so a client stays with its endpoint for as long as the endpoints do.
//
// Each endpoint's preference list is a permutation of the buckets: offset + j × skip (mod M),
// with offset and skip from two hashes of the endpoint's name ("ip . port"). Endpoints take
// turns claiming their next free preferred bucket until every bucket is taken. The names are
// sorted first and the hashes are fixed (SHA-256), so every node with the same endpoints
// builds the same table, whatever order the EndpointSlices listed them in.
//
// Size: the smallest prime >= 100 × 2^ceil(log2 N), so at least 100 buckets per endpoint
// (balance within 1 %) and the same size while N stays within a power of two: a size change
// rebuilds the whole table (every client may move), so it happens only when N crosses a power
// of two (8 -> 9, 16 -> 17, ...), never when one of 10 endpoints comes and goes. Capped at
// MAX_TABLE_SIZE buckets per Service port: past 655 endpoints the balance is within N / 65,537.

import { createHash } from 'node:crypto';

/** Buckets per endpoint at least (the paper's M >> N; 100 gives ±1 % balance). */
export const BUCKETS_PER_ENDPOINT = 100;
/** The largest table (the paper's own size): bounds a Service port's map to 65,537 elements. */
export const MAX_TABLE_SIZE = 65_537;

function isPrime(n: number): boolean {
  if (n < 2) return false;
  if (n % 2 === 0) return n === 2;
  for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
  return true;
}

/** The table size for `n` endpoints: the smallest prime >= 100 × 2^ceil(log2 n), at most MAX_TABLE_SIZE. */
export function tableSize(n: number): number {
  const rounded = 2 ** Math.ceil(Math.log2(Math.max(1, n)));
  let m = Math.min(rounded * BUCKETS_PER_ENDPOINT, MAX_TABLE_SIZE);
  while (!isPrime(m)) m++;
  return m;
}

/** offset in [0, M) and skip in [1, M) from the name: two independent 32-bit words of its SHA-256. */
function permutationOf(name: string, m: number): { offset: number; skip: number } {
  const d = createHash('sha256').update(name).digest();
  return { offset: d.readUInt32BE(0) % m, skip: (d.readUInt32BE(4) % (m - 1)) + 1 };
}

/**
 * The lookup table for `names` (endpoint names, unique): entry b is the index into `names` of
 * bucket b's endpoint. Empty for no names. O(M log M) expected (the paper's analysis).
 */
export function maglevTable(names: readonly string[], size = tableSize(names.length)): Int32Array {
  const n = names.length;
  const table = new Int32Array(n === 0 ? 0 : size).fill(-1);
  if (n === 0) return table;
  const order = names.map((_, i) => i).sort((a, b) => (names[a]! < names[b]! ? -1 : names[a]! > names[b]! ? 1 : 0));
  const offset = new Int32Array(n);
  const skip = new Int32Array(n);
  order.forEach((i, k) => {
    const p = permutationOf(names[i]!, size);
    offset[k] = p.offset;
    skip[k] = p.skip;
  });
  const next = new Int32Array(n);
  let filled = 0;
  // Bounded: each pass gives every endpoint one bucket, and a permutation of a prime-sized
  // table reaches every bucket, so each claim ends within M tries.
  while (filled < size) {
    for (let k = 0; k < n && filled < size; k++) {
      let c = (offset[k]! + next[k]! * skip[k]!) % size;
      while (table[c]! >= 0) {
        next[k]!++;
        c = (offset[k]! + next[k]! * skip[k]!) % size;
      }
      table[c] = order[k]!;
      next[k]!++;
      filled++;
    }
  }
  return table;
}
