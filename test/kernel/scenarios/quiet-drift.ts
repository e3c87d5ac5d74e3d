// Runs inside the node namespace (netns agent): the daemon's sync loop (sync-loop.ts, sync.ts)
// driving the model and the nftables proxier against the real kernel, on the real clock, with
// no drift watch: a change to our table is never announced to it, as a change during our
// own cold start or one whose announcement was lost is not. Only the loop's full syncs
// (fullSyncPeriodMs) can repair it; its periodic runs in between are partial.
import { systemClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { makeSync } from '../../../src/daemon/sync.ts';
import { SyncLoop } from '../../../src/daemon/sync-loop.ts';
import { RecordingNotifier } from '../../../src/daemon/sd-notify.ts';
import { ProxyHealth } from '../../../src/health/proxy-health.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';
import type { ModelOptions } from './nft-proxier-types.ts';
import { ObjectFeed } from './object-feed.ts';
import type { ObjectChange } from './object-feed.ts';

let loop: SyncLoop | undefined;
let conn: ReturnType<typeof connect> | undefined;
const runs: { full: boolean; reason: string }[] = [];

/** Starts the loop on `objects` (periodic runs every `syncPeriodMs`); resolves after its first full sync. */
export async function start(
  model: Partial<ModelOptions>,
  objects: ObjectChange,
  periods: { syncPeriodMs: number; fullSyncPeriodMs: number },
): Promise<void> {
  const logger = memoryLogger();
  const clock = systemClock;
  conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  const tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4', ...model }, { logger, clock });
  new ObjectFeed().feed(tracker, objects);
  const proxier = new NftablesProxier({
    nft: new NftClient({ family: 'ip', table: TABLE, transport: conn }),
    logger,
  });
  const sync = makeSync({ pipelines: [{ family: 'IPv4', tracker, proxier }], logger, now: () => clock.now() });
  loop = new SyncLoop({
    mode: 'nftables',
    syncPeriodMs: periods.syncPeriodMs,
    minSyncPeriodMs: 0,
    fullSyncPeriodMs: periods.fullSyncPeriodMs,
    families: ['IPv4'],
    clock,
    health: new ProxyHealth({ clock, healthTimeoutMs: 60_000 }),
    notifier: new RecordingNotifier({ clock }),
    logger,
    sync: (req) => {
      runs.push({ full: req.full, reason: req.reason });
      return sync(req);
    },
  });
  loop.start(Promise.resolve());
  await loop.ready;
}

/** The runs so far (from `from` on): full or partial, and why. */
export function runsSince(from: number): { full: boolean; reason: string }[] {
  return runs.slice(from);
}

export async function stop(): Promise<void> {
  await loop?.stop();
  conn?.close();
}
