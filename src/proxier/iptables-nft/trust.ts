// Whether the writer's mirror (state.ts: what the last sync committed) may stand in for the
// kernel. It may while the last sync succeeded and nobody changed our tables since; drift
// announced while a sync runs is for the next one. One object for the flags a sync, the drift
// watch and the canary all read and set.

export class MirrorTrust {
  private needFull = true;
  private mirrors = false;
  /** Drift of anything (a chain of ours deleted, announcements lost), perhaps while a sync runs. */
  private distrust = false;
  /** Owned chains someone else changed since the last full sync began (chainId). */
  private tainted = new Set<string>();

  /** The next sync must be a full one (the first, after a failure, after drift). */
  get fullDue(): boolean {
    return this.needFull;
  }

  /** The mirror matched the kernel when the last sync ended and nothing was announced since. */
  get trusted(): boolean {
    return this.mirrors;
  }

  /**
   * A sync starts: a full one is due again until it succeeds. Returns whether a full sync may
   * trust the mirror for what the kernel holds.
   */
  begin(): boolean {
    this.needFull = true;
    const was = this.mirrors && !this.distrust;
    this.distrust = false;
    this.mirrors = false;
    return was;
  }

  /** The sync committed: trusted, unless drift came meanwhile (then the next sync is full). */
  succeeded(): void {
    this.needFull = this.tainted.size > 0 || this.distrust;
    this.mirrors = !this.distrust;
  }

  /** Our tables were flushed (a canary gone): nothing committed is there any more. */
  lost(): void {
    this.needFull = true;
    this.mirrors = false;
  }

  /** Anything may have changed (a chain of ours deleted, announcements lost). */
  distrustAll(): void {
    this.mirrors = false;
    this.distrust = true;
    this.needFull = true;
  }

  /** Someone changed rules of one owned chain: the next full sync refills it. */
  taint(chainId: string): void {
    this.tainted.add(chainId);
    this.needFull = true;
  }

  /** A full sync is due though the mirror still holds (a shared or fixed chain changed). */
  due(): void {
    this.needFull = true;
  }

  /** The tainted chains, handed to the full sync that starts now (later drift is for the next). */
  takeTainted(): ReadonlySet<string> {
    const t = this.tainted;
    this.tainted = new Set();
    return t;
  }
}
