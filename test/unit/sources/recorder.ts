// A SourceHandler that keeps the view a change tracker would build from the events, and
// records every violation of the handler contract (an add of something known, an update or
// delete of something unknown), so tests can assert both convergence and consistency.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../../../src/model/k8s.ts';
import type { SourceHandler, SourceKind } from '../../../src/sources/types.ts';
import { objectKey } from '../../../src/sources/types.ts';

export interface Recorded {
  kind: SourceKind;
  op: 'add' | 'update' | 'delete' | 'resync';
  key: string;
}

export class Recorder implements SourceHandler {
  readonly services = new Map<string, Service>();
  readonly slices = new Map<string, EndpointSlice>();
  node: Node | undefined;
  cidrs: readonly ServiceCIDR[] = [];
  readonly synced = new Set<SourceKind>();
  readonly log: Recorded[] = [];
  readonly violations: string[] = [];

  private apply<T extends { metadata?: { name?: string; namespace?: string } }>(
    kind: SourceKind,
    view: Map<string, T>,
    prev: T | undefined,
    cur: T | undefined,
  ): void {
    const key = objectKey((cur ?? prev)?.metadata);
    const known = view.get(key);
    if (prev === undefined && cur !== undefined) {
      if (known) this.violations.push(`${kind} ${key}: add of a known object`);
      view.set(key, cur);
      this.log.push({ kind, op: 'add', key });
    } else if (prev !== undefined && cur !== undefined) {
      if (!known) this.violations.push(`${kind} ${key}: update of an unknown object`);
      else if (known !== prev) this.violations.push(`${kind} ${key}: update whose prev is not what was delivered`);
      view.set(key, cur);
      this.log.push({ kind, op: prev === cur ? 'resync' : 'update', key });
    } else if (prev !== undefined) {
      if (!known) this.violations.push(`${kind} ${key}: delete of an unknown object`);
      view.delete(key);
      this.log.push({ kind, op: 'delete', key });
    } else {
      this.violations.push(`${kind}: event with neither prev nor cur`);
    }
  }

  onService(prev: Service | undefined, cur: Service | undefined): void {
    this.apply('Service', this.services, prev, cur);
  }

  onEndpointSlice(prev: EndpointSlice | undefined, cur: EndpointSlice | undefined): void {
    this.apply('EndpointSlice', this.slices, prev, cur);
  }

  onNode(node: Node | undefined): void {
    this.node = node;
    this.log.push({ kind: 'Node', op: node ? 'update' : 'delete', key: node?.metadata?.name ?? '' });
  }

  onServiceCIDRs(cidrs: readonly ServiceCIDR[]): void {
    this.cidrs = cidrs;
  }

  onSynced(kind: SourceKind): void {
    if (this.synced.has(kind)) this.violations.push(`${kind}: synced twice`);
    this.synced.add(kind);
  }

  count(kind: SourceKind, op: Recorded['op']): number {
    return this.log.filter((r) => r.kind === kind && r.op === op).length;
  }
}

/** Polls cond every few ms until it holds; throws with the message after timeoutMs. */
export async function waitFor(cond: () => boolean, message: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${message}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
