// Writes the keys a sync touched, comparing the desired index with the applied mirror, in the
// order that keeps traffic flowing (IPVS and ipset have no transactions):
//   1. bind new VIPs; add/edit virtual servers; then add/restore their real servers
//   2. add set entries
//   3. delete set entries; drain removed real servers (weight 0, graceful.ts)
//   4. delete virtual servers nobody wants; unbind their VIPs
//
// Each step sends its writes pipelined, many per datagram (IpvsClient.applyMany, RouteClient
// add/deleteAddresses, ipset bulk messages): a full sync of 5,000 Services x 10 endpoints was
// 60,000 round trips one at a time. The kernel still handles them one by one, in order, and
// answers each failure on its own, so every object keeps its own error and a failed one does
// not stop the others. A step waits for the answers of the one before, which is what orders
// them: a virtual server exists before its real servers are added, and everything is added
// before anything is removed.
//
// The mirror changes only on a confirmed answer. When a pipelined exchange itself fails (a
// time-out, an abort, lost replies), which writes took effect is unknown: the error ends the
// sync, and the next one is full and reads the kernel back.

import type { Clock } from '../../base/clock.ts';
import type { IPFamily } from '../../base/ip.ts';
import { formatEntry } from '../../netlink/ipset/index.ts';
import type { IpsetClient, IpsetEntry } from '../../netlink/ipset/index.ts';
import { isDestinationNotFound, isIpvsExists, isServiceNotFound } from '../../netlink/ipvs/index.ts';
import type { IpvsClient, IpvsDestinationSpec, IpvsOp, IpvsServiceSpec } from '../../netlink/ipvs/index.ts';
import { isNoSuchAddress, isRouteExists } from '../../netlink/route/index.ts';
import type { RouteClient } from '../../netlink/route/index.ts';
import type { GracefulQueue } from './graceful.ts';
import { DUMMY_DEVICE, SET_INFO, ipsetName } from './names.ts';
import type { SetKey } from './names.ts';
import { destKey } from './plan.ts';
import type { VsPlan } from './plan.ts';
import type { AppliedMirror, AppliedVs, DesiredIndex, Touched } from './state.ts';

/** What the writer needs from the proxier. */
export interface ApplyContext {
  readonly ipvs: IpvsClient;
  readonly ipset: IpsetClient;
  readonly route: RouteClient;
  readonly clock: Clock;
  readonly family: IPFamily;
  /** kube-ipvs0, by index once a full sync has learnt it. */
  readonly link: number | string;
  readonly index: DesiredIndex;
  readonly mirror: AppliedMirror;
  readonly graceful: GracefulQueue;
  /** Runs one kernel call (timed and counted); `requests`: the netlink requests it sends. */
  kernelCall<T>(f: () => Promise<T>, requests?: number): Promise<T>;
  /** Records a failed operation on a named object; the sync goes on and fails at the end. */
  fail(what: string, e: unknown): void;
}

type Signal = { signal: AbortSignal };

export const vsSpec = (want: VsPlan): IpvsServiceSpec => ({
  ...want.addr,
  scheduler: want.scheduler,
  flags: want.flags,
  timeout: want.timeout,
});
const masq = (d: { address: string; port: number }, weight: number): IpvsDestinationSpec => ({
  address: d.address,
  port: d.port,
  weight,
  forward: 'masq',
});

/** Sends IPVS operations pipelined; one result per operation (see IpvsClient.applyMany). */
function ipvsMany(c: ApplyContext, ops: readonly IpvsOp[], o: Signal) {
  return ops.length === 0 ? Promise.resolve([]) : c.kernelCall(() => c.ipvs.applyMany(ops, o), ops.length);
}

export async function applyTouched(c: ApplyContext, t: Touched, o: Signal): Promise<void> {
  // 1. VIPs, virtual servers and real servers that must exist.
  await bindVips(
    c,
    [...t.addrs].filter((a) => c.index.addrs.has(a) && !c.mirror.addrs.has(a)),
    o,
  );
  const failedVss = await ensureVss(c, t.vss, o);
  await ensureDests(c, t.vss, failedVss, o);

  // 2. and 3. Set entries: adds, then deletes (restore-style bulk messages per set).
  const adds = new Map<SetKey, IpsetEntry[]>();
  const dels = new Map<SetKey, IpsetEntry[]>();
  for (const [set, keys] of t.entries) {
    const want = c.index.entries.get(set);
    const have = c.mirror.set(set);
    for (const key of keys) {
      const w = want?.get(key);
      if (w && !have.has(key)) push(adds, set, w);
      else if (!w && have.has(key)) push(dels, set, have.get(key)!);
    }
  }
  await writeEntries(c, adds, 'add', o);
  await writeEntries(c, dels, 'delete', o);

  // 3. Real servers whose endpoint went away.
  await drainDests(c, t.vss, o);

  // 4. Virtual servers nobody wants, then their VIPs.
  await deleteVss(c, t.vss, o);
  await unbindVips(
    c,
    [...t.addrs].filter((a) => !c.index.addrs.has(a) && c.mirror.addrs.has(a)),
    o,
  );
}

async function bindVips(c: ApplyContext, addrs: string[], o: Signal): Promise<void> {
  if (addrs.length === 0) return;
  const res = await c.kernelCall(() => c.route.addAddresses(c.link, addrs, o), addrs.length);
  res.forEach((e, i) => {
    const a = addrs[i]!;
    if (!e || isRouteExists(e)) c.mirror.addrs.add(a);
    else c.fail(`bind ${a} on ${DUMMY_DEVICE}`, e);
  });
}

async function unbindVips(c: ApplyContext, addrs: string[], o: Signal): Promise<void> {
  if (addrs.length === 0) return;
  const res = await c.kernelCall(() => c.route.deleteAddresses(c.link, addrs, o), addrs.length);
  res.forEach((e, i) => {
    const a = addrs[i]!;
    if (!e || isNoSuchAddress(e)) c.mirror.addrs.delete(a);
    else c.fail(`unbind ${a} from ${DUMMY_DEVICE}`, e);
  });
}

/**
 * Adds the wanted virtual servers the mirror lacks and edits those whose settings differ.
 * Returns the keys that failed: their real servers are left for the next (full) sync.
 */
async function ensureVss(c: ApplyContext, keys: Iterable<string>, o: Signal): Promise<Set<string>> {
  const ops: IpvsOp[] = [];
  const of: string[] = [];
  for (const vk of keys) {
    const want = c.index.vss.get(vk);
    if (!want) continue;
    const have = c.mirror.vss.get(vk);
    if (!have) ops.push({ op: 'add-service', service: vsSpec(want) });
    else if (differs(have, want)) ops.push({ op: 'edit-service', service: vsSpec(want) });
    else continue;
    of.push(vk);
  }
  const failed = new Set<string>();
  const adopt: string[] = [];
  (await ipvsMany(c, ops, o)).forEach((e, i) => {
    const vk = of[i]!;
    const want = c.index.vss.get(vk)!;
    if (!e) {
      const have = c.mirror.vss.get(vk);
      if (have) Object.assign(have, { scheduler: want.scheduler, flags: want.flags, timeout: want.timeout });
      else
        c.mirror.vss.set(vk, {
          addr: want.addr,
          scheduler: want.scheduler,
          flags: want.flags,
          timeout: want.timeout,
          dests: new Map(),
        });
    } else if (ops[i]!.op === 'add-service' && isIpvsExists(e)) {
      adopt.push(vk);
    } else {
      c.fail(`ensure ipvs service ${vk}`, e);
      failed.add(vk);
    }
  });
  // Someone made these behind our back (rare): learn their real servers, then set ours.
  for (const vk of adopt) {
    const want = c.index.vss.get(vk)!;
    try {
      const have: AppliedVs = { addr: want.addr, scheduler: '', flags: -1, timeout: -1, dests: new Map() };
      for (const d of await c.kernelCall(() => c.ipvs.listDestinations(want.addr, o)))
        have.dests.set(destKey(d.address, d.port), { address: d.address, port: d.port, weight: d.weight });
      c.mirror.vss.set(vk, have);
      await c.kernelCall(() => c.ipvs.editService(vsSpec(want), o));
      Object.assign(have, { scheduler: want.scheduler, flags: want.flags, timeout: want.timeout });
    } catch (e) {
      c.fail(`ensure ipvs service ${vk}`, e);
      failed.add(vk);
    }
  }
  return failed;
}

const differs = (have: AppliedVs, want: VsPlan): boolean =>
  have.scheduler !== want.scheduler || have.flags !== want.flags || have.timeout !== want.timeout;

/** Adds the wanted real servers the mirror lacks, and gives weight 1 back to those at another weight. */
async function ensureDests(
  c: ApplyContext,
  keys: Iterable<string>,
  skip: ReadonlySet<string>,
  o: Signal,
): Promise<void> {
  const ops: IpvsOp[] = [];
  const of: { vk: string; dk: string; have: AppliedVs }[] = [];
  for (const vk of keys) {
    const want = c.index.vss.get(vk);
    const have = c.mirror.vss.get(vk);
    if (!want || !have || skip.has(vk)) continue;
    for (const [dk, d] of want.dests) {
      const cur = have.dests.get(dk);
      // A draining server whose endpoint is back, or one found at weight 0 after a restart
      // (upstream left those at 0 and the Service went dark: kubernetes issue 108319), gets weight 1.
      if (!cur) ops.push({ op: 'add-destination', service: want.addr, destination: masq(d, 1) });
      else if (cur.weight !== 1) ops.push({ op: 'edit-destination', service: want.addr, destination: masq(d, 1) });
      else {
        c.graceful.delete(vk, dk);
        continue;
      }
      of.push({ vk, dk, have });
    }
  }
  const done = (i: number): void => {
    const { vk, dk, have } = of[i]!;
    const d = (ops[i] as { destination: IpvsDestinationSpec }).destination;
    have.dests.set(dk, { address: d.address, port: d.port, weight: 1 });
    c.graceful.delete(vk, dk);
  };
  // A real server someone else added (EEXIST) is edited to our settings in a second round.
  const retry: number[] = [];
  (await ipvsMany(c, ops, o)).forEach((e, i) => {
    if (!e) done(i);
    else if (ops[i]!.op === 'add-destination' && isIpvsExists(e)) retry.push(i);
    else c.fail(`ensure real server ${of[i]!.dk} of ${of[i]!.vk}`, e);
  });
  const edits: IpvsOp[] = retry.map((i) => ({
    ...(ops[i] as IpvsOp & { op: 'add-destination' }),
    op: 'edit-destination',
  }));
  (await ipvsMany(c, edits, o)).forEach((e, j) => {
    const i = retry[j]!;
    if (!e) done(i);
    else c.fail(`ensure real server ${of[i]!.dk} of ${of[i]!.vk}`, e);
  });
}

async function writeEntries(
  c: ApplyContext,
  bySet: Map<SetKey, IpsetEntry[]>,
  verb: 'add' | 'delete',
  o: Signal,
): Promise<void> {
  for (const [set, entries] of bySet) {
    const name = ipsetName(set, c.family);
    const opts = { exist: true, type: SET_INFO.get(set)!.type, ...o };
    try {
      if (verb === 'add') {
        await c.kernelCall(() => c.ipset.addMany(name, entries, opts));
        for (const e of entries) c.mirror.set(set).set(formatEntry(e), e);
      } else {
        await c.kernelCall(() => c.ipset.delMany(name, entries, opts));
        for (const e of entries) c.mirror.set(set).delete(formatEntry(e));
      }
    } catch (e) {
      c.fail(
        verb === 'add'
          ? `add ${entries.length} entries to ipset ${name}`
          : `delete ${entries.length} entries from ipset ${name}`,
        e,
      );
    }
  }
}

/** Real servers whose endpoint went away: UDP ones go at once, others drain at weight 0. */
async function drainDests(c: ApplyContext, keys: Iterable<string>, o: Signal): Promise<void> {
  const ops: IpvsOp[] = [];
  const of: { vk: string; dk: string; vs: AppliedVs }[] = [];
  for (const vk of keys) {
    const want = c.index.vss.get(vk);
    const vs = c.mirror.vss.get(vk);
    if (!want || !vs) continue;
    for (const [dk, d] of vs.dests) {
      if (want.dests.has(dk)) continue;
      if (vs.addr.protocol === 'udp')
        ops.push({ op: 'delete-destination', service: vs.addr, destination: { address: d.address, port: d.port } });
      else if (c.graceful.has(vk, dk)) continue;
      else if (d.weight !== 0) ops.push({ op: 'edit-destination', service: vs.addr, destination: masq(d, 0) });
      else {
        startDrain(c, vk, vs, dk);
        continue;
      }
      of.push({ vk, dk, vs });
    }
  }
  (await ipvsMany(c, ops, o)).forEach((e, i) => {
    const { vk, dk, vs } = of[i]!;
    // Gone already (by hand, or the whole service): nothing left to drain.
    if (e && (isDestinationNotFound(e) || isServiceNotFound(e))) vs.dests.delete(dk);
    else if (e) c.fail(`drain real server ${dk} of ${vk}`, e);
    else if (ops[i]!.op === 'delete-destination') vs.dests.delete(dk);
    else {
      vs.dests.get(dk)!.weight = 0;
      startDrain(c, vk, vs, dk);
    }
  });
}

function startDrain(c: ApplyContext, vk: string, vs: AppliedVs, dk: string): void {
  const d = vs.dests.get(dk)!;
  c.graceful.add({ vsKey: vk, vs: vs.addr, destKey: dk, address: d.address, port: d.port, since: c.clock.now() });
}

async function deleteVss(c: ApplyContext, keys: Iterable<string>, o: Signal): Promise<void> {
  const ops: IpvsOp[] = [];
  const of: string[] = [];
  for (const vk of keys) {
    const have = c.mirror.vss.get(vk);
    if (!have || c.index.vss.has(vk)) continue;
    ops.push({ op: 'delete-service', service: have.addr });
    of.push(vk);
  }
  (await ipvsMany(c, ops, o)).forEach((e, i) => {
    const vk = of[i]!;
    if (e && !isServiceNotFound(e)) {
      c.fail(`delete ipvs service ${vk}`, e);
      return;
    }
    c.mirror.vss.delete(vk);
    c.graceful.dropVs(vk);
  });
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}
