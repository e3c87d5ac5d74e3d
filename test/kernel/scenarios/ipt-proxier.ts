// Runs inside the node namespace (netns agent): the model and the iptables proxier against the
// real kernel, driven by Kubernetes objects the test passes in.
import { systemClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { connect, connectWithPort, Protocol } from '../../../src/netlink/core/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../src/netlink/nftables/iptables/rule.ts';
import { RouteClient } from '../../../src/netlink/route/index.ts';
import { ChangeTracker, type LoadBalancing } from '../../../src/model/index.ts';
import { IptablesProxier, iptablesNftCodec } from '../../../src/proxier/iptables/index.ts';
import { ChainDriftWatch } from '../../../src/proxier/drift/chain-watch.ts';
import type { ModelOptions, SyncReportLike } from './nft-proxier-types.ts';
import { ObjectFeed } from './object-feed.ts';
import { ProcSysctl } from '../../../src/daemon/sysctl.ts';
import type { ObjectChange } from './object-feed.ts';
import { problemText } from '../../../src/proxier/types.ts';
import type { ProxyMode } from '../../../src/proxier/types.ts';

let tracker: ChangeTracker | undefined;
let proxier: IptablesProxier | undefined;
let conn: ReturnType<typeof connect> | undefined;
let routeConn: ReturnType<typeof connect> | undefined;
let watcher: ChainDriftWatch | undefined;
let syncing = false;
const objects = new ObjectFeed();
const logs = memoryLogger();
const sysctls = new Map<string, number>();
/** Syncs the canary asked for, and when each finished (ms since the epoch). */
const drift: { at: number; done?: number; error?: string }[] = [];

export interface StartOptions extends Partial<ModelOptions> {
  masqueradeBit?: number;
  maxBatchBytes?: number;
  localhostNodePorts?: boolean;
  /** Poll the canary chains this often (real clock); off when absent. */
  canaryIntervalMs?: number;
  /** Listen to nf_tables announcements (chain-watch.ts): a change to our chains by someone else asks for a sync. */
  watchDrift?: boolean;
  /** --load-balancing, the node's default algorithm. */
  loadBalancing?: LoadBalancing;
}

/** A fresh tracker and proxier (as a restarted daemon has), over the same kernel. */
export function start(opts: StartOptions = {}): void {
  proxier?.stop();
  watcher?.close();
  watcher = undefined;
  conn?.close();
  routeConn?.close();
  const opened = connectWithPort(Protocol.NETFILTER, { timeoutMs: 10_000 });
  conn = opened.conn;
  routeConn = connect(Protocol.ROUTE, { timeoutMs: 10_000 });
  const route = new RouteClient(routeConn);
  const { masqueradeBit, maxBatchBytes, localhostNodePorts, canaryIntervalMs, watchDrift, loadBalancing, ...model } =
    opts;
  const family = model.family ?? 'IPv4';
  tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4', ...model }, { logger: logs, clock: systemClock });
  const nftFamily = family === 'IPv6' ? 'ip6' : 'ip';
  const tables: IptTable[] = ['nat', 'filter', 'mangle'];
  const clients = new Map(
    tables.map((table) => [table, new NftClient({ family: nftFamily, table, transport: conn! })]),
  );
  proxier = new IptablesProxier({
    family,
    clients,
    sender: clients.get('nat')!,
    codec: iptablesNftCodec(family),
    logger: logs,
    localAddresses: () => route.nodeAddresses(family),
    // /proc/sys/net is per network namespace: this writes the node namespace's own.
    sysctl: {
      set: async (path, value) => {
        await new ProcSysctl().set(path, value);
        sysctls.set(path, value);
      },
    },
    maxBatchBytes: maxBatchBytes ?? conn.maxBatchBytes,
    ...(masqueradeBit !== undefined ? { masqueradeBit } : {}),
    ...(localhostNodePorts !== undefined ? { localhostNodePorts } : {}),
    ...(loadBalancing !== undefined ? { loadBalancing } : {}),
    ...(canaryIntervalMs !== undefined ? { clock: systemClock, canaryIntervalMs } : {}),
  });
  const resync = (): void => {
    const entry: (typeof drift)[number] = { at: Date.now() };
    drift.push(entry);
    apply({}).then(
      () => (entry.done = Date.now()),
      (e: unknown) => (entry.error = String(e)),
    );
  };
  proxier.watch(resync);
  if (watchDrift)
    watcher = new ChainDriftWatch({
      targets: new Map([[nftFamily, proxier]]),
      ownPorts: new Set([opened.port]),
      onDrift: resync,
      syncing: () => syncing,
      logger: logs,
    });
  objects.clear();
}

let chain: Promise<unknown> = Promise.resolve();

/** Applies objects (a null value deletes by key) and syncs; returns the sync report. Serialised. */
export function apply(change: ObjectChange, forceFull = false): Promise<SyncReportLike> {
  const run = async (): Promise<SyncReportLike> => {
    const t = tracker!;
    objects.feed(t, change);
    if (forceFull) t.requestFullSync();
    const { desired, change: cs } = t.checkout();
    syncing = true;
    const r = await proxier!.sync(desired, cs, new AbortController().signal).finally(() => (syncing = false));
    return {
      full: r.full,
      servicesChanged: r.servicesChanged,
      errors: r.errors.map(problemText),
      batches: r.batches ?? 0,
    };
  };
  const p = chain.then(run, run);
  chain = p.catch(() => undefined);
  return p;
}

/** The per-Service traffic counters (--service-traffic-metrics), keyed "id|frontend". */
export async function traffic(): Promise<Record<string, { packets?: number; bytes?: number; connections?: number }>> {
  const out: Record<string, { packets?: number; bytes?: number; connections?: number }> = {};
  for (const { id, frontend, ...counts } of await proxier!.trafficCounters()) out[`${id}|${frontend}`] = counts;
  return out;
}

export async function cleanup(): Promise<void> {
  proxier!.stop();
  await proxier!.cleanup();
}

export function stop(): void {
  proxier?.stop();
  watcher?.close();
  watcher = undefined;
}

export function sysctlValues(): Record<string, number> {
  return Object.fromEntries(sysctls);
}

export function driftSyncs(): typeof drift {
  return drift;
}

/** Forgets the syncs asked for so far. */
export function clearDriftSyncs(): void {
  drift.length = 0;
}

export function warnings(): string[] {
  return logs.records
    .filter((r) => r.level === 'warn' || r.level === 'error')
    .map((r) => `${r.msg} ${JSON.stringify(r.fields)}`);
}

/** What a daemon starting in `mode` removes of the other modes (daemon/cleanup.ts). */
export async function removeOtherModes(mode: ProxyMode): Promise<void> {
  const { removeOtherModesLeftovers } = await import('../../../src/daemon/cleanup.ts');
  const { MODES } = await import('../../../src/daemon/modes/index.ts');
  await removeOtherModesLeftovers(MODES[mode].leftovers, { logger: logs });
}
