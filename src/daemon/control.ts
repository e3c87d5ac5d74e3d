// What the control socket answers (`kube-proxy-ts explain`, `trace`): the model as last
// checked out by each family's tracker (what the proxier last synced), the proxier's
// description of what the kernel holds, and the sync times the metrics already keep.

import type { IPFamily } from '../base/ip.ts';
import type { Logger } from '../base/logger.ts';
import { startControlServer } from '../control/server.ts';
import type { ControlServer } from '../control/server.ts';
import { balancingOf } from '../explain/balancing.ts';
import type { BalancingContext } from '../explain/balancing.ts';
import { explainPort, matchPorts } from '../explain/explain.ts';
import type { PortExplanation } from '../explain/explain.ts';
import type { DaemonIdentity, ExplainAnswer, SyncTimes } from '../explain/format.ts';
import { trace } from '../explain/trace.ts';
import type { TraceQuery, TraceResult } from '../explain/trace.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import type { ChangeTracker, DesiredState, Protocol } from '../model/index.ts';
import { liveTrace } from '../live-trace/session.ts';
import type { ProxierSet } from './modes/index.ts';
import type { Profiler } from './profiling.ts';

export interface ControlParts {
  readonly path: string;
  readonly trackers: ReadonlyMap<IPFamily, ChangeTracker>;
  readonly proxiers: ProxierSet;
  readonly metrics: ProxyMetrics;
  readonly localAddresses: () => readonly string[];
  readonly logger: Logger;
  /** How `trace --live` watches the kernel; default live-trace/session.ts (tests replace it). */
  readonly liveTrace?: typeof liveTrace;
  /** --profiling: `profile` queries are answered; unset: refused. */
  readonly profiler?: Profiler;
  /** The node's load-balancing flags, for what explain and trace say of each port's algorithm. */
  readonly balancing?: BalancingContext;
}

async function gaugeTimes(g: ProxyMetrics['syncProxyRulesLastTimestamp']): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const v of (await g.get()).values) {
    if (v.value > 0) out[String(v.labels['ip_family'])] = new Date(v.value * 1000).toISOString();
  }
  return out;
}

async function syncTimes(p: ControlParts): Promise<SyncTimes> {
  return {
    mode: p.proxiers.mode,
    lastSync: await gaugeTimes(p.metrics.syncProxyRulesLastTimestamp),
    lastChange: await gaugeTimes(p.metrics.syncProxyRulesLastQueuedTimestamp),
    pending: [...p.trackers.values()].some((t) => t.syncNeeded),
  };
}

/** Who answers: the node the model serves (every family's is the same), the mode, this process and its socket. */
export function identity(p: ControlParts): DaemonIdentity {
  const first = p.trackers.values().next();
  const nodeName = first.done === true ? '' : first.value.desired.node.name;
  return { nodeName, mode: p.proxiers.mode, pid: process.pid, socket: p.path };
}

async function explain(p: ControlParts, target: string | undefined, signal: AbortSignal): Promise<ExplainAnswer> {
  const ports: PortExplanation[] = [];
  // What the proxiers read from the kernel is shared by the ports of this query.
  const session = new Map<string, unknown>();
  for (const [family, tracker] of p.trackers) {
    const state = tracker.desired;
    const proxier = p.proxiers.proxiers.get(family);
    for (const info of matchPorts(state, target)) {
      signal.throwIfAborted();
      const description = await proxier?.describe?.(info, { signal, session });
      ports.push(explainPort(state, info, description, balancingOf(p.proxiers.mode, info, p.balancing)));
    }
  }
  if (target !== undefined && ports.length === 0)
    throw new Error(`no Service port ${target} (the model has ${countPorts(p)} service ports)`);
  return { daemon: identity(p), sync: await syncTimes(p), ports };
}

const countPorts = (p: ControlParts): number =>
  [...p.trackers.values()].reduce((n, t) => n + t.desired.services.size, 0);

const PROTOCOLS = new Set(['TCP', 'UDP', 'SCTP']);

/** A trace query from the wire: every field checked, a clear error naming the bad one. */
export function traceQuery(r: Record<string, unknown>): TraceQuery {
  const str = (k: string): string => {
    const v = r[k];
    if (typeof v !== 'string' || v === '') throw new Error(`trace: ${k} must be a non-empty string`);
    return v;
  };
  const port = (k: string, optional: boolean): number | undefined => {
    const v = r[k];
    if (v === undefined && optional) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535)
      throw new Error(`trace: ${k} must be a port number 1-65535`);
    return v;
  };
  const protocol = (typeof r['protocol'] === 'string' ? r['protocol'] : 'TCP').toUpperCase();
  if (!PROTOCOLS.has(protocol)) throw new Error(`trace: protocol ${protocol} is not TCP, UDP or SCTP`);
  const fromPort = port('fromPort', true);
  const inInterface = r['inInterface'];
  if (inInterface !== undefined && typeof inInterface !== 'string')
    throw new Error('trace: inInterface must be a string');
  return {
    from: str('from'),
    to: str('to'),
    port: port('port', false)!,
    protocol: protocol as Protocol,
    ...(fromPort !== undefined ? { fromPort } : {}),
    ...(inInterface !== undefined ? { inInterface } : {}),
  };
}

function traceIt(p: ControlParts, r: Record<string, unknown>): TraceResult & { sync?: SyncTimes } {
  const states = new Map<IPFamily, DesiredState>();
  for (const [family, t] of p.trackers) states.set(family, t.desired);
  const ctx = { states, localAddresses: p.localAddresses(), mode: p.proxiers.mode };
  return trace(p.balancing ? { ...ctx, balancing: p.balancing } : ctx, traceQuery(r));
}

/** `live: {timeoutMs}` of a trace query: how long to wait for a matching packet (at most a minute). */
function liveTimeout(v: unknown): number | undefined {
  if (v === undefined || v === false) return undefined;
  const ms = (v as { timeoutMs?: unknown }).timeoutMs;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 100 || ms > 60_000)
    throw new Error('trace: live.timeoutMs must be 100-60000');
  return ms;
}

/** `profile` {kind: cpu|heap, path, seconds}: only with --profiling. */
function profile(profiler: Profiler | undefined, r: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
  if (profiler === undefined)
    throw new Error('profiling is off: start the daemon with --profiling (enableProfiling: true in the config file)');
  if (r['kind'] === 'cpu') return profiler.cpu(r['path'], r['seconds'], signal);
  if (r['kind'] === 'heap') return profiler.heap(r['path']);
  throw new Error('profile: kind must be cpu or heap');
}

export function controlHandler(p: ControlParts) {
  return async (r: Record<string, unknown>, signal: AbortSignal): Promise<unknown> => {
    switch (r['op']) {
      case 'ping':
        return { daemon: identity(p), mode: p.proxiers.mode, families: [...p.trackers.keys()] };
      case 'explain': {
        const target = r['target'];
        if (target !== undefined && typeof target !== 'string')
          throw new Error('explain: target must be NAMESPACE/NAME[:PORT]');
        return explain(p, target, signal);
      }
      case 'trace': {
        const predicted = { daemon: identity(p), ...traceIt(p, r), sync: await syncTimes(p) };
        const live = liveTimeout(r['live']);
        if (live === undefined) return predicted;
        return { ...predicted, live: await (p.liveTrace ?? liveTrace)(predicted.query, { timeoutMs: live, signal }) };
      }
      case 'profile':
        return profile(p.profiler, r, signal);
      default:
        throw new Error(`unknown query ${JSON.stringify(r['op'])} (ping, explain, trace, profile)`);
    }
  };
}

export function startControl(p: ControlParts): Promise<ControlServer> {
  return startControlServer({ path: p.path, handler: controlHandler(p), logger: p.logger });
}
