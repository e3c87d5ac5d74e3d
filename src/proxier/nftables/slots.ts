// Slot blocks in the shared endpoints map. Each service port owns a block of 2^k slots,
// [offset, offset + 2^k), and its DNAT rule reads `numgen random mod N offset <offset>`,
// so one named map serves every Service (see docs/nftables-ruleset.md).
//
// A buddy allocator over the 32-bit slot space: blocks are aligned to their size, a freed
// block merges with its free buddy, so churn never fragments the space for long, and a
// Service that grows within its power of two keeps its block (no rule rewrite needed for
// the offset, only for N).

export const MAX_ORDER = 32;

export interface SlotBlock {
  readonly offset: number;
  readonly order: number; // the block holds 2^order slots
}

export const blockSize = (order: number): number => 2 ** order;

/** The smallest order whose block holds n slots (at least one slot). */
export function orderFor(n: number): number {
  let order = 0;
  while (blockSize(order) < n) order++;
  return order;
}

export class SlotAllocator {
  /** free[order] = offsets of free blocks of that order. */
  private readonly free: Set<number>[] = Array.from({ length: MAX_ORDER + 1 }, () => new Set<number>());
  private readonly used = new Map<number, number>(); // offset -> order

  constructor() {
    this.free[MAX_ORDER]!.add(0);
  }

  /** Slots held by allocated blocks. */
  get allocatedSlots(): number {
    let n = 0;
    for (const order of this.used.values()) n += blockSize(order);
    return n;
  }

  allocate(slots: number): SlotBlock {
    const order = orderFor(slots);
    let from = order;
    while (from <= MAX_ORDER && this.free[from]!.size === 0) from++;
    if (from > MAX_ORDER) throw new RangeError(`no free block of ${blockSize(order)} slots`);
    // Take the lowest free offset: keeps the map's keys dense and the output stable.
    const offset = Math.min(...this.free[from]!);
    this.free[from]!.delete(offset);
    while (from > order) {
      from--;
      this.free[from]!.add(offset + blockSize(from));
    }
    this.used.set(offset, order);
    return { offset, order };
  }

  release(block: SlotBlock): void {
    if (this.used.get(block.offset) !== block.order) throw new Error(`slot block ${block.offset}/${block.order} is not allocated`);
    this.used.delete(block.offset);
    let { offset, order } = block;
    while (order < MAX_ORDER) {
      // Arithmetic rather than `^`: JS bitwise operators are 32-bit signed.
      const size = blockSize(order);
      const buddy = Math.floor(offset / size) % 2 === 0 ? offset + size : offset - size;
      if (!this.free[order]!.delete(buddy)) break;
      offset = Math.min(offset, buddy);
      order++;
    }
    this.free[order]!.add(offset);
  }

  /**
   * Marks a block found in the kernel (after a restart) as in use, splitting free blocks
   * around it. Returns false if it overlaps something already allocated.
   */
  reserve(block: SlotBlock): boolean {
    if (block.offset % blockSize(block.order) !== 0) return false;
    // Find the free block that contains it.
    for (let order = block.order; order <= MAX_ORDER; order++) {
      const start = block.offset - (block.offset % blockSize(order));
      if (!this.free[order]!.has(start)) continue;
      this.free[order]!.delete(start);
      // Split down towards the wanted block, freeing the halves that do not hold it.
      let cur = start;
      for (let o = order; o > block.order; o--) {
        const half = blockSize(o - 1);
        if (block.offset >= cur + half) {
          this.free[o - 1]!.add(cur);
          cur += half;
        } else {
          this.free[o - 1]!.add(cur + half);
        }
      }
      this.used.set(block.offset, block.order);
      return true;
    }
    return false;
  }
}
