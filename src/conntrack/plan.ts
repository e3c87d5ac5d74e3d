// The flusher's decisions, without I/O: which dumps to make, and which dumped entries to
// delete, for the stale targets of a sync (flush) and for a restart (reconcile).
//
// Flush: a target's filters (stale-filters.ts) select candidates; when the desired state is
// known, a guard then keeps every candidate whose reply source is a serving endpoint of the
// frontend it was sent to (a target retried or coalesced after the endpoint came back, or a
// flow DNATed to a good endpoint between the commit and the flush of a "newly-active"), and
// a NodePort filter (any destination address) only takes entries that really went to a node
// port of ours: DNATed ones, or un-DNATed ones to an address node ports answer on. Entries
// whose destination was another host's port of that number are never touched.
//
// Reconcile (upstream pkg/proxy/conntrack/cleanup.go, CleanStaleEntries): every UDP/SCTP
// entry whose original destination is a frontend (service IP:port, or a node port) and whose
// reply source is not a serving endpoint of that frontend is stale; every other entry is
// left alone. Unlike upstream, endpoints are compared by address and port (a targetPort
// change leaves nothing listening on the old port), frontends by address, protocol and port
// (upstream unions all UDP ports of an IP), SCTP is included, and an un-DNATed entry counts
// as a node-port one only on an address node ports answer on.
//
// Kernel-side flushes (Linux 6.12+, see netlink/conntrack/filter.ts): a filter may go as one
// flush request instead of through the dump when the kernel matches it exactly and the guard
// could keep none of its entries. kernelFlushable() decides that per filter from the desired
// state alone: a service-IP filter (never a node-port one, whose guard looks at each entry's
// destination) whose frontend has no serving endpoint the filter's reply source could be. In
// practice: an endpoint removed for good (IPv4 UDP), a Service deleted. A "newly-active"
// target, whose frontend now has endpoints, always goes through the dump.
//
// TCP never appears: flush filters and reconcile dumps are UDP and SCTP only, and every
// decision re-checks the protocol.

import type { IPFamily } from '../base/ip.ts';
import { cidrContains, parseCIDR, parseIP } from '../base/ip.ts';
import type { CIDR } from '../base/ip.ts';
import type { DesiredState, StaleTarget } from '../model/index.ts';
import { compileFilter, IPPROTO, IPS } from '../netlink/conntrack/index.ts';
import type { Flow, FlowFilter, TupleMatch } from '../netlink/conntrack/index.ts';
import { staleFlowFilters } from './stale-filters.ts';

/** Protocols the flusher ever deletes. */
export const FLUSH_PROTOS: ReadonlySet<number> = new Set([IPPROTO.UDP, IPPROTO.SCTP]);

// ---------------------------------------------------------------------------------------
// Targets: identity, coalescing, retry bookkeeping.

/** A stable identity for a target: equal targets coalesce into one. */
export function targetKey(t: StaleTarget): string {
  return [
    t.reason,
    t.family,
    t.protocol,
    t.service,
    [...t.serviceIPs].sort().join(','),
    t.port,
    t.nodePort,
    t.endpointIP ?? '',
    t.endpointPort ?? '',
  ].join('|');
}

/** A target waiting to be flushed, and how many runs already failed it. */
export interface PendingTarget {
  readonly target: StaleTarget;
  readonly attempts: number;
}

/** Adds targets to a pending map (coalescing equal ones; a known target keeps its attempt count). */
export function mergeTargets(into: Map<string, PendingTarget>, targets: Iterable<StaleTarget | PendingTarget>): void {
  for (const x of targets) {
    const p: PendingTarget = 'target' in x ? x : { target: x, attempts: 0 };
    const key = targetKey(p.target);
    const had = into.get(key);
    into.set(key, had ? { target: p.target, attempts: Math.max(had.attempts, p.attempts) } : p);
  }
}

/**
 * The targets of a run that failed, to keep for the next one (attempts counted), and those
 * given up after maxAttempts.
 */
export function retainFailed(
  failed: Iterable<PendingTarget>,
  maxAttempts: number,
): { keep: PendingTarget[]; dropped: PendingTarget[] } {
  const keep: PendingTarget[] = [];
  const dropped: PendingTarget[] = [];
  for (const p of failed) {
    const next = { target: p.target, attempts: p.attempts + 1 };
    (next.attempts >= maxAttempts ? dropped : keep).push(next);
  }
  return { keep, dropped };
}

// ---------------------------------------------------------------------------------------
// What is serving: frontends and their endpoints, from the desired state.

/** The frontends of one family's UDP/SCTP service ports and the endpoints each may reply from. */
export interface ServingIndex {
  readonly family: IPFamily;
  /** "proto ip port" (service IP frontends) -> "ip port" of serving endpoints. */
  readonly frontends: ReadonlyMap<string, ReadonlySet<string>>;
  /** "proto nodePort" -> "ip port" of serving endpoints. */
  readonly nodePorts: ReadonlyMap<string, ReadonlySet<string>>;
  /** Protocols with at least one frontend. */
  readonly protos: ReadonlySet<number>;
  /** An address node ports answer on (for entries that were not DNATed). */
  nodePortAddress(ip: string): boolean;
}

export interface IndexOptions {
  /**
   * Whether an address is local to this node. Used when node ports answer on every local
   * address (nodePortAddresses empty); without it only the node's primary IP counts there.
   */
  isLocalAddress?: (ip: string, family: IPFamily) => boolean;
}

const PROTO_NUM = { UDP: IPPROTO.UDP, SCTP: IPPROTO.SCTP } as const;

const canon = (ip: string): string | undefined => parseIP(ip)?.text;
export const frontendKey = (proto: number, ip: string, port: number): string => `${proto} ${ip} ${port}`;
export const nodePortKey = (proto: number, port: number): string => `${proto} ${port}`;
export const endpointKey = (ip: string, port: number | undefined): string => `${ip} ${port ?? ''}`;

export function servingIndex(desired: DesiredState, opts: IndexOptions = {}): ServingIndex {
  const frontends = new Map<string, Set<string>>();
  const nodePorts = new Map<string, Set<string>>();
  const protos = new Set<number>();
  const addAll = (map: Map<string, Set<string>>, key: string, eps: ReadonlySet<string>): void => {
    const had = map.get(key);
    if (had) for (const e of eps) had.add(e);
    else map.set(key, new Set(eps));
  };
  for (const [id, info] of desired.services) {
    if (info.protocol !== 'UDP' && info.protocol !== 'SCTP') continue;
    if (info.family !== desired.family) continue;
    const proto = PROTO_NUM[info.protocol];
    // Serving endpoints (as upstream: terminating but serving ones keep their flows), and
    // whatever the selection reaches (a subset, unless the model says otherwise).
    const eps = new Set<string>();
    for (const ep of desired.endpoints.get(id) ?? []) {
      const ip = ep.serving ? canon(ep.ip) : undefined;
      if (ip) eps.add(endpointKey(ip, ep.port));
    }
    for (const ep of desired.selections.get(id)?.allReachable ?? []) {
      const ip = canon(ep.ip);
      if (ip) eps.add(endpointKey(ip, ep.port));
    }
    protos.add(proto);
    for (const text of [info.clusterIP, ...info.externalIPs, ...info.loadBalancerVIPs]) {
      const ip = text ? parseIP(text) : undefined;
      if (ip && ip.family === desired.family) addAll(frontends, frontendKey(proto, ip.text, info.port), eps);
    }
    if (info.nodePort > 0) addAll(nodePorts, nodePortKey(proto, info.nodePort), eps);
  }
  const npa = desired.nodePortAddresses;
  const cidrs = npa.matchAll ? [] : npa.cidrs.map(parseCIDR).filter((c): c is CIDR => c !== undefined);
  const primary = canon(desired.node.primaryIP);
  const family = desired.family;
  const nodePortAddress = (ip: string): boolean => {
    if (!npa.matchAll) {
      const a = parseIP(ip);
      return a !== undefined && cidrs.some((c) => cidrContains(c, a));
    }
    if (opts.isLocalAddress) return opts.isLocalAddress(ip, family);
    return primary !== undefined && ip === primary;
  };
  return { family, frontends, nodePorts, protos, nodePortAddress };
}

/** The entry was DNATed (by a service rule): its reply does not come from where it was sent. */
export function isDNATed(f: Flow): boolean {
  return (f.status & IPS.DST_NAT) !== 0 || f.reply.src !== f.orig.dst || f.reply.srcPort !== f.orig.dstPort;
}

/**
 * The endpoints allowed to answer the frontend an entry was sent to, or undefined when the
 * entry was not sent to a frontend of ours.
 */
export function allowedFor(index: ServingIndex, f: Flow): ReadonlySet<string> | undefined {
  if (f.family !== index.family || !FLUSH_PROTOS.has(f.orig.proto) || f.orig.dstPort === undefined) return undefined;
  const byIP = index.frontends.get(frontendKey(f.orig.proto, f.orig.dst, f.orig.dstPort));
  if (byIP) return byIP;
  const byPort = index.nodePorts.get(nodePortKey(f.orig.proto, f.orig.dstPort));
  if (byPort && (isDNATed(f) || index.nodePortAddress(f.orig.dst))) return byPort;
  return undefined;
}

/** Reconcile: the entry goes to a frontend of ours and its reply source serves it no more. */
export function isStaleAgainst(index: ServingIndex, f: Flow): boolean {
  const allowed = allowedFor(index, f);
  return allowed !== undefined && !allowed.has(endpointKey(f.reply.src, f.reply.srcPort));
}

// ---------------------------------------------------------------------------------------
// Flush plans.

export interface PlannedFilter {
  readonly filter: FlowFilter;
  readonly matches: (f: Flow) => boolean;
  /** A node-port filter: any destination address. */
  readonly nodePort: boolean;
  /** Keys of the targets this filter stands for. */
  readonly targets: readonly string[];
}

/** One dump (one family and protocol) and the filters matched against its entries. */
export interface DumpGroup {
  readonly family: IPFamily;
  readonly proto: number;
  /** What the dump asks for: the fields every filter of the group shares. */
  readonly dump: FlowFilter;
  /** Keys of every target with a filter in this group. */
  readonly targets: ReadonlySet<string>;
  /** Filters by original destination port (every filter has one). */
  readonly byPort: ReadonlyMap<number, readonly PlannedFilter[]>;
  /** Every filter of the group, in plan order. */
  readonly filters: readonly PlannedFilter[];
}

export interface FlushPlan {
  readonly groups: readonly DumpGroup[];
  /** Targets with no filter at all (nothing to delete: done). */
  readonly empty: readonly string[];
}

/** The fields all filters share, for the dump request (the kernel filters by them). */
function commonFilter(filters: readonly FlowFilter[]): FlowFilter {
  const first = filters[0]!;
  const common = (pick: (m: FlowFilter) => TupleMatch | undefined): TupleMatch | undefined => {
    const out: TupleMatch = {};
    for (const k of ['src', 'dst', 'srcPort', 'dstPort'] as const) {
      const v = pick(first)?.[k];
      if (v !== undefined && filters.every((f) => pick(f)?.[k] === v)) (out as Record<string, unknown>)[k] = v;
    }
    return Object.keys(out).length ? out : undefined;
  };
  const orig = common((f) => f.orig);
  const reply = common((f) => f.reply);
  return {
    ...(first.family ? { family: first.family } : {}),
    ...(first.proto !== undefined ? { proto: first.proto } : {}),
    ...(orig ? { orig } : {}),
    ...(reply ? { reply } : {}),
  };
}

/** Groups the filters of the pending targets into one dump per family and protocol. */
export function planFlush(pending: ReadonlyMap<string, PendingTarget>): FlushPlan {
  const byFilter = new Map<string, { filter: FlowFilter; targets: string[] }>();
  const empty: string[] = [];
  for (const [key, p] of pending) {
    const filters = staleFlowFilters(p.target).filter(
      (f) => f.proto !== undefined && FLUSH_PROTOS.has(f.proto) && f.orig?.dstPort !== undefined,
    );
    if (filters.length === 0) empty.push(key);
    for (const f of filters) {
      const fk = JSON.stringify(f);
      const had = byFilter.get(fk);
      if (had) had.targets.push(key);
      else byFilter.set(fk, { filter: f, targets: [key] });
    }
  }
  const groups = new Map<string, { family: IPFamily; proto: number; filters: PlannedFilter[] }>();
  for (const { filter, targets } of byFilter.values()) {
    const family = filter.family!;
    const proto = filter.proto!;
    const gk = `${family}/${proto}`;
    let g = groups.get(gk);
    if (!g) groups.set(gk, (g = { family, proto, filters: [] }));
    g.filters.push({ filter, matches: compileFilter(filter), nodePort: filter.orig?.dst === undefined, targets });
  }
  return { empty, groups: [...groups.values()].map((g) => makeGroup(g.family, g.proto, g.filters)) };
}

function makeGroup(family: IPFamily, proto: number, filters: readonly PlannedFilter[]): DumpGroup {
  const byPort = new Map<number, PlannedFilter[]>();
  const targets = new Set<string>();
  for (const pf of filters) {
    const port = pf.filter.orig!.dstPort!;
    const list = byPort.get(port);
    if (list) list.push(pf);
    else byPort.set(port, [pf]);
    for (const t of pf.targets) targets.add(t);
  }
  return { family, proto, dump: commonFilter(filters.map((f) => f.filter)), targets, byPort, filters };
}

/** The group without the given filters (its dump narrowed to what the rest share), or undefined when none is left. */
export function withoutFilters(group: DumpGroup, drop: ReadonlySet<PlannedFilter>): DumpGroup | undefined {
  if (drop.size === 0) return group;
  const rest = group.filters.filter((pf) => !drop.has(pf));
  return rest.length === 0 ? undefined : makeGroup(group.family, group.proto, rest);
}

/**
 * Whether the guard of selectStale could keep an entry this filter matches. False means one
 * kernel-side flush of the filter deletes what the dump path would. Without a desired state
 * there is no guard; a node-port filter's guard depends on each entry's destination.
 */
export function guardMayKeep(pf: PlannedFilter, index: ServingIndex | undefined): boolean {
  if (!index) return false;
  if (pf.nodePort) return true;
  const f = pf.filter;
  const proto = f.proto!;
  const port = f.orig!.dstPort!;
  // allowedFor(): the frontend's endpoints, else (conditionally) a node port's of that number.
  const allowed =
    index.frontends.get(frontendKey(proto, f.orig!.dst!, port)) ?? index.nodePorts.get(nodePortKey(proto, port));
  if (!allowed || allowed.size === 0) return false;
  const src = f.reply?.src;
  if (src === undefined) return true; // any reply source, some of them serving
  const srcPort = f.reply?.srcPort;
  if (srcPort !== undefined) return allowed.has(endpointKey(src, srcPort));
  const prefix = endpointKey(src, undefined);
  for (const e of allowed) if (e.startsWith(prefix)) return true;
  return false;
}

/**
 * The filters of a group to delete by kernel-side flush: those the kernel matches exactly
 * (`exact`, the client's canFlush) and the guard keeps nothing of.
 */
export function kernelFlushable(
  group: DumpGroup,
  index: ServingIndex | undefined,
  exact: (f: FlowFilter) => boolean,
): PlannedFilter[] {
  return group.filters.filter((pf) => !guardMayKeep(pf, index) && exact(pf.filter));
}

/** An entry chosen for deletion and the targets that chose it. */
export interface Selected {
  readonly flow: Flow;
  readonly targets: readonly string[];
}

export interface Selection {
  readonly selected: Selected[];
  /** Entries a filter matched that the guard kept (their reply source serves the frontend). */
  readonly kept: number;
}

/**
 * The entries of a group's dump to delete. With an index (the desired state of the group's
 * family), the guard applies (see the header).
 */
export function selectStale(group: DumpGroup, flows: Iterable<Flow>, index?: ServingIndex): Selection {
  const selected: Selected[] = [];
  let kept = 0;
  const g = index ? guardLookups(index) : undefined;
  for (const f of flows) {
    if (
      f.family !== group.family ||
      f.orig.proto !== group.proto ||
      !FLUSH_PROTOS.has(f.orig.proto) ||
      f.orig.dstPort === undefined
    )
      continue;
    const candidates = group.byPort.get(f.orig.dstPort);
    if (!candidates) continue;
    // Usually one filter matches: its target list is shared, not copied.
    let targets: readonly string[] | undefined;
    for (const pf of candidates) {
      if (!pf.matches(f)) continue;
      if (pf.nodePort && index) {
        // Only entries that went to a node port of ours: not to a service IP that happens to
        // use the same port number, not to another host's port.
        if (g!.frontend(f)) continue;
        if (!isDNATed(f) && !index.nodePortAddress(f.orig.dst)) continue;
      }
      targets = targets === undefined ? pf.targets : [...new Set([...targets, ...pf.targets])];
    }
    if (!targets) continue;
    if (g?.serves(f)) {
      kept++;
      continue;
    }
    selected.push({ flow: f, targets });
  }
  return { selected, kept };
}

/**
 * index.frontends of an entry's destination, and allowedFor(index, f).has(its reply source),
 * memoized on the last destination and reply source seen: a dump's entries come grouped by
 * both (10,000 entries to one Service and one endpoint), so this builds one string key per
 * change instead of two per entry.
 */
function guardLookups(index: ServingIndex): {
  frontend(f: Flow): ReadonlySet<string> | undefined;
  serves(f: Flow): boolean;
} {
  let proto = -1;
  let dst: string | undefined;
  let port: number | undefined;
  let front: ReadonlySet<string> | undefined;
  let set: ReadonlySet<string> | undefined;
  let src: string | undefined;
  let srcPort: number | undefined;
  let has = false;
  const frontend = (f: Flow): ReadonlySet<string> | undefined => {
    if (f.orig.proto !== proto || f.orig.dst !== dst || f.orig.dstPort !== port) {
      proto = f.orig.proto;
      dst = f.orig.dst;
      port = f.orig.dstPort;
      front = port === undefined ? undefined : index.frontends.get(frontendKey(proto, dst, port));
    }
    return front;
  };
  return {
    frontend,
    serves(f) {
      // allowedFor(): the frontend's endpoints, else (conditionally) the node port's.
      const allowed = frontend(f) ?? allowedFor(index, f);
      if (!allowed) return false;
      if (allowed !== set || f.reply.src !== src || f.reply.srcPort !== srcPort) {
        set = allowed;
        src = f.reply.src;
        srcPort = f.reply.srcPort;
        has = allowed.has(endpointKey(src, srcPort));
      }
      return has;
    },
  };
}

// ---------------------------------------------------------------------------------------
// Reconcile plans.

/** The dumps a reconcile of one family needs: one per protocol that has frontends. */
export function reconcileDumps(index: ServingIndex): FlowFilter[] {
  return [...index.protos].sort((a, b) => a - b).map((proto) => ({ family: index.family, proto }));
}

/** The entries of a reconcile dump to delete. */
export function selectReconcile(index: ServingIndex, flows: Iterable<Flow>): Flow[] {
  const out: Flow[] = [];
  for (const f of flows) if (isStaleAgainst(index, f)) out.push(f);
  return out;
}
