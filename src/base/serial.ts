// Runs async tasks one after another: each starts when every earlier one has settled, whether
// it resolved or failed, and a failure reaches only its own caller.

export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `f` after every task queued before it; resolves or rejects with `f`'s result. */
  run<T>(f: () => Promise<T>): Promise<T> {
    const run = this.tail.then(f, f);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Resolves when nothing is running or queued, tasks queued meanwhile included. */
  async idle(): Promise<void> {
    let tail: Promise<unknown>;
    do {
      tail = this.tail;
      await tail;
    } while (tail !== this.tail);
  }
}
