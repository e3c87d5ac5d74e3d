// The Kubernetes API source: four reflectors, as kube-proxy's informers.
//
//   Services        core/v1                 label selector PROXY_LABEL_SELECTOR
//   EndpointSlices  discovery.k8s.io/v1     label selector PROXY_LABEL_SELECTOR
//   ServiceCIDRs    networking.k8s.io/v1    label selector PROXY_LABEL_SELECTOR; optional (404: none)
//   Node            core/v1                 field selector metadata.name=<this node>
//
// Upstream builds Services, EndpointSlices and ServiceCIDRs from one informer factory whose
// list options carry the selector, and the Node from a second factory with the field
// selector (cmd/kube-proxy/app/server.go). Each reflector reconnects and relists on its own.

import type { Clock } from '../base/clock.ts';
import { systemClock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { EndpointSlice, Node, Service, ServiceCIDR } from '../model/k8s.ts';
import {
  convertEndpointSlice,
  convertNode,
  convertService,
  convertServiceCIDR,
  PROXY_LABEL_SELECTOR,
  selectedByProxy,
} from './convert.ts';
import type { KubeApi } from './kube-api.ts';
import type { BackoffOptions } from './reflector.ts';
import { Reflector } from './reflector.ts';
import type { RejectCounter, Source, SourceHandler, SourceKind } from './types.ts';
import { SyncWaiter } from './sync-waiter.ts';

export interface KubernetesSourceOptions {
  api: KubeApi;
  /** This node's name (--hostname-override, else the host name): selects the Node object. */
  nodeName: string;
  logger: Logger;
  clock?: Clock;
  onReject?: RejectCounter;
  /** configSyncPeriod: re-deliver everything this often; 0 disables. Upstream default 15 min. */
  resyncPeriodMs?: number;
  /** Watch ServiceCIDRs (networking.k8s.io/v1). Default true; a 404 is tolerated. */
  watchServiceCIDRs?: boolean;
  backoff?: Partial<BackoffOptions>;
  minWatchTimeoutSeconds?: number;
  watchIdleTimeoutMs?: number;
  listTimeoutMs?: number;
  listPageSize?: number;
  minHealthyWatchMs?: number;
  random?: () => number;
}

export const PATHS = {
  Service: '/api/v1/services',
  EndpointSlice: '/apis/discovery.k8s.io/v1/endpointslices',
  Node: '/api/v1/nodes',
  ServiceCIDR: '/apis/networking.k8s.io/v1/servicecidrs',
} as const satisfies Record<SourceKind, string>;

export class KubernetesSource implements Source {
  private readonly o: KubernetesSourceOptions;
  private readonly services: Reflector<Service>;
  private readonly slices: Reflector<EndpointSlice>;
  private readonly node: Reflector<Node>;
  private readonly cidrs: Reflector<ServiceCIDR> | undefined;
  private controller: AbortController | undefined;
  private loops: Promise<void>[] = [];
  private readonly waiter = new SyncWaiter();

  constructor(opts: KubernetesSourceOptions) {
    this.o = opts;
    const clock = opts.clock ?? systemClock;
    const logger = opts.logger.child({ component: 'kubernetes-source' });
    const common = {
      api: opts.api,
      clock,
      logger,
      ...(opts.onReject ? { onReject: opts.onReject } : {}),
      ...(opts.backoff ? { backoff: opts.backoff } : {}),
      ...(opts.resyncPeriodMs !== undefined ? { resyncPeriodMs: opts.resyncPeriodMs } : {}),
      ...(opts.minWatchTimeoutSeconds !== undefined ? { minWatchTimeoutSeconds: opts.minWatchTimeoutSeconds } : {}),
      ...(opts.watchIdleTimeoutMs !== undefined ? { watchIdleTimeoutMs: opts.watchIdleTimeoutMs } : {}),
      ...(opts.listTimeoutMs !== undefined ? { listTimeoutMs: opts.listTimeoutMs } : {}),
      ...(opts.listPageSize !== undefined ? { listPageSize: opts.listPageSize } : {}),
      ...(opts.minHealthyWatchMs !== undefined ? { minHealthyWatchMs: opts.minHealthyWatchMs } : {}),
      ...(opts.random ? { random: opts.random } : {}),
    };
    const selected = (o: { metadata?: { labels?: Record<string, string> } }) => selectedByProxy(o.metadata?.labels);
    this.services = new Reflector<Service>({
      ...common,
      kind: 'Service',
      path: PATHS.Service,
      labelSelector: PROXY_LABEL_SELECTOR,
      convert: convertService,
      accept: selected,
    });
    this.slices = new Reflector<EndpointSlice>({
      ...common,
      kind: 'EndpointSlice',
      path: PATHS.EndpointSlice,
      labelSelector: PROXY_LABEL_SELECTOR,
      convert: convertEndpointSlice,
      accept: selected,
    });
    this.node = new Reflector<Node>({
      ...common,
      kind: 'Node',
      path: PATHS.Node,
      fieldSelector: `metadata.name=${opts.nodeName}`,
      convert: convertNode,
      accept: (n) => n.metadata?.name === opts.nodeName,
    });
    this.cidrs =
      opts.watchServiceCIDRs === false
        ? undefined
        : new Reflector<ServiceCIDR>({
            ...common,
            kind: 'ServiceCIDR',
            path: PATHS.ServiceCIDR,
            labelSelector: PROXY_LABEL_SELECTOR,
            convert: convertServiceCIDR,
            accept: selected,
            optional: true,
          });
  }

  async start(handler: SourceHandler): Promise<void> {
    if (this.controller) throw new Error('KubernetesSource already started');
    const controller = new AbortController();
    this.controller = controller;
    const { signal } = controller;
    const synced = (kind: SourceKind) => () => {
      handler.onSynced(kind);
      this.waiter.set(this.hasSynced());
    };
    this.loops.push(
      this.services.run(
        {
          add: (_k, cur) => handler.onService(undefined, cur),
          update: (_k, prev, cur) => handler.onService(prev, cur),
          delete: (_k, prev) => handler.onService(prev, undefined),
          synced: synced('Service'),
        },
        signal,
      ),
      this.slices.run(
        {
          add: (_k, cur) => handler.onEndpointSlice(undefined, cur),
          update: (_k, prev, cur) => handler.onEndpointSlice(prev, cur),
          delete: (_k, prev) => handler.onEndpointSlice(prev, undefined),
          synced: synced('EndpointSlice'),
        },
        signal,
      ),
      this.node.run(
        {
          add: (_k, cur) => handler.onNode(cur),
          update: (_k, _prev, cur) => handler.onNode(cur),
          delete: () => handler.onNode(undefined),
          synced: synced('Node'),
        },
        signal,
      ),
    );
    const cidrs = this.cidrs;
    if (cidrs) {
      const all = () => handler.onServiceCIDRs?.([...cidrs.snapshot().values()]);
      const cidrsSynced = synced('ServiceCIDR');
      const onSynced = () => {
        all();
        cidrsSynced();
      };
      this.loops.push(cidrs.run({ add: all, update: all, delete: all, synced: onSynced }, signal));
    }
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    this.waiter.close(new Error('source stopped'));
    await Promise.all(this.loops);
    this.loops = [];
  }

  /**
   * Services and EndpointSlices have both been listed once: what upstream's proxier waits
   * for before its first sync. The Node and ServiceCIDRs report through onSynced on their
   * own, so that a node whose RBAC forbids listing Nodes, or whose Node does not exist
   * yet, still programs Services.
   */
  hasSynced(): boolean {
    return this.services.synced && this.slices.synced;
  }

  /** Every kind this source watches has been listed once (or found not served). */
  hasSyncedAll(): boolean {
    return this.hasSynced() && this.node.synced && (this.cidrs?.synced ?? true);
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    return this.waiter.wait(signal);
  }

  /** The resourceVersion each kind has reached, for diagnostics and tests. */
  resourceVersions(): Record<SourceKind, string> {
    return {
      Service: this.services.resourceVersion,
      EndpointSlice: this.slices.resourceVersion,
      Node: this.node.resourceVersion,
      ServiceCIDR: this.cidrs?.resourceVersion ?? '',
    };
  }

  /** The node name this source selects. */
  get nodeName(): string {
    return this.o.nodeName;
  }
}
