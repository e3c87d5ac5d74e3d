// A drift watch's listening socket, closed while one of our own full syncs runs. The kernel
// builds an announcement of every object a transaction writes only while someone listens
// (nfnetlink_has_listeners): with a listener, a 10,000-Service nftables cold full sync cost the
// kernel 2.1-2.4 s instead of 0.66 s, and a cold start announces more than any receive buffer
// holds anyway. A change by someone else meanwhile goes unseen, as announcements lost during
// our own sync would; the periodic full sync covers it. The iptables mode pauses for every full
// sync (chain-watch.ts); the nftables mode for its cold start only (later full syncs write only
// what differs, and a watch listening through a repair sees tampering during it).

import type { Logger } from '../../base/logger.ts';
import type { MulticastListener } from '../../netlink/core/index.ts';

export class PausableListener {
  private readonly open: () => MulticastListener;
  private readonly logger: Logger;
  private listener: MulticastListener | undefined;
  private paused = 0;
  private closed = false;

  /** `open` makes a new listening socket (at once, and at every resume). */
  constructor(open: () => MulticastListener, logger: Logger) {
    this.open = open;
    this.logger = logger;
    this.listener = open();
  }

  /** Stops listening; counted: listening resumes after as many resume() calls. */
  pause(): void {
    if (this.paused++ > 0) return;
    this.listener?.close();
    this.listener = undefined;
  }

  resume(): void {
    if (this.paused === 0 || --this.paused > 0 || this.closed) return;
    try {
      this.listener = this.open();
    } catch (err) {
      this.logger.warn('Cannot listen to kernel changes again; drift is repaired by the periodic sync only', { err });
    }
  }

  close(): void {
    this.closed = true;
    this.listener?.close();
    this.listener = undefined;
  }
}

/**
 * The daemon's side: proxiers report their full syncs (onFullSync), and whichever watch is
 * attached, now or later, pauses for as long as any of them runs.
 */
export class FullSyncPause {
  private running = 0;
  private watch: { pause(): void; resume(): void } | undefined;

  readonly onFullSync = (running: boolean): void => {
    this.running += running ? 1 : -1;
    if (running) this.watch?.pause();
    else this.watch?.resume();
  };

  /**
   * For one proxier: a callback that passes on its first full sync only (the cold start, which
   * writes everything). Later full syncs write only what differs, so listening costs them little,
   * and a watch that keeps listening through them sees tampering during a repair too.
   */
  firstFullSyncOnly(): (running: boolean) => void {
    let state: 'before' | 'running' | 'done' = 'before';
    return (running) => {
      if (running && state === 'before') state = 'running';
      else if (!running && state === 'running') state = 'done';
      else return;
      this.onFullSync(running);
    };
  }

  /** Attaches a watch (paused at once if a full sync runs); returns its detach. */
  attach(w: { pause(): void; resume(): void }): () => void {
    for (let i = 0; i < this.running; i++) w.pause();
    this.watch = w;
    return () => {
      if (this.watch === w) this.watch = undefined;
    };
  }

  /**
   * Opens a watch and attaches it; its close() detaches it too. A watch that cannot open is
   * not fatal: said once, and the periodic full sync repairs drift, only later.
   */
  open(start: () => { pause(): void; resume(): void; close(): void }, logger: Logger): { close(): void } {
    try {
      const w = start();
      const detach = this.attach(w);
      return {
        close: () => {
          detach();
          w.close();
        },
      };
    } catch (err) {
      logger.warn('Cannot listen to nf_tables changes; drift is repaired by the periodic sync only', { err });
      return { close: () => {} };
    }
  }
}
