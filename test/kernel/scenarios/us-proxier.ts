// Runs inside the node namespace (netns agent): the model and the userspace proxier against the
// real kernel, its proxy sockets (the real data path) in this namespace, driven by Kubernetes objects the test passes.
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { systemClock } from '../../../src/base/clock.ts';
import type { IPFamily } from '../../../src/base/ip.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../src/netlink/nftables/iptables/rule.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import { openConntrack } from '../../../src/netlink/conntrack/index.ts';
import { UserspaceProxier } from '../../../src/proxier/userspace/proxier.ts';
import { createProxyPorts } from '../../../src/proxier/userspace/proxy/index.ts';
import type { ProxyPorts } from '../../../src/proxier/userspace/proxy/index.ts';
import { iptablesNftCodec } from '../../../src/proxier/iptables-nft/index.ts';
import type { ModelOptions, SyncReportLike } from './nft-proxier-types.ts';
import { ObjectFeed } from './object-feed.ts';
import type { ObjectChange } from './object-feed.ts';
import { problemText } from '../../../src/proxier/types.ts';

let tracker: ChangeTracker | undefined;
let proxier: UserspaceProxier | undefined;
let ports: ProxyPorts | undefined;
let conn: ReturnType<typeof connect> | undefined;
let ct: ReturnType<typeof openConntrack> | undefined;
const objects = new ObjectFeed();
const logs = memoryLogger();

export interface StartOptions extends Partial<ModelOptions> {
  listenIP?: string;
  portRange?: { first: number; last: number };
}

/** A fresh tracker, sockets and proxier (as a restarted daemon has), over the same kernel. */
export async function start(opts: StartOptions = {}): Promise<void> {
  proxier?.close();
  await ports?.close();
  conn?.close();
  conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  ct?.conn.close();
  ct = openConntrack({ timeoutMs: 10_000 });
  const { listenIP, portRange, ...model } = opts;
  const family: IPFamily = model.family ?? 'IPv4';
  tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4', ...model }, { logger: logs, clock: systemClock });
  const tables: IptTable[] = ['nat', 'filter'];
  const nftFamily = family === 'IPv6' ? 'ip6' : 'ip';
  const clients = new Map(
    tables.map((table) => [table, new NftClient({ family: nftFamily, table, transport: conn! })]),
  );
  const listen = listenIP ?? (family === 'IPv6' ? '::' : '0.0.0.0');
  ports = createProxyPorts({
    family,
    listenIP: listen,
    udpIdleTimeoutMs: 250,
    logger: logs,
    ...(portRange ? { portRange } : {}),
  });
  proxier = new UserspaceProxier({
    family,
    ports,
    listenIP: listen,
    clients,
    sender: clients.get('nat')!,
    codec: iptablesNftCodec(family),
    logger: logs,
    maxBatchBytes: conn.maxBatchBytes,
    conntrack: ct.client,
  });
  objects.clear();
}

let chain: Promise<unknown> = Promise.resolve();

/** Applies objects (a null value deletes by key) and syncs; returns the sync report. Serialised. */
export function apply(change: ObjectChange): Promise<SyncReportLike> {
  const run = async (): Promise<SyncReportLike> => {
    objects.feed(tracker!, change);
    const { desired, change: cs } = tracker!.checkout();
    const r = await proxier!.sync(desired, cs, new AbortController().signal);
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

/** explain's answer for one service port, by "ns/name" and port name. */
export async function describe(service: string, portName: string): Promise<unknown> {
  const { desired } = tracker!.checkout();
  const info = [...desired.services.values()].find(
    (s) => `${s.namespace}/${s.name}` === service && s.portName === portName,
  );
  if (!info) throw new Error(`no service port ${service}:${portName}`);
  return proxier!.describe(info);
}

export async function cleanup(): Promise<void> {
  await proxier!.cleanup();
}

export async function stop(): Promise<void> {
  proxier?.close();
  await ports?.close();
  conn?.close();
}

/** The proxy sockets' live TCP connections (a benchmark waits for its idle connections to land). */
export function activeConnections(): number {
  return ports!.stats().activeConnections;
}

export function warnings(): string[] {
  return logs.records
    .filter((r) => r.level === 'warn' || r.level === 'error')
    .map((r) => `${r.msg} ${JSON.stringify(r.fields)}`);
}

/** Listens on a TCP port of the node as another program would; the error code when it cannot. */
export async function listenElsewhere(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? String(e)));
    s.listen({ port, host: '0.0.0.0', exclusive: true }, () => {
      others.push(s);
      resolve('listening');
    });
  });
}

const others: Server[] = [];

/** Closes what listenElsewhere opened. */
export function closeElsewhere(): void {
  for (const s of others.splice(0)) s.close();
}
