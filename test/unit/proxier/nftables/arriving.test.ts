// Changes that arrive while a full sync runs are applied between its batches (ArrivingChanges),
// not after it: a port the sync has written, one it has not reached, one deleted before it was
// reached, a new one. Where packets end (traced through FakeNft) says the table is right after
// the full sync, and after a partial sync that starts from the mirror it leaves.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import type { ElementPagesOptions, NftElement, NftInterface } from '../../../../src/netlink/nftables/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import type { ArrivingChanges } from '../../../../src/proxier/types.ts';
import type { ChangeSet } from '../../../../src/model/index.ts';
import { NftTracer } from '../../../helpers/nft-tracer.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;
const N = 300;
const ipOf = (i: number): string => `10.96.${i >> 8}.${i & 255}`;

const reach = (nft: FakeNft, vip: string): string[] => {
  const r = new NftTracer(nft, { localAddresses: ['192.168.1.10'] }).trace({
    protocol: 'tcp',
    saddr: '10.244.200.1',
    daddr: vip,
    dport: 80,
  });
  return r.verdict === 'accept' ? r.endpoints : [r.verdict];
};

/** N Services of one endpoint each (s<i> at ipOf(i) -> 10.244.x.(i+1)), programmed by a first (full) sync. */
async function programmed(tracker: ReturnType<typeof newTracker>['t'], proxier: NftablesProxier): Promise<void> {
  for (let i = 0; i < N; i++) {
    tracker.onService(undefined, svc(`s${i}`, { clusterIP: ipOf(i) }));
    tracker.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.244.${i >> 8}.${(i & 255) + 1}`)]), false);
  }
  const cold = tracker.checkout();
  await proxier.sync(cold.desired, cold.change, signal);
}

/** A full sync from the mirror as it is: its errors and the elements it wrote (0: nothing left to repair). */
async function repairWrites(
  tracker: ReturnType<typeof newTracker>['t'],
  nft: FakeNft,
  proxier: NftablesProxier,
): Promise<{ errors: unknown[]; elements: number }> {
  tracker.requestFullSync();
  const again = tracker.checkout();
  let elements = 0;
  const run = nft.run;
  // The node-dependent sets are refilled by every full sync (flushed with the skeleton).
  const fixed = new Set(['nodeport-ips', 'pod-cidrs', 'service-cidrs']);
  nft.run = (tx, sig) => {
    elements += tx.operations.filter((o) => o.obj.kind === 'element' && !fixed.has(o.obj.set)).length;
    return run.call(nft, tx, sig);
  };
  try {
    return { errors: (await proxier.sync(again.desired, again.change, signal)).errors, elements };
  } finally {
    nft.run = run;
  }
}

const WHEN = ['while it reads the kernel', 'while it reads, refused for drift', 'between its batches'] as const;
for (const when of WHEN)
  test(`changes arriving during a full sync are applied ${when}, and the mirror stays right`, async (t) => {
    const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
    const nft = new FakeNft({ family: 'ip', table: TABLE });
    // Small batches: a full sync of 300 ports takes several.
    const proxier = new NftablesProxier({ nft, logger: memoryLogger(), maxBatchBytes: 8192 });
    const eps = (i: number, a = `10.244.${i >> 8}.${(i & 255) + 1}`) => slice(`s${i}-1`, `s${i}`, [ep(a)]);
    for (let i = 0; i < N; i++) {
      tracker.onService(undefined, svc(`s${i}`, { clusterIP: ipOf(i) }));
      tracker.onEndpointSlice(eps(i), false);
    }
    const cold = tracker.checkout();
    await proxier.sync(cold.desired, cold.change, signal);

    // Drift nobody announced. Between batches: every port's service-ips element to write (many
    // batches). While reading: one port's (the changes arriving apply as they are), or every
    // port's (the change deleting a port is refused: its element is gone; the sync writes it).
    const drift = nft.newTransaction();
    if (when === 'while it reads the kernel') {
      const e = (await nft.listElements('service-ips')).find((x) => x.key[0] === ipOf(N - 10))!;
      drift.delete({ kind: 'element', set: e.set, key: e.key });
    } else drift.flush((await nft.listSets()).find((x) => x.name === 'service-ips')!);
    await nft.run(drift, signal);
    t.deepEqual(reach(nft, ipOf(N - 10)), ['reject'], 'the drift took effect');

    const events: string[] = [];
    let writes = 0;
    const run = nft.run.bind(nft);
    nft.run = (tx, sig) => {
      writes++;
      return run(tx, sig);
    };
    // Reading: at once. Writing: once the skeleton and a batch of ports are in.
    // Reading: once the maps the changes touch have been read (what was read must be corrected).
    const listed = new Set<string>();
    const list = nft.listElementPages.bind(nft);
    nft.listElementPages = (set) => {
      listed.add(set);
      return list(set);
    };
    const due = (): boolean =>
      when === 'between its batches'
        ? writes >= 2
        : writes === 0 && listed.has('service-ips') && listed.has('endpoints-1') && listed.has('cluster-ips');
    let arrived = false;
    let atApplied: string[][] = [];
    const arrive = (): void => {
      tracker.onEndpointSlice(eps(0, '10.244.100.1'), false); // written already
      tracker.onEndpointSlice(eps(N - 1, '10.244.100.2'), false); // not reached yet
      tracker.onService(svc(`s${N - 2}`, { clusterIP: ipOf(N - 2) }), undefined); // deleted before reached
      tracker.onEndpointSlice(eps(N - 2), true);
      tracker.onService(undefined, svc('s100', { clusterIP: '10.96.1.100' })); // new
      tracker.onEndpointSlice(eps(100, '10.244.100.3'), false);
    };
    const arriving: ArrivingChanges = {
      waiting: () => {
        if (!arrived && due()) {
          arrived = true;
          arrive();
        }
        return tracker.syncNeeded && !tracker.fullPending;
      },
      take: () => {
        if (!tracker.syncNeeded || tracker.fullPending) return undefined;
        const { change } = tracker.checkout();
        events.push(`taken after ${writes > 0 ? 'writing began' : 'reading began'}: ${change.services.size} ports`);
        return change;
      },
      applied: (c: ChangeSet) => {
        events.push(`applied ${c.services.size}`);
        // In the kernel now, while most ports are still to be written.
        atApplied = [ipOf(0), ipOf(N - 1), ipOf(N - 2), '10.96.1.100', ipOf(N - 10)].map((ip) => reach(nft, ip));
      },
    };
    tracker.requestFullSync();
    const hourly = tracker.checkout();
    const r = await proxier.sync(hourly.desired, hourly.change, signal, arriving);
    events.push('full sync done');
    t.true(r.full);
    t.deepEqual(r.errors, []);
    if (when === 'between its batches') t.true(r.batches! > 3, `several batches (${r.batches})`);
    t.deepEqual(events, [
      `taken after ${when === 'between its batches' ? 'writing' : 'reading'} began: 4 ports`,
      'applied 4',
      'full sync done',
    ]);
    t.deepEqual(atApplied, [
      ['10.244.100.1:8080'],
      ['10.244.100.2:8080'],
      ['drop'],
      ['10.244.100.3:8080'],
      when === 'while it reads, refused for drift' ? ['10.244.1.35:8080'] : ['reject'], // not reached yet, unless the change waited for the whole sync
    ]);

    t.deepEqual(reach(nft, ipOf(0)), ['10.244.100.1:8080']);
    t.deepEqual(reach(nft, ipOf(N - 1)), ['10.244.100.2:8080']);
    t.deepEqual(reach(nft, ipOf(N - 2)), ['drop'], 'deleted: an unallocated cluster IP now');
    t.deepEqual(reach(nft, '10.96.1.100'), ['10.244.100.3:8080']);
    t.deepEqual(reach(nft, ipOf(30)), ['10.244.0.31:8080'], 'untouched');

    // A partial sync from the mirror the full sync left.
    tracker.onEndpointSlice(eps(0, '10.244.100.9'), false);
    tracker.onService(svc('s100', { clusterIP: '10.96.1.100' }), undefined);
    tracker.onEndpointSlice(eps(100, '10.244.100.3'), true);
    tracker.onEndpointSlice(eps(N - 1, '10.244.100.8'), false);
    const next = tracker.checkout();
    const p = await proxier.sync(next.desired, next.change, signal);
    t.false(p.full);
    t.deepEqual(p.errors, []);
    t.deepEqual(reach(nft, ipOf(0)), ['10.244.100.9:8080']);
    t.deepEqual(reach(nft, ipOf(N - 1)), ['10.244.100.8:8080']);
    t.deepEqual(reach(nft, '10.96.1.100'), ['drop']);

    // And a full sync from scratch finds nothing left to repair: same answers.
    tracker.requestFullSync();
    const again = tracker.checkout();
    t.deepEqual((await proxier.sync(again.desired, again.change, signal)).errors, []);
    t.deepEqual(reach(nft, ipOf(0)), ['10.244.100.9:8080']);
    t.deepEqual(reach(nft, ipOf(N - 2)), ['drop']);
  });

test('a full sync that finds nothing to write still lets changes in every slice of planning', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  let clock = 0;
  // Every reading of the clock is 60 ms later: planning 64 ports "takes" over 50 ms.
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), now: () => (clock += 60) });
  await programmed(tracker, proxier);
  const events: string[] = [];
  let asked = 0;
  const arriving: ArrivingChanges = {
    waiting: () => {
      if (++asked === 1) tracker.onEndpointSlice(slice(`s${N - 1}-1`, `s${N - 1}`, [ep('10.244.100.7')]), false);
      return tracker.syncNeeded;
    },
    take: () => (tracker.syncNeeded ? tracker.checkout().change : undefined),
    applied: () => events.push(`applied: ${reach(nft, ipOf(N - 1)).join()}`),
  };
  tracker.requestFullSync();
  const hourly = tracker.checkout();
  const r = await proxier.sync(hourly.desired, hourly.change, signal, arriving);
  events.push('done');
  t.true(r.full);
  t.deepEqual(events, ['applied: 10.244.100.7:8080', 'done']);
  t.true(asked >= 1);
});

test('a change arriving while a large map is decoded is applied between its pages, not after the map', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  let clock = 0;
  // Every reading of the clock is 60 ms later: each page "takes" longer than a slice.
  const proxier = new NftablesProxier({ nft, logger: memoryLogger(), now: () => (clock += 60) });
  await programmed(tracker, proxier);
  let writes = 0;
  const run = nft.run.bind(nft);
  nft.run = (tx, sig) => {
    writes++;
    return run(tx, sig);
  };
  // Pages of service-ips (300 elements, several pages) decoded so far.
  let decoded = 0;
  let pages = 0;
  const list = nft.listElementPages.bind(nft);
  nft.listElementPages = async (set) => {
    const ps = await list(set);
    if (set !== 'service-ips') return ps;
    pages = ps.length;
    return ps.map((p) => () => (decoded++, p()));
  };
  const events: string[] = [];
  const arriving: ArrivingChanges = {
    waiting: () => {
      if (decoded === 1 && !tracker.syncNeeded)
        tracker.onEndpointSlice(slice(`s${N - 1}-1`, `s${N - 1}`, [ep('10.244.100.7')]), false);
      return tracker.syncNeeded && !tracker.fullPending;
    },
    take: () => (tracker.syncNeeded && !tracker.fullPending ? tracker.checkout().change : undefined),
    applied: () =>
      events.push(
        `applied after ${decoded} of ${pages} pages, ${writes} writes: ${reach(nft, ipOf(N - 1)).join()} ${reach(nft, ipOf(N - 2)).join()}`,
      ),
  };
  tracker.requestFullSync();
  const hourly = tracker.checkout();
  const r = await proxier.sync(hourly.desired, hourly.change, signal, arriving);
  events.push('done');
  t.true(r.full);
  t.deepEqual(r.errors, []);
  t.true(pages > 2, `service-ips read in ${pages} pages`);
  t.deepEqual(events, [`applied after 1 of ${pages} pages, 1 writes: 10.244.100.7:8080 10.244.1.43:8080`, 'done']);
  // What was read before the change is corrected: the full sync leaves the new endpoint.
  t.deepEqual(reach(nft, ipOf(N - 1)), ['10.244.100.7:8080']);
  t.deepEqual(reach(nft, ipOf(N - 2)), ['10.244.1.43:8080']);
  const repair = await repairWrites(tracker, nft, proxier);
  t.deepEqual(repair.errors, []);
  t.is(repair.elements, 0, 'nothing left to repair');
});

/** `nft` seen through another socket: every read and write delegated, the dumps of elements through `pages`. */
function readerOf(
  nft: FakeNft,
  pages: (set: string, opts: ElementPagesOptions | undefined) => Promise<(() => NftElement[])[]>,
): NftInterface {
  return {
    scope: nft.scope,
    newTransaction: () => nft.newTransaction(),
    run: (tx, sig) => nft.run(tx, sig),
    list: (kind) => nft.list(kind),
    listChains: () => nft.listChains(),
    listSets: () => nft.listSets(),
    listElements: (set) => nft.listElements(set),
    listRules: (chain) => nft.listRules(chain),
    listElementPages: pages,
  };
}

test('a change arriving while the kernel dumps a map on the reader socket is applied before the dump ends', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const events: string[] = [];
  let applied: () => void = () => {};
  const appliedOnce = new Promise<void>((resolve) => (applied = resolve));
  let dumping = false;
  // The dump of service-ips is a snapshot taken as it starts and ends once a change has been
  // applied (or after 3 s, when the proxier waited for it): the kernel says it was interrupted.
  const reader = readerOf(nft, async (set, opts) => {
    const pages = await nft.listElementPages(set);
    if (set !== 'service-ips' || !opts?.onInterrupted) return pages;
    dumping = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([appliedOnce, new Promise<void>((resolve) => (timer = setTimeout(resolve, 3000)))]);
    clearTimeout(timer);
    dumping = false;
    events.push('dump ended');
    opts.onInterrupted();
    return pages;
  });
  const log = memoryLogger();
  const proxier = new NftablesProxier({ nft, reader, logger: log });
  await programmed(tracker, proxier);
  const arriving: ArrivingChanges = {
    waiting: () => {
      if (dumping && !tracker.syncNeeded) {
        // Moves one Service's endpoint and deletes another: elements of the map being dumped.
        tracker.onEndpointSlice(slice(`s${N - 1}-1`, `s${N - 1}`, [ep('10.244.100.7')]), false);
        tracker.onService(svc(`s${N - 2}`, { clusterIP: ipOf(N - 2) }), undefined);
      }
      return tracker.syncNeeded && !tracker.fullPending;
    },
    take: () => (tracker.syncNeeded && !tracker.fullPending ? tracker.checkout().change : undefined),
    applied: () => {
      events.push(`applied: ${reach(nft, ipOf(N - 1)).join()} ${reach(nft, ipOf(N - 2)).join()}`);
      applied();
    },
  };
  tracker.requestFullSync();
  const hourly = tracker.checkout();
  const r = await proxier.sync(hourly.desired, hourly.change, signal, arriving);
  events.push('done');
  t.true(r.full);
  t.deepEqual(r.errors, []);
  t.deepEqual(events, ['applied: 10.244.100.7:8080 drop', 'dump ended', 'done']);
  t.is(
    log.records.find((l) => l.msg === 'full sync' && l.fields['dumpsInterrupted'] !== undefined)?.fields[
      'dumpsInterrupted'
    ],
    1,
  );
  // What the dump read before the change is corrected by replaying it: nothing left to repair.
  t.deepEqual(reach(nft, ipOf(N - 1)), ['10.244.100.7:8080']);
  t.deepEqual(reach(nft, ipOf(N - 2)), ['drop']);
  const repair = await repairWrites(tracker, nft, proxier);
  t.deepEqual(repair.errors, []);
  t.is(repair.elements, 0, 'nothing left to repair');
});

test('an element an interrupted dump missed is written again, and the kernel takes it as it is', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  // Elements shifted by a change while the kernel walked the set: one never listed.
  const reader = readerOf(nft, async (set, opts) => {
    const pages = await nft.listElementPages(set);
    if (set !== 'service-ips' || !opts?.onInterrupted) return pages;
    opts.onInterrupted();
    return pages.map((p) => () => p().filter((e) => e.key[0] !== ipOf(7)));
  });
  const proxier = new NftablesProxier({ nft, reader, logger: memoryLogger() });
  await programmed(tracker, proxier);
  const written: string[] = [];
  const run = nft.run.bind(nft);
  nft.run = (tx, sig) => {
    for (const o of tx.operations)
      if (o.obj.kind === 'element' && o.obj.set === 'service-ips') written.push(`${o.verb} ${o.obj.key.join()}`);
    return run(tx, sig);
  };
  tracker.requestFullSync();
  const hourly = tracker.checkout();
  const r = await proxier.sync(hourly.desired, hourly.change, signal);
  t.deepEqual(r.errors, []);
  t.deepEqual(
    written.filter((w) => w.includes(ipOf(7))),
    [`add ${ipOf(7)},tcp,80`],
  );
  t.deepEqual(reach(nft, ipOf(7)), ['10.244.0.8:8080']);
});

test('an add refused because the read missed a drifted element is no refusal: the kernel is read again', async (t) => {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  let reads = 0;
  // The first read of endpoints-1 misses ipOf(7)'s endpoint (shifted by changes going in).
  const reader = readerOf(nft, async (set, opts) => {
    const pages = await nft.listElementPages(set);
    if (set !== 'endpoints-1' || ++reads > 1) return pages;
    opts?.onInterrupted?.();
    return pages.map((p) => () => p().filter((e) => e.key[0] !== ipOf(7)));
  });
  const log = memoryLogger();
  const proxier = new NftablesProxier({ nft, reader, logger: log });
  await programmed(tracker, proxier);
  reads = 0;
  // Drift at that very element: ipOf(7) leads to s8's endpoint.
  const elements = await nft.listElements('endpoints-1');
  const seven = elements.find((e) => e.key[0] === ipOf(7))!;
  const eight = elements.find((e) => e.key[0] === ipOf(8))!;
  const drift = nft.newTransaction();
  drift.delete({ kind: 'element', set: seven.set, key: seven.key });
  drift.add({ ...seven, value: eight.value! });
  await nft.run(drift, signal);
  t.deepEqual(reach(nft, ipOf(7)), ['10.244.0.9:8080'], 'the drift took effect');

  tracker.requestFullSync();
  const hourly = tracker.checkout();
  const r = await proxier.sync(hourly.desired, hourly.change, signal);
  t.deepEqual(r.errors, [], 'no port set aside');
  t.is(reads, 2, 'read again');
  t.true(log.records.some((l) => l.msg === 'service port refused as existing; reading the kernel again'));
  t.deepEqual(reach(nft, ipOf(7)), ['10.244.0.8:8080'], 'repaired');
});
