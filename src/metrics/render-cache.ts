// /metrics costs a prom-client render (every metric, every label set; collectors may read the
// kernel), and it runs on the event loop the sync loop needs. So responses are paced: at most
// `perSecond` leave per second (a burst of that many), later requests wait in line, and a
// request that had to wait takes a render up to maxAgeMs old; concurrent requests share one
// render. A client looping on /metrics therefore waits instead of spinning, the cost of
// serving is bounded whatever the number of clients (their number is bounded by the server's
// connection cap), and an unhurried scraper always gets a fresh render. A request whose client
// went away leaves the line at once (its signal), so that clients that come and go cannot grow
// it nor make those that stay wait behind them.

export interface RenderCacheOptions {
  render: () => Promise<string>;
  /** How long a render is reused. */
  maxAgeMs: number;
  /** Responses per second at most (and the burst). */
  perSecond: number;
  now?: () => number;
}

export class PacedRenderCache {
  private readonly o: RenderCacheOptions;
  private readonly now: () => number;
  private body: { text: string; at: number } | undefined;
  private inflight: Promise<string> | undefined;
  private tokens: number;
  private refilledAt: number;
  /** In line, first come first served. */
  private readonly waiting = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(o: RenderCacheOptions) {
    this.o = o;
    this.now = o.now ?? Date.now;
    this.tokens = o.perSecond;
    this.refilledAt = this.now();
  }

  /** The rendered text, once this request's turn has come; undefined if `gone` aborted first. */
  async get(gone?: AbortSignal): Promise<string | undefined> {
    const waited = await this.turn(gone);
    if (waited === undefined) return undefined;
    const b = this.body;
    if (waited && b !== undefined && this.now() - b.at < this.o.maxAgeMs) return b.text;
    this.inflight ??= this.o.render().then(
      (text) => {
        this.body = { text, at: this.now() };
        this.inflight = undefined;
        return text;
      },
      (err: unknown) => {
        this.inflight = undefined;
        throw err;
      },
    );
    return this.inflight;
  }

  /** Requests still waiting for their turn. */
  queued(): number {
    return this.waiting.size;
  }

  /** Releases every waiting request (server shutdown). */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const all = [...this.waiting];
    this.waiting.clear();
    for (const w of all) w();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.o.perSecond, this.tokens + ((t - this.refilledAt) * this.o.perSecond) / 1000);
    this.refilledAt = t;
  }

  /**
   * Resolves when this request may be answered: false at once, true after waiting in line,
   * undefined if `gone` aborted while it waited (it has left the line).
   */
  private turn(gone?: AbortSignal): Promise<boolean | undefined> {
    if (gone?.aborted) return Promise.resolve(undefined);
    this.refill();
    if (this.waiting.size === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      const leave = () => {
        this.waiting.delete(go);
        resolve(undefined);
      };
      const go = () => {
        gone?.removeEventListener('abort', leave);
        resolve(true);
      };
      this.waiting.add(go);
      gone?.addEventListener('abort', leave, { once: true });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer !== undefined || this.waiting.size === 0) return;
    const ms = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.o.perSecond));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refill();
      for (const go of this.waiting) {
        if (this.tokens < 1) break;
        this.tokens -= 1;
        this.waiting.delete(go);
        go();
      }
      this.schedule();
    }, ms);
    this.timer.unref();
  }
}
