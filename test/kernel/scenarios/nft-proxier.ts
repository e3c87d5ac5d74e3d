// Runs inside the node namespace (netns agent): the model and the nftables proxier against
// the real kernel, driven by Kubernetes objects the test passes in.
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { ModelOptions, SyncReportLike } from './nft-proxier-types.ts';
import type { EndpointSlice, Node, Service } from '../../../src/model/k8s.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';

let tracker: ChangeTracker | undefined;
let proxier: NftablesProxier | undefined;
let conn: ReturnType<typeof connect> | undefined;
const services = new Map<string, Service>();
const slices = new Map<string, EndpointSlice>();
const logs = memoryLogger();

const keyOf = (o: { metadata?: { namespace?: string; name?: string } }): string => `${o.metadata?.namespace ?? 'default'}/${o.metadata?.name ?? ''}`;

/** A fresh tracker and proxier (as a restarted daemon has), over the same kernel. */
export function start(opts: Partial<ModelOptions> & { masqueradeBit?: number; maxBatchBytes?: number } = {}): void {
  conn?.close();
  conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  const clock = new FakeClock();
  const { masqueradeBit, maxBatchBytes, ...model } = opts;
  tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4', ...model }, { logger: logs, clock });
  const nft = new NftClient({ family: model.family === 'IPv6' ? 'ip6' : 'ip', table: TABLE, transport: conn });
  proxier = new NftablesProxier({
    nft,
    logger: logs,
    ...(masqueradeBit !== undefined ? { masqueradeBit } : {}),
    ...(maxBatchBytes !== undefined ? { maxBatchBytes } : {}),
  });
  services.clear();
  slices.clear();
}

/** Applies objects (a null value deletes by key) and syncs; returns the sync report. */
export async function apply(change: { services?: (Service | string)[]; slices?: (EndpointSlice | string)[]; node?: Node }, forceFull = false): Promise<SyncReportLike> {
  const t = tracker!;
  for (const s of change.services ?? []) {
    if (typeof s === 'string') {
      t.onService(services.get(s), undefined);
      services.delete(s);
    } else {
      t.onService(services.get(keyOf(s)), s);
      services.set(keyOf(s), s);
    }
  }
  for (const s of change.slices ?? []) {
    if (typeof s === 'string') {
      const prev = slices.get(s);
      if (prev) t.onEndpointSlice(prev, true);
      slices.delete(s);
    } else {
      t.onEndpointSlice(s, false);
      slices.set(keyOf(s), s);
    }
  }
  if (change.node) t.onNode(change.node);
  if (forceFull) t.requestFullSync();
  const { desired, change: cs } = t.checkout();
  const r = await proxier!.sync(desired, cs, new AbortController().signal);
  return { full: r.full, servicesChanged: r.servicesChanged, errors: r.errors, batches: r.batches ?? 0 };
}

export async function cleanup(): Promise<void> {
  await proxier!.cleanup();
}

export function warnings(): string[] {
  return logs.records.filter((r) => r.level === 'warn' || r.level === 'error').map((r) => `${r.msg} ${JSON.stringify(r.fields)}`);
}
