// Runs inside the node namespace (netns agent): the model and the nftables proxier against
// the real kernel, driven by Kubernetes objects the test passes in.
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { RouteClient } from '../../../src/netlink/route/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { ServicePortId, ServicePortInfo } from '../../../src/model/index.ts';
import type { ModelOptions, SyncReportLike } from './nft-proxier-types.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';
import { ObjectFeed } from './object-feed.ts';
import type { ObjectChange } from './object-feed.ts';
import { problemText } from '../../../src/proxier/types.ts';

let tracker: ChangeTracker | undefined;
let proxier: NftablesProxier | undefined;
let conn: ReturnType<typeof connect> | undefined;
let readerConn: ReturnType<typeof connect> | undefined;
/** Sets the reader has started to dump, in order (its own socket only). */
const dumpsStarted: string[] = [];
/** How many of them have ended (every reply read). */
let dumpsEnded = 0;
/** Element operations the proxier sent, outside the sets every full sync refills. */
let elementsWritten = 0;
const REFILLED = new Set(['nodeport-ips', 'pod-cidrs', 'service-cidrs']);
let routeConn: ReturnType<typeof connect> | undefined;
let nftClient: NftClient | undefined;
/** While set, the proxier's next transactions wait for it (fullSyncWithArrival). */
let gate: Promise<void> | undefined;
let openGate: (() => void) | undefined;
let heldSync: Promise<SyncReportLike> | undefined;
/** Transactions the proxier ran (counted to tell the phases of a full sync apart). */
let runs = 0;
const objects = new ObjectFeed();
const logs = memoryLogger();

/** A fresh tracker and proxier (as a restarted daemon has), over the same kernel. */
export function start(
  opts: Partial<ModelOptions> & {
    masqueradeBit?: number;
    maxBatchBytes?: number;
    serviceTraffic?: boolean;
    /** A second socket for the full sync's reads, as the daemon has: its receive buffer (0: peek, 4 KiB datagrams). */
    readerRecvBytes?: number;
  } = {},
): void {
  conn?.close();
  readerConn?.close();
  readerConn = undefined;
  routeConn?.close();
  conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  // The node's addresses, as the daemon wires them (used when nodePortAddresses is not "all").
  routeConn = connect(Protocol.ROUTE, { timeoutMs: 10_000 });
  const route = new RouteClient(routeConn);
  const clock = new FakeClock();
  const { masqueradeBit, maxBatchBytes, serviceTraffic, readerRecvBytes, ...model } = opts;
  const family = model.family ?? 'IPv4';
  tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4', ...model }, { logger: logs, clock });
  const nft = new NftClient({ family: model.family === 'IPv6' ? 'ip6' : 'ip', table: TABLE, transport: conn });
  const run = nft.run.bind(nft);
  nft.run = async (tx, signal) => {
    runs++;
    if (gate) await gate;
    for (const o of tx.operations) if (o.obj.kind === 'element' && !REFILLED.has(o.obj.set)) elementsWritten++;
    return run(tx, signal);
  };
  nftClient = nft;
  let reader: NftClient | undefined;
  if (readerRecvBytes !== undefined) {
    readerConn = connect(Protocol.NETFILTER, {
      timeoutMs: 10_000,
      ...(readerRecvBytes > 0 ? { recvMessageBytes: readerRecvBytes } : {}),
    });
    reader = new NftClient({ family: nft.scope.family, table: TABLE, transport: readerConn });
    const pages = reader.listElementPages.bind(reader);
    reader.listElementPages = (set, o) => {
      dumpsStarted.push(set);
      return pages(set, o).finally(() => dumpsEnded++);
    };
  }
  proxier = new NftablesProxier({
    nft,
    ...(reader ? { reader } : {}),
    logger: logs,
    localAddresses: () => route.nodeAddresses(family),
    ...(masqueradeBit !== undefined ? { masqueradeBit } : {}),
    ...(maxBatchBytes !== undefined ? { maxBatchBytes } : {}),
    ...(serviceTraffic !== undefined ? { serviceTraffic } : {}),
  });
  objects.clear();
}

/** Applies objects (a null value deletes by key) and syncs; returns the sync report. */
export async function apply(change: ObjectChange, forceFull = false): Promise<SyncReportLike> {
  const t = tracker!;
  objects.feed(t, change);
  if (forceFull) t.requestFullSync();
  const { desired, change: cs } = t.checkout();
  const r = await proxier!.sync(desired, cs, new AbortController().signal);
  return {
    full: r.full,
    servicesChanged: r.servicesChanged,
    errors: r.errors.map(problemText),
    batches: r.batches ?? 0,
  };
}

/**
 * Starts a full sync and delivers `during` as changes arriving while it reads the kernel.
 * Resolves once those changes are in the kernel, with the full sync held before its next
 * write until finishFullSync() (the test can send packets in between), with the number of
 * transactions run by then: 1 when the change went in before the full sync wrote anything.
 */
export async function fullSyncWithArrival(during: ObjectChange): Promise<number> {
  if (!nftClient) throw new Error('start() first');
  return heldFullSync(
    during,
    () => true,
    () => undefined,
  );
}

/**
 * fullSyncWithArrival, with `during` delivered once the reader (its own socket: start's
 * readerRecvBytes) has started to dump `set`. Resolves once the change is in the kernel,
 * the full sync held before its next write; says whether the dump was still running then.
 */
export async function fullSyncWithArrivalDuringDump(
  during: ObjectChange,
  set: string,
): Promise<{ dumpRunning: boolean; runs: number }> {
  if (!readerConn) throw new Error('start() with readerRecvBytes first');
  dumpsStarted.length = 0;
  dumpsEnded = 0;
  let dumpRunning = false;
  const runs = await heldFullSync(
    during,
    () => dumpsStarted.at(-1) === set,
    // The kernel has not sent the dump's last reply yet, and the full sync has not written.
    (runsAtApplied) => (dumpRunning = dumpsEnded < dumpsStarted.length && runsAtApplied === 1),
  );
  return { dumpRunning, runs };
}

/**
 * A full sync that takes `during` as arriving changes at the first check for them once `due`
 * says so, and is held before its next write once they are in the kernel (finishFullSync lets
 * it go on). Resolves then with the transactions run by then (`onApplied` sees them first).
 */
async function heldFullSync(
  during: ObjectChange,
  due: () => boolean,
  onApplied: (runsAtApplied: number) => void,
): Promise<number> {
  const t = tracker!;
  let delivered = false;
  let resolveApplied!: () => void;
  const applied = new Promise<void>((resolve) => (resolveApplied = resolve));
  let runsAtApplied = 0;
  t.requestFullSync();
  const { desired, change } = t.checkout();
  const arriving = {
    waiting: (): boolean => {
      if (!delivered && due()) {
        delivered = true;
        objects.feed(t, during);
      }
      return t.syncNeeded && !t.fullPending;
    },
    take: () => (t.syncNeeded && !t.fullPending ? t.checkout().change : undefined),
    applied: (): void => {
      runsAtApplied = runs - runsBefore;
      onApplied(runsAtApplied);
      gate = new Promise<void>((resolve) => (openGate = resolve));
      resolveApplied();
    },
  };
  const runsBefore = runs;
  heldSync = proxier!.sync(desired, change, new AbortController().signal, arriving).then((r) => ({
    full: r.full,
    servicesChanged: r.servicesChanged,
    errors: r.errors.map(problemText),
    batches: r.batches ?? 0,
  }));
  // A sync that ends (or fails) without taking the change also ends the wait.
  await Promise.race([applied, heldSync.then(() => undefined)]);
  if (!gate)
    throw new Error(`the full sync ended without applying the arriving change: ${JSON.stringify(await heldSync)}`);
  return runsAtApplied;
}

/** A full sync from the mirror as it is: how many elements it wrote (0: nothing was left to repair). */
export async function repairsLeft(): Promise<{ elements: number; errors: string[] }> {
  const t = tracker!;
  t.requestFullSync();
  const { desired, change } = t.checkout();
  const before = elementsWritten;
  const r = await proxier!.sync(desired, change, new AbortController().signal);
  return { elements: elementsWritten - before, errors: r.errors.map(problemText) };
}

/** How many dumps the full syncs so far accepted as interrupted (their debug line). */
export function dumpsInterrupted(): number {
  return logs.records
    .filter((r) => r.msg === 'full sync')
    .reduce((n, r) => n + Number(r.fields['dumpsInterrupted'] ?? 0), 0);
}

/** Lets the held full sync go on and returns its report. */
export async function finishFullSync(): Promise<SyncReportLike> {
  const r = heldSync!;
  openGate?.();
  gate = undefined;
  heldSync = undefined;
  return r;
}

/** The per-Service traffic counters (--service-traffic-metrics), keyed "id|frontend". */
export async function traffic(): Promise<Record<string, { packets?: number; bytes?: number; connections?: number }>> {
  const out: Record<string, { packets?: number; bytes?: number; connections?: number }> = {};
  for (const { id, frontend, ...counts } of await proxier!.trafficCounters()) out[`${id}|${frontend}`] = counts;
  return out;
}

export async function cleanup(): Promise<void> {
  await proxier!.cleanup();
}

export function warnings(): string[] {
  return logs.records
    .filter((r) => r.level === 'warn' || r.level === 'error')
    .map((r) => `${r.msg} ${JSON.stringify(r.fields)}`);
}

/**
 * Like apply(), but the proxier sees some Services under other names (service name ->
 * name): names the model refuses, as a future source or a bug could still bring them to
 * the proxier. The kernel objects' names are derived from these.
 */
export async function applyRenamed(
  change: ObjectChange,
  renames: Record<string, string>,
  forceFull = false,
): Promise<SyncReportLike> {
  const t = tracker!;
  objects.feed(t, change);
  if (forceFull) t.requestFullSync();
  const { desired, change: cs } = t.checkout();
  const services = desired.services as Map<ServicePortId, ServicePortInfo>;
  for (const [id, info] of services) {
    const to = renames[info.name];
    if (to !== undefined)
      services.set(id, {
        ...info,
        name: to,
        id: `${info.namespace}/${to}:${info.portName}/${info.protocol}` as ServicePortId,
      });
  }
  const r = await proxier!.sync(desired, cs, new AbortController().signal);
  return {
    full: r.full,
    servicesChanged: r.servicesChanged,
    errors: r.errors.map(problemText),
    batches: r.batches ?? 0,
  };
}
