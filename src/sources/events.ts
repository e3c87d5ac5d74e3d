// Kubernetes Events about this node, as upstream kube-proxy posts them through client-go's
// events.k8s.io/v1 recorder (events.NewBroadcaster(EventSinkImpl{EventsV1()})): reporting
// controller "kube-proxy", instance "kube-proxy-<hostname>", a cluster-scoped object's
// events in namespace "default", name "<object>.<nanoseconds in hex>". Posting is fire and
// forget: a failure is logged at --v=2 and never holds up the daemon.

import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';

/** What an Event is about (upstream's v1.ObjectReference for the Node: uid = the node name). */
export interface EventRef {
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
}

export type EventType = 'Normal' | 'Warning';

export interface EventSink {
  eventf(regarding: EventRef, type: EventType, reason: string, action: string, note: string): void;
  /** Resolves once the events posted so far are sent (or failed), e.g. before an exit. */
  flush?(): Promise<void>;
}

/** The one write a recorder needs (ClientNodeApi.post). */
export interface KubeWriter {
  post(path: string, body: unknown, signal: AbortSignal): Promise<unknown>;
}

export interface EventRecorderOptions {
  writer: KubeWriter;
  clock: Clock;
  logger: Logger;
  hostname: string;
  /** Per-POST time-out; default 10 s. */
  timeoutMs?: number;
}

/** metav1.MicroTime: RFC 3339 with microseconds, UTC. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class EventRecorder implements EventSink {
  private readonly o: EventRecorderOptions;
  private pending = new Set<Promise<void>>();
  private seq = 0;

  constructor(opts: EventRecorderOptions) {
    this.o = opts;
  }

  eventf(regarding: EventRef, type: EventType, reason: string, action: string, note: string): void {
    const now = this.o.clock.now();
    const namespace = regarding.namespace !== undefined && regarding.namespace !== '' ? regarding.namespace : 'default';
    // Nanoseconds from a millisecond clock, plus a sequence so that two events in one ms differ.
    const nanos = BigInt(now) * 1_000_000n + BigInt(this.seq++ % 1_000_000);
    const event = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${regarding.name}.${nanos.toString(16)}`, namespace },
      eventTime: microTime(now),
      reportingController: 'kube-proxy',
      reportingInstance: `kube-proxy-${this.o.hostname}`,
      action,
      reason,
      regarding: {
        kind: regarding.kind,
        name: regarding.name,
        ...(regarding.namespace ? { namespace: regarding.namespace } : {}),
        ...(regarding.uid ? { uid: regarding.uid } : {}),
      },
      note,
      type,
    };
    const p = this.o.writer
      .post(
        `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
        event,
        AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
      )
      .then(
        () => this.o.logger.debug('Posted event', { reason, regarding: `${regarding.kind}/${regarding.name}` }),
        (err: unknown) =>
          this.o.logger.debug('Cannot post event', { reason, regarding: `${regarding.kind}/${regarding.name}`, err }),
      )
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Waits for the events posted so far (tests; a stop). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}

/** The Node reference upstream's events carry (kind Node, uid = the node name). */
export const nodeRef = (nodeName: string): EventRef => ({ kind: 'Node', name: nodeName, uid: nodeName });
