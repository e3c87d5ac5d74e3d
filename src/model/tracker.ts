// The change tracker: sources feed it objects, proxiers check out the desired state and what
// changed since their last checkout (upstream ServiceChangeTracker + EndpointsChangeTracker +
// the proxier's svcPortMap/endpointsMap, in one place). One tracker serves one IP family.
//
// Cost: an event costs the size of the object it carries (normalize, compare with what was
// applied). A checkout costs the size of the Services whose inputs changed (publish.ts).
// Only a change of the node's zone touches every Service (all topology selections), which
// upstream also answers with a full sync.
//
// Bad input never escapes: each object is validated on arrival, its bad parts are dropped
// with one warning naming it, and even an exception (a bug, a hostile getter) is caught,
// logged and counted, leaving every other object as it was.

import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import { deepEqual } from './equal.ts';
import { serviceKey, type ServiceKey } from './ids.ts';
import { InputStore } from './inputs.ts';
import { isObject, nameOf, str } from './guards.ts';
import { Issues, RejectLog, type RejectCallback, type RejectKind } from './issues.ts';
import type { EndpointSlice, Node, Service, ServiceCIDR } from './k8s.ts';
import { buildMasqueradePolicy } from './masquerade.ts';
import { nodeNameOf, normalizeNode, unknownNode } from './node.ts';
import { selectNodePortAddresses } from './nodeport.ts';
import { newCollected, Publisher } from './publish.ts';
import { normalizeService } from './service.ts';
import { serviceCIDRsOf } from './servicecidr.ts';
import { normalizeSlice, triggerTimeOf } from './slice.ts';
import { PublishedState } from './state.ts';
import type { TopologyContext } from './topology.ts';
import {
  DEFAULT_LIMITS,
  type ChangeSet,
  type DesiredState,
  type Limits,
  type ModelOptions,
  type NodeInfo,
} from './types.ts';

export interface TrackerDeps {
  readonly logger: Logger;
  /** Its now() at construction bounds which trigger times count (older ones predate us). */
  readonly clock: Clock;
  /** Called once per reason each time an object is reported as (partly) rejected: a metric. */
  readonly onReject?: RejectCallback;
  /**
   * A reject log shared by the trackers of a dual-stack node (one per family), so that a bad
   * object is warned about and counted once, not once per family. Overrides onReject.
   */
  readonly rejectLog?: RejectLog;
}

export interface Checkout {
  readonly desired: DesiredState;
  readonly change: ChangeSet;
}

export class ChangeTracker {
  private readonly opts: ModelOptions;
  private readonly limits: Limits;
  private readonly logger: Logger;
  private readonly rejectLog: RejectLog;
  private readonly startTime: number;
  private readonly inputs = new InputStore();
  private readonly publisher: Publisher;
  private pendingNode: NodeInfo | undefined;
  private pendingServiceCIDRs: readonly string[] | undefined;
  private fullRequested = true;
  private checkedOut = false;
  private triggerTimes = new Map<ServiceKey, number[]>();

  /** Events received, for kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total. */
  readonly totals = { services: 0, endpointSlices: 0 };

  constructor(options: ModelOptions, deps: TrackerDeps) {
    this.opts = options;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.logger = deps.logger;
    this.rejectLog = deps.rejectLog ?? new RejectLog(deps.logger, deps.onReject);
    this.startTime = deps.clock.now();
    const node = this.withNodeIP(unknownNode(options.nodeName));
    const issues = new Issues();
    this.publisher = new Publisher(
      new PublishedState(
        options.family,
        node,
        selectNodePortAddresses(options.nodePortAddresses, options.family, node, issues),
        buildMasqueradePolicy(options, node, issues),
        serviceCIDRsOf([], options, issues),
      ),
    );
    this.rejectLog.report('Options', 'kube-proxy', issues.list);
  }

  /** "Kind/reason" -> how many times objects were rejected for it. */
  get rejects(): ReadonlyMap<string, number> {
    return this.rejectLog.counts;
  }

  /** The state as of the last checkout (empty before the first); the same object every time. */
  get desired(): DesiredState {
    return this.publisher.state;
  }

  /** Something is pending: a checkout would change the desired state (or a full sync is due). */
  get syncNeeded(): boolean {
    return (
      this.fullRequested ||
      this.inputs.pendingServiceCount > 0 ||
      this.inputs.pendingSlicesCount > 0 ||
      this.pendingNode !== undefined ||
      this.pendingServiceCIDRs !== undefined
    );
  }

  /** The next checkout will be full (requested, or Node facts or ServiceCIDRs changed). */
  get fullPending(): boolean {
    return this.fullRequested || this.pendingNode !== undefined || this.pendingServiceCIDRs !== undefined;
  }

  /** For kubeproxy_sync_proxy_rules_{service,endpoint}_changes_pending. */
  pending(): { services: number; endpointSlices: number } {
    return { services: this.inputs.pendingServiceCount, endpointSlices: this.inputs.pendingSlicesCount };
  }

  /** The next checkout reports full (after a failed sync, or for the periodic resync). */
  requestFullSync(): void {
    this.fullRequested = true;
  }

  /**
   * A Service was added (prev undefined), updated, or deleted (cur undefined). Returns
   * syncNeeded. The diff is against what was applied, not against prev, so a missed or
   * repeated event cannot corrupt the state.
   */
  onService(prev: Service | undefined, cur: Service | undefined): boolean {
    this.guard('Service', cur ?? prev, () => {
      if (cur === undefined && prev === undefined) return;
      this.totals.services++;
      if (cur === undefined) {
        const { namespace, name } = nameOf(isObject(prev) ? prev['metadata'] : undefined);
        if (!namespace || !name) return;
        const key = serviceKey(namespace, name);
        this.rejectLog.forget('Service', key);
        this.inputs.setService(key, []);
        return;
      }
      const res = normalizeService(cur, this.opts.family, this.limits);
      this.rejectLog.report('Service', res.key ?? describe(cur), res.issues.list, versionOf(cur));
      // A wholly unusable update leaves the last good version in place (nothing programmed is lost).
      if (res.key && !res.rejected) this.inputs.setService(res.key, res.ports);
    });
    return this.syncNeeded;
  }

  /** An EndpointSlice was added or updated, or removed. Returns syncNeeded. */
  onEndpointSlice(slice: EndpointSlice, removed: boolean): boolean {
    this.guard('EndpointSlice', slice, () => {
      this.totals.endpointSlices++;
      const { namespace, name } = nameOf(isObject(slice) ? slice['metadata'] : undefined);
      const objKey = `${namespace}/${name}`;
      if (removed) {
        this.rejectLog.forget('EndpointSlice', objKey);
        // Matched by name: the Service it was filed under, whatever the removed copy says.
        const owner = this.inputs.ownerOf(objKey);
        // Upstream: a deletion's annotation dates from the last update, not from this change.
        if (owner && this.inputs.setSlice(objKey, name, owner, undefined)) this.triggerTimes.delete(owner);
        return;
      }
      const res = normalizeSlice(slice, this.opts.family, this.limits, this.opts.nodeName);
      this.rejectLog.report('EndpointSlice', res.key ? objKey : describe(slice), res.issues.list, versionOf(slice));
      if (res.rejected || !res.key) return; // keep the last good version, if any
      if (!this.inputs.setSlice(objKey, name, res.key, res.info)) return;
      const t = triggerTimeOf(slice);
      if (t !== undefined && t > this.startTime) {
        const list = this.triggerTimes.get(res.key);
        if (list) list.push(t);
        else this.triggerTimes.set(res.key, [t]);
      }
    });
    return this.syncNeeded;
  }

  /** The configured node IP (--bind-address) overrides the Node's primary IP of its family. */
  private withNodeIP(info: NodeInfo): NodeInfo {
    const ip = this.opts.nodeIP ?? '';
    return ip === '' ? info : { ...info, primaryIP: ip };
  }

  /** This node's Node object (undefined: deleted or not there). Other nodes are ignored. */
  onNode(node: Node | undefined): boolean {
    this.guard('Node', node, () => {
      let info: NodeInfo;
      if (node === undefined) {
        info = unknownNode(this.opts.nodeName);
      } else {
        const name = nodeNameOf(node);
        if (name !== this.opts.nodeName) {
          this.logger.debug('ignoring a Node that is not this node', { node: name, nodeName: this.opts.nodeName });
          return;
        }
        const res = normalizeNode(node, this.opts.nodeName, this.opts.family);
        this.rejectLog.report('Node', name, res.issues.list, versionOf(node));
        info = res.info;
      }
      info = this.withNodeIP(info);
      this.pendingNode = deepEqual(info, this.desired.node) ? undefined : info;
    });
    return this.syncNeeded;
  }

  /** Every ServiceCIDR currently known (none: the configured serviceCIDRs). Returns syncNeeded. */
  onServiceCIDRs(cidrs: readonly ServiceCIDR[]): boolean {
    this.guard('ServiceCIDR', undefined, () => {
      const issues = new Issues();
      const list = serviceCIDRsOf(cidrs, this.opts, issues);
      this.rejectLog.report('ServiceCIDR', 'all', issues.list);
      this.pendingServiceCIDRs = deepEqual(list, this.desired.serviceCIDRs) ? undefined : list;
    });
    return this.syncNeeded;
  }

  /** Applies everything pending and says what changed. Cost: proportional to the changes. */
  checkout(): Checkout {
    const c = newCollected();
    const st = this.publisher.state;
    const nodeChanged = this.pendingNode !== undefined || this.pendingServiceCIDRs !== undefined;
    if (nodeChanged) {
      const zoneChanged = this.pendingNode !== undefined && this.pendingNode.zone !== st.node.zone;
      if (this.pendingNode) st.node = this.pendingNode;
      if (this.pendingServiceCIDRs) st.serviceCIDRs = this.pendingServiceCIDRs;
      // Option problems were reported at construction; these depend on the node only.
      st.nodePortAddresses = selectNodePortAddresses(this.opts.nodePortAddresses, this.opts.family, st.node);
      st.masquerade = buildMasqueradePolicy(this.opts, st.node);
      this.pendingNode = undefined;
      this.pendingServiceCIDRs = undefined;
      // Topology hints depend on the zone, so every selection may change. This runs before the
      // per-Service pass, which then starts from selections made with the new zone.
      if (zoneChanged) this.publisher.reselectAll(this.topology(), c);
    }

    const ctx = this.topology();
    for (const key of this.inputs.apply()) {
      this.publisher.recompute(key, this.inputs.servicePorts(key), this.inputs.slices(key), ctx, c);
    }

    // The first checkout has no "before": every UDP Service would look newly active and its
    // flows be flushed on each restart (upstream issue 122740). Flows that survive a restart
    // are judged by the conntrack reconciler against the desired state instead.
    const stale = this.checkedOut ? c.stale : [];
    this.checkedOut = true;
    // Node facts reach rules outside any Service (node-port addresses, masquerade): full.
    const full = this.fullRequested || nodeChanged;
    if (full || c.services.size > 0) st.generation++;
    this.fullRequested = false;
    const triggerTimes = this.triggerTimes;
    this.triggerTimes = new Map();
    return {
      desired: st,
      change: {
        full,
        services: c.services,
        previous: c.previous,
        serviceKeys: c.serviceKeys,
        stale,
        triggerTimes,
        nodeChanged,
      },
    };
  }

  private topology(): TopologyContext {
    return {
      nodeName: this.opts.nodeName,
      zone: this.desired.node.zone,
      nodeHints: this.opts.preferSameNodeHints !== false,
    };
  }

  private guard(kind: RejectKind, obj: unknown, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      // A bug of ours or a hostile object: logged at error level, once, like any reject.
      const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
      this.rejectLog.report(kind, describe(obj), [{ reason: 'internal-error', detail }], '', 'error');
    }
  }
}

function describe(obj: unknown): string {
  try {
    if (!isObject(obj)) return '<not an object>';
    const { namespace, name } = nameOf(obj['metadata']);
    return namespace ? `${namespace}/${name || '<no name>'}` : name || '<no name>';
  } catch {
    return '<unreadable object>'; // hostile getters: describing must not throw either
  }
}

const versionOf = (obj: unknown): string =>
  isObject(obj) && isObject(obj['metadata']) ? str(obj['metadata']['resourceVersion']) : '';
