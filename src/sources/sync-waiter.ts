// A one-shot latch: wait() resolves once set(true) has been called, rejects when the
// caller's signal aborts or the owner closes it first.

export class SyncWaiter {
  private done = false;
  private closed: Error | undefined;
  private waiters = new Set<{ resolve(): void; reject(err: unknown): void }>();

  set(synced: boolean): void {
    if (!synced || this.done) return;
    this.done = true;
    for (const w of this.waiters) w.resolve();
    this.waiters.clear();
  }

  close(err: Error): void {
    if (this.done) return;
    this.closed = err;
    for (const w of this.waiters) w.reject(err);
    this.waiters.clear();
  }

  wait(signal?: AbortSignal): Promise<void> {
    if (this.done) return Promise.resolve();
    if (this.closed) return Promise.reject(this.closed);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.waiters.delete(w);
        reject(signal?.reason);
      };
      const w = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (err: unknown) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.waiters.add(w);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
