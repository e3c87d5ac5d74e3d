// Shared kernel objects (pickers) counted by their users: created when the first user
// appears, deleted when the last one goes.

export class RefCounts<T> {
  private readonly counts = new Map<string, { value: T; users: number }>();

  get size(): number {
    return this.counts.size;
  }

  has(key: string): boolean {
    return this.counts.has(key);
  }

  acquire(key: string, value: T): void {
    const c = this.counts.get(key);
    if (c) c.users++;
    else this.counts.set(key, { value, users: 1 });
  }

  release(key: string): void {
    const c = this.counts.get(key);
    if (!c) throw new Error(`released ${key}, which has no users`);
    if (--c.users === 0) this.counts.delete(key);
  }

  /** Keys and values with at least one user. */
  *entries(): Generator<[string, T]> {
    for (const [k, c] of this.counts) yield [k, c.value];
  }
}
