// /metrics costs a prom-client render (every metric, every label set; collectors may read the
// kernel), and it runs on the event loop the sync loop needs. So responses are paced: at most
// `perSecond` leave per second (a burst of that many), later requests wait in line, and a
// request that had to wait takes a render up to maxAgeMs old; concurrent requests share one
// render. A client looping on /metrics therefore waits instead of spinning, the cost of
// serving is bounded whatever the number of clients (their number is bounded by the server's
// maxConnections), and an unhurried scraper always gets a fresh render.

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
  private readonly waiting: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(o: RenderCacheOptions) {
    this.o = o;
    this.now = o.now ?? Date.now;
    this.tokens = o.perSecond;
    this.refilledAt = this.now();
  }

  /** The rendered text, once this request's turn has come. */
  async get(): Promise<string> {
    const waited = await this.turn();
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
    return this.waiting.length;
  }

  /** Releases every waiting request (server shutdown). */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.waiting.splice(0)) w();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.o.perSecond, this.tokens + ((t - this.refilledAt) * this.o.perSecond) / 1000);
    this.refilledAt = t;
  }

  /** Resolves when this request may be answered: false at once, true after waiting in line. */
  private turn(): Promise<boolean> {
    this.refill();
    if (this.waiting.length === 0 && this.tokens >= 1) {
      this.tokens -= 1;
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      this.waiting.push(() => resolve(true));
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer !== undefined || this.waiting.length === 0) return;
    const ms = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.o.perSecond));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refill();
      while (this.tokens >= 1 && this.waiting.length > 0) {
        this.tokens -= 1;
        this.waiting.shift()!();
      }
      this.schedule();
    }, ms);
    this.timer.unref();
  }
}
