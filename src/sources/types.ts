// What a source delivers and how it is driven. A source turns some store of Kubernetes
// objects (the API server, a directory of manifests) into a stream of typed changes, each
// with the previous and the current state of one object, so that a change tracker can diff.
//
// Objects are keyed by "namespace/name" (namespaced kinds) or "name" (Node, ServiceCIDR).
// A handler sees, per kind, a sequence of changes that is consistent: an add (prev
// undefined), updates (both set) and a delete (cur undefined) for every key, never an update
// of something it was not given, never a delete of something already deleted.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../model/k8s.ts';

export type SourceKind = 'Service' | 'EndpointSlice' | 'Node' | 'ServiceCIDR';

export const SOURCE_KINDS: readonly SourceKind[] = ['Service', 'EndpointSlice', 'Node', 'ServiceCIDR'];

export interface SourceHandler {
  /** prev undefined: added; cur undefined: deleted; both set: updated (or re-delivered by a resync). */
  onService(prev: Service | undefined, cur: Service | undefined): void;
  onEndpointSlice(prev: EndpointSlice | undefined, cur: EndpointSlice | undefined): void;
  /** This node's Node object; undefined when it does not exist (yet) or was deleted. */
  onNode(node: Node | undefined): void;
  /** Every ServiceCIDR currently known, after any change to one of them. */
  onServiceCIDRs?(cidrs: readonly ServiceCIDR[]): void;
  /** The first complete view of this kind has been delivered (once per kind and start). */
  onSynced(kind: SourceKind): void;
}

export interface Source {
  /** Starts delivering to the handler; resolves once started, not once synced. */
  start(handler: SourceHandler): Promise<void>;
  /** Stops every loop and timer; resolves when nothing is left running. */
  stop(): Promise<void>;
  /**
   * True once Services and EndpointSlices have delivered their first complete view (what a
   * proxier must wait for before its first sync, as upstream). Each kind, the Node and
   * ServiceCIDRs included, also reports its own first view through onSynced.
   */
  hasSynced(): boolean;
  /** Resolves when hasSynced() becomes true; rejects if the signal aborts first or the source stops. */
  waitForSync(signal?: AbortSignal): Promise<void>;
}

/** Why an object was not delivered. Structural only: semantic checks belong to the model. */
export interface Reject {
  kind: SourceKind | string;
  /** "namespace/name" when the object got that far, else undefined. */
  key: string | undefined;
  reason: string;
  /** Where it came from: a file name and line for manifests, an API path for the server. */
  origin: string;
}

/** Counts rejected objects, typically a Prometheus counter labelled by kind. */
export type RejectCounter = (reject: Reject) => void;

export function objectKey(meta: { name?: string; namespace?: string } | undefined): string {
  const name = meta?.name ?? '';
  return meta?.namespace ? `${meta.namespace}/${name}` : name;
}
