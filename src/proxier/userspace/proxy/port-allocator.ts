// --proxy-port-range: which port the next proxy socket binds, as upstream's rangeAllocator
// (pkg/proxy/userspace/port_allocator.go): a random start in the range, then the next free port
// after it (wrapping), so restarted daemons and several families do not all race for the first
// port. A port some other program holds is skipped by the caller (bindInRange) and released
// again, so it is tried anew once that program lets it go.

import type { PortRange } from './types.ts';

export class PortRangeExhaustedError extends Error {
  constructor(range: PortRange, inUse: number) {
    super(
      `no free port in --proxy-port-range ${range.first}-${range.last}: ` +
        `all ${range.last - range.first + 1} are bound by our proxy sockets or in use by other programs (${inUse} allocated)`,
    );
    this.name = 'PortRangeExhaustedError';
  }
}

export class PortAllocator {
  readonly range: PortRange;
  private readonly used: Uint8Array;
  private count = 0;
  private readonly random: () => number;

  /** random: [0, 1), injectable so tests know where the search starts. */
  constructor(range: PortRange, random: () => number = Math.random) {
    const { first, last } = range;
    if (!Number.isInteger(first) || !Number.isInteger(last) || first < 1 || last > 65535 || first > last)
      throw new Error(`--proxy-port-range ${first}-${last}: must be whole ports 1-65535 with first <= last`);
    this.range = range;
    this.used = new Uint8Array(last - first + 1);
    this.random = random;
  }

  /** Ports handed out and not released. */
  get allocated(): number {
    return this.count;
  }

  /** A free port of the range, marked used; throws PortRangeExhaustedError when none is left. */
  allocateNext(): number {
    const size = this.used.length;
    const start = Math.min(size - 1, Math.floor(this.random() * size));
    for (let n = 0; n < size; n++) {
      const j = (start + n) % size;
      if (this.used[j] === 0) {
        this.used[j] = 1;
        this.count++;
        return this.range.first + j;
      }
    }
    throw new PortRangeExhaustedError(this.range, this.count);
  }

  /** Returns a port to the pool; a port outside the range or not allocated is ignored. */
  release(port: number): void {
    const j = port - this.range.first;
    if (j < 0 || j >= this.used.length || this.used[j] === 0) return;
    this.used[j] = 0;
    this.count--;
  }
}

/**
 * Binds a socket on a port of the allocator's range: tries allocated ports until bind()
 * succeeds, skipping those already in use (EADDRINUSE/EACCES). Any other bind error is thrown.
 */
export async function bindInRange(alloc: PortAllocator, bind: (port: number) => Promise<number>): Promise<number> {
  const skipped: number[] = [];
  try {
    for (;;) {
      const port = alloc.allocateNext();
      try {
        return await bind(port);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE' || code === 'EACCES') {
          skipped.push(port);
          continue;
        }
        alloc.release(port);
        throw err;
      }
    }
  } finally {
    for (const p of skipped) alloc.release(p);
  }
}
