// Readiness as upstream: kube-proxy reads its Node's addresses before it programs anything
// (cmd/kube-proxy/app/server.go getNodeIPs: retried with back-off for about 30 s, then it goes
// on without them). Here the first full sync waits, after the sources have listed everything,
// for this node's Node with at least one address, for at most timeoutMs; either outcome is
// logged. Without that wait, a Node that arrives after the Services makes the first sync (and
// READY=1) run without node IPs: node ports answer on every local address until the next sync.

import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { Node } from '../model/k8s.ts';

export interface NodeWaitOptions {
  nodeName: string;
  /** How long the first sync waits for the Node; 0: it does not wait (standalone mode). */
  timeoutMs: number;
  clock: Clock;
  logger: Logger;
}

export class NodeWait {
  private readonly o: NodeWaitOptions;
  private arrived = false;
  private onArrive: (() => void) | undefined;

  constructor(o: NodeWaitOptions) {
    this.o = o;
  }

  /** The source's view of this node's Node changed. */
  node(node: Node | undefined): void {
    if (this.arrived || !(node?.status?.addresses ?? []).some((a) => (a.address ?? '') !== '')) return;
    this.arrived = true;
    this.onArrive?.();
  }

  /** Resolves when `synced` has and the Node has arrived (or timeoutMs after `synced`, logged). */
  async gate(synced: Promise<void>, signal: AbortSignal): Promise<void> {
    await synced;
    if (this.arrived || this.o.timeoutMs <= 0 || signal.aborted) return;
    const { nodeName, timeoutMs, clock, logger } = this.o;
    logger.info("Waiting for this node's Node (its addresses) before the first sync", { node: nodeName, timeoutMs });
    const start = clock.now();
    const arrived = await new Promise<boolean>((resolve) => {
      const timer = clock.setTimer(timeoutMs, () => done(false));
      const done = (ok: boolean): void => {
        timer.cancel();
        signal.removeEventListener('abort', onAbort);
        this.onArrive = undefined;
        resolve(ok);
      };
      const onAbort = (): void => done(false);
      signal.addEventListener('abort', onAbort);
      this.onArrive = () => done(true);
    });
    if (signal.aborted) return;
    if (arrived)
      logger.info('Node arrived; starting the first sync', { node: nodeName, waitedMs: clock.now() - start });
    else
      logger.warn('Node not seen in time; syncing without its addresses (node ports on every local address)', {
        node: nodeName,
        timeoutMs,
      });
  }
}
