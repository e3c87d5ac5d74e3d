// Runs inside a throwaway node namespace (netns agent) for the iptables benchmark: the model
// and the iptables proxier against the real kernel, as a daemon would hold them (this process
// holds nothing else, so its RSS is daemon-like). Same workload as the nftables benchmark
// (nftables-workload.ts: N ClusterIP Services × 10 endpoints, one-endpoint changes).
import { performance } from 'node:perf_hooks';
import { FakeClock } from '../../src/base/clock.ts';
import { nullLogger } from '../../src/base/logger.ts';
import type { EndpointSlice, Service } from '../../src/model/k8s.ts';
import { ChangeTracker } from '../../src/model/index.ts';
import { connect, Protocol } from '../../src/netlink/core/index.ts';
import type { SocketOptions } from '../../src/netlink/core/index.ts';
import { NftClient } from '../../src/netlink/nftables/index.ts';
import type { IptRule, IptTable } from '../../src/netlink/nftables/iptables/rule.ts';
import { rulesetToSave } from '../../src/netlink/nftables/iptables/save.ts';
import {
  assembleRuleset,
  globalContext,
  globalRules,
  IptablesProxier,
  iptablesNftCodec,
  IPTABLES_RECV_BYTES,
  servicePortRules,
} from '../../src/proxier/iptables/index.ts';
import { Chain } from '../../src/proxier/iptables/names.ts';
import {
  CLUSTER_CIDR,
  changedService,
  endpointSlice,
  extraIP,
  NODE_NAME,
  SERVICE_CIDR,
  service,
} from './nftables-workload.ts';
import { problemText } from '../../src/proxier/types.ts';

export interface SyncTiming {
  totalMs: number;
  modelMs: number;
  planMs: number;
  kernelMs: number;
  batches: number;
  longestBatchMs: number;
  full: boolean;
  /** CPU of the whole sync, in this process: nf_tables runs a batch in its sender's sendmsg (system time). */
  cpu?: { userMs: number; systemMs: number };
}

let conn: ReturnType<typeof connect> | undefined;
let tracker: ChangeTracker | undefined;
let proxier: IptablesProxier | undefined;
let services: Service[] = [];
let slices: EndpointSlice[] = [];
const extra = new Map<number, string[]>();
let rv = 1;
let n = 0;

function newTracker(): ChangeTracker {
  return new ChangeTracker(
    { nodeName: NODE_NAME, family: 'IPv4', clusterCIDRs: [CLUSTER_CIDR], serviceCIDRs: [SERVICE_CIDR] },
    { logger: nullLogger, clock: new FakeClock() },
  );
}

/** `sock`: socket options to compare (buffer sizes, forceBuffers); the daemon's by default. */
export function start(size: number, sock: SocketOptions = {}): void {
  conn?.close();
  conn = connect(Protocol.NETFILTER, { timeoutMs: 600_000, recvMessageBytes: IPTABLES_RECV_BYTES, ...sock });
  const tables: IptTable[] = ['nat', 'filter', 'mangle'];
  const clients = new Map(tables.map((table) => [table, new NftClient({ family: 'ip', table, transport: conn! })]));
  proxier = new IptablesProxier({
    family: 'IPv4',
    clients,
    sender: clients.get('nat')!,
    codec: iptablesNftCodec('IPv4'),
    logger: nullLogger,
    maxBatchBytes: conn.maxBatchBytes,
  });
  tracker = newTracker();
  n = size;
  services = Array.from({ length: n }, (_, i) => service(i));
  slices = Array.from({ length: n }, (_, i) => endpointSlice(i, [], 1));
  extra.clear();
  rv = 1;
}

export async function fullSync(): Promise<SyncTiming> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    tracker!.onService(undefined, services[i]!);
    tracker!.onEndpointSlice(slices[i]!, false);
  }
  const { desired, change } = tracker!.checkout();
  const t1 = performance.now();
  const r = await proxier!.sync(desired, change, new AbortController().signal);
  if (r.errors.length) throw new Error(r.errors.map(problemText).join('; '));
  const cpu = process.cpuUsage(cpu0);
  return {
    totalMs: performance.now() - t0,
    modelMs: t1 - t0,
    planMs: r.planMs,
    kernelMs: r.kernelMs,
    batches: r.batches ?? 0,
    longestBatchMs: r.longestBatchMs ?? 0,
    full: r.full,
    cpu: { userMs: cpu.user / 1000, systemMs: cpu.system / 1000 },
  };
}

/** A full sync with nothing changed (the periodic resync): reads the kernel, writes nothing. */
export async function resync(): Promise<SyncTiming> {
  tracker!.requestFullSync();
  const t0 = performance.now();
  const { desired, change } = tracker!.checkout();
  const r = await proxier!.sync(desired, change, new AbortController().signal);
  return {
    totalMs: performance.now() - t0,
    modelMs: 0,
    planMs: r.planMs,
    kernelMs: r.kernelMs,
    batches: r.batches ?? 0,
    longestBatchMs: r.longestBatchMs ?? 0,
    full: r.full,
  };
}

export async function change(r: number): Promise<SyncTiming> {
  const i = changedService(r, n);
  const added = [...(extra.get(i) ?? []), extraIP(r)];
  extra.set(i, added);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  tracker!.onEndpointSlice(endpointSlice(i, added, ++rv), false);
  const { desired, change: cs } = tracker!.checkout();
  const t1 = performance.now();
  const rep = await proxier!.sync(desired, cs, new AbortController().signal);
  if (rep.full) throw new Error('a one-endpoint change ran a full sync');
  const cpu = process.cpuUsage(cpu0);
  return {
    totalMs: performance.now() - t0,
    modelMs: t1 - t0,
    planMs: rep.planMs,
    kernelMs: rep.kernelMs,
    batches: rep.batches ?? 0,
    longestBatchMs: rep.longestBatchMs ?? 0,
    full: false,
    cpu: { userMs: cpu.user / 1000, systemMs: cpu.system / 1000 },
  };
}

export async function stop(): Promise<void> {
  await proxier?.cleanup();
  conn?.close();
  conn = undefined;
}

export function memory(): { rssBytes: number; maxRssBytes: number } {
  return { rssBytes: process.memoryUsage().rss, maxRssBytes: process.resourceUsage().maxRSS * 1024 };
}

/**
 * The same cluster's ruleset as iptables-save text (save.ts, the generator's rules): what
 * upstream feeds iptables-restore at a full sync; and for the r-th one-endpoint change, what
 * its partial sync feeds `iptables-restore --noflush` (KUBE-SERVICES rewritten whole, the
 * changed Service's chain and its new endpoint chain).
 */
export function restoreTexts(size: number, changes: number): { full: string; changes: string[] } {
  const tr = newTracker();
  const objs = Array.from({ length: size }, (_, i) => [service(i), endpointSlice(i, [], 1)] as const);
  for (const [s, sl] of objs) {
    tr.onService(undefined, s);
    tr.onEndpointSlice(sl, false);
  }
  const render = (): ReturnType<typeof assembleRuleset> => {
    const { desired } = tr.checkout();
    const g = globalContext(desired, []);
    return assembleRuleset(
      globalRules(g),
      [...desired.services].map(([id, info]) => servicePortRules(info, desired.selections.get(id), g)),
    );
  };
  const full = rulesetToSave(render());
  const out: string[] = [];
  const added = new Map<number, string[]>();
  for (let r = 0; r < changes; r++) {
    const i = changedService(r, size);
    const list = [...(added.get(i) ?? []), extraIP(r)];
    added.set(i, list);
    tr.onEndpointSlice(endpointSlice(i, list, 2 + r), false);
    const rs = render();
    const nat = rs.tables.find((t) => t.table === 'nat')!;
    const services = nat.chains.find((c) => c.name === Chain.SERVICES)!;
    const ns = `ns${i % 100}/svc${i}`;
    const svcChain = nat.chains.find(
      (c) =>
        c.name.startsWith('KUBE-SVC-') &&
        c.rules.some((x) => x.matches.some((m) => m.m === 'comment' && m.text.startsWith(ns + ':'))),
    )!;
    const targets = new Set(svcChain.rules.map((x) => (x.target.t === 'jump' ? x.target.chain : '')));
    const seps = nat.chains.filter((c) => targets.has(c.name) && c.name.startsWith('KUBE-SEP-'));
    const part = { family: rs.family, tables: [{ table: 'nat' as const, chains: [services, svcChain, ...seps] }] };
    out.push(rulesetToSave(part));
  }
  return { full, changes: out };
}

/**
 * For iptables-heap.ts: after a full GC (the agent runs with --expose-gc), the process's RSS
 * and V8's heap, so that dropping one part (drop()) and measuring again gives what it retains.
 */
export function heapAfterGc(): { rss: number; heapUsed: number; heapTotal: number; external: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external };
}

/** Lets one part go (its retained memory is then the drop in heapAfterGc()). */
export function drop(part: 'inputs' | 'tracker' | 'proxier'): void {
  if (part === 'inputs') [services, slices] = [[], []];
  else if (part === 'tracker') tracker = undefined;
  else proxier = undefined;
}

export async function writeSnapshot(dir: string): Promise<string> {
  const { writeHeapSnapshot } = await import('node:v8');
  return writeHeapSnapshot(`${dir}/agent.heapsnapshot`);
}

export async function smaps(): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  return readFile('/proc/self/smaps', 'utf8');
}

export interface CommitProbe {
  kind: 'address match' | 'counter only' | 'ACCEPT' | 'jump' | 'DNAT';
  wallMs: number[];
  systemMs: number[];
}

/**
 * What one nf_tables commit costs the kernel with the agent's ruleset loaded (or none): one
 * batch adding one rule to a scratch chain no rule jumps to, `reps` times per kind of rule —
 * an address match only, `-p tcp` counting only (no verdict), ACCEPT, jumping to
 * KUBE-MARK-MASQ (when present; else to a second scratch chain), and a DNAT target (as
 * iptables-nft sends it). System CPU of this process is the kernel's work: nf_tables runs the
 * batch in the sender's sendmsg.
 */
export async function commitProbe(reps: number): Promise<CommitProbe[]> {
  const c = conn ?? connect(Protocol.NETFILTER, { timeoutMs: 600_000, recvMessageBytes: IPTABLES_RECV_BYTES });
  const nat = new NftClient({ family: 'ip', table: 'nat', transport: c });
  const codec = iptablesNftCodec('IPv4');
  const run = async (f: (tx: ReturnType<NftClient['newTransaction']>) => void): Promise<void> => {
    const tx = nat.newTransaction();
    f(tx);
    if (tx.error) throw tx.error;
    await nat.runMessages(nat.encode(tx));
  };
  const probe = 'KUBE-PROBE-COMMIT';
  const other = 'KUBE-PROBE-TARGET';
  const chains = new Set((await nat.listChains().catch(() => [])).map((x) => x.name));
  const jumpTo = chains.has(Chain.MARK_MASQ) ? Chain.MARK_MASQ : other;
  await run((tx) => {
    tx.add({ kind: 'table' });
    tx.add({ kind: 'chain', name: probe });
    tx.add({ kind: 'chain', name: other });
  });
  const tcp: IptRule['matches'] = [{ m: 'proto', proto: 'tcp' }];
  const rule = (target: IptRule['target'], matches = tcp): IptRule => ({
    table: 'nat',
    chain: probe,
    matches,
    target,
  });
  const kinds: [CommitProbe['kind'], IptRule][] = [
    // Payload, compare and counter only: no expression the kernel validates (the others
    // have one: -p is a meta expression, a verdict an immediate one, DNAT an xt target).
    ['address match', rule({ t: 'none' }, [{ m: 'dst', cidr: '10.9.9.9' }])],
    ['counter only', rule({ t: 'none' })],
    ['ACCEPT', rule({ t: 'ACCEPT' })],
    ['jump', rule({ t: 'jump', chain: jumpTo })],
    ['DNAT', rule({ t: 'DNAT', addr: '10.1.2.3', port: 80 })],
  ];
  const out: CommitProbe[] = [];
  try {
    for (const [kind, r] of kinds) {
      const p: CommitProbe = { kind, wallMs: [], systemMs: [] };
      const nft = codec.encode(r);
      for (let i = 0; i < reps; i++) {
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await run((tx) => tx.add(nft));
        p.wallMs.push(performance.now() - t0);
        p.systemMs.push(process.cpuUsage(cpu0).system / 1000);
      }
      out.push(p);
      await run((tx) => tx.flush({ kind: 'chain', name: probe }));
    }
  } finally {
    await run((tx) => {
      tx.flush({ kind: 'chain', name: probe });
      tx.delete({ kind: 'chain', name: probe });
      tx.delete({ kind: 'chain', name: other });
    });
    if (c !== conn) c.close();
  }
  return out;
}

export function pid(): number {
  return process.pid;
}
