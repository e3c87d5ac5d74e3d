// Feeds a ChangeTracker from the objects a test passes in, remembering them so that a later
// change (or a deletion by "namespace/name") is delivered with its previous version.
import type { ChangeTracker } from '../../../src/model/index.ts';
import type { EndpointSlice, Node, Service } from '../../../src/model/k8s.ts';

export interface ObjectChange {
  services?: (Service | string)[];
  slices?: (EndpointSlice | string)[];
  node?: Node;
}

const keyOf = (o: { metadata?: { namespace?: string; name?: string } }): string =>
  `${o.metadata?.namespace ?? 'default'}/${o.metadata?.name ?? ''}`;

export class ObjectFeed {
  private readonly services = new Map<string, Service>();
  private readonly slices = new Map<string, EndpointSlice>();

  clear(): void {
    this.services.clear();
    this.slices.clear();
  }

  /** Applies objects (a string deletes by key) to the tracker. */
  feed(t: ChangeTracker, change: ObjectChange): void {
    for (const s of change.services ?? []) {
      if (typeof s === 'string') {
        t.onService(this.services.get(s), undefined);
        this.services.delete(s);
      } else {
        t.onService(this.services.get(keyOf(s)), s);
        this.services.set(keyOf(s), s);
      }
    }
    for (const s of change.slices ?? []) {
      if (typeof s === 'string') {
        const prev = this.slices.get(s);
        if (prev) t.onEndpointSlice(prev, true);
        this.slices.delete(s);
      } else {
        t.onEndpointSlice(s, false);
        this.slices.set(keyOf(s), s);
      }
    }
    if (change.node) t.onNode(change.node);
  }
}
