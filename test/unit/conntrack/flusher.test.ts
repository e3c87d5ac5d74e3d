// ConntrackFlusher against an in-memory table: background runs, coalescing, batches, the
// time bound, retries of failed targets, reconcile, and what it reports.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { ConntrackFlusher } from '../../../src/conntrack/index.ts';
import type { FlushRunReport } from '../../../src/conntrack/index.ts';
import type { DesiredState, ServicePortId, StaleTarget } from '../../../src/model/index.ts';
import { IPPROTO } from '../../../src/netlink/conntrack/index.ts';
import { ep, newTracker, slice, svc } from '../model/helpers.ts';
import { FakeConntrack, FlushingConntrack, flow } from './fake-client.ts';

const VIP = '10.96.0.10';
const DEAD = '10.244.9.9';
const LIVE = '10.244.1.5';
const svcId = 'default/dns:p/UDP' as ServicePortId;
const base = { service: svcId, family: 'IPv4', protocol: 'UDP', serviceIPs: [VIP], port: 53, nodePort: 0 } as const;
const removed = (ip: string): StaleTarget => ({
  ...base,
  reason: 'endpoint-removed',
  endpointIP: ip,
  endpointPort: 8080,
});

function desired(endpoints: string[]): DesiredState {
  const { t } = newTracker();
  t.onService(undefined, svc('dns', { clusterIP: VIP, ports: [{ name: 'p', protocol: 'UDP', port: 53 }] }));
  t.onEndpointSlice(
    slice(
      'dns-1',
      'dns',
      endpoints.map((ip) => ep(ip)),
      { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] },
    ),
    false,
  );
  return t.checkout().desired;
}

function setup(
  table: FakeConntrack,
  o: {
    timeoutMs?: number;
    batchSize?: number;
    maxAttempts?: number;
    maxKernelFlushes?: number;
    kernelFlush?: boolean;
  } = {},
) {
  const reports: FlushRunReport[] = [];
  const logs = memoryLogger();
  const clock = new FakeClock();
  const flusher = new ConntrackFlusher({ client: table, logger: logs, counters: (r) => reports.push(r), clock, ...o });
  return { flusher, reports, logs, clock };
}

const toDead = (sport: number) => flow({ dst: VIP, dport: 53, replySrc: DEAD, sport });

test('schedule returns at once; the stale entries go in the background, unrelated ones stay', async (t) => {
  const stale = toDead(40000);
  const healthy = flow({ dst: VIP, dport: 53, replySrc: LIVE, sport: 40001 });
  const tcp = flow({ dst: VIP, dport: 53, replySrc: DEAD, sport: 40002, proto: IPPROTO.TCP });
  const other = flow({ dst: '10.96.0.11', dport: 53, replySrc: DEAD, sport: 40003 });
  const table = new FakeConntrack([stale, healthy, tcp, other]);
  const { flusher, reports } = setup(table);
  flusher.schedule([removed(DEAD)], desired([LIVE]));
  t.is(table.dumps.length, 0, 'nothing ran on the caller stack');
  await flusher.idle();
  t.false(table.has(stale));
  t.true(table.has(healthy) && table.has(tcp) && table.has(other));
  t.like(reports[0], { mode: 'flush', targets: 1, matched: 1, deleted: 1, errors: 0, timedOut: false, retained: 0 });
  t.is(flusher.backlog, 0);
});

test('targets arriving while a run is in flight coalesce into one next run', async (t) => {
  const table = new FakeConntrack([
    toDead(40000),
    flow({ dst: VIP, dport: 53, replySrc: '10.244.9.10', sport: 40001 }),
  ]);
  const { flusher, reports } = setup(table);
  let release!: () => void;
  table.dumpGate = new Promise((r) => (release = r));
  flusher.schedule([removed(DEAD)]);
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  t.is(table.dumps.length, 1, 'first run is dumping');
  flusher.schedule([removed('10.244.9.10')]);
  flusher.schedule([removed('10.244.9.10'), removed('10.244.9.10')]);
  table.dumpGate = undefined;
  release();
  await flusher.idle();
  t.is(reports.length, 2, 'two runs, not three');
  t.deepEqual(
    reports.map((r) => [r.targets, r.deleted]),
    [
      [1, 1],
      [1, 1],
    ],
  );
  t.is(table.table.length, 0);
});

test('deletes go in bounded batches', async (t) => {
  const flows = Array.from({ length: 7 }, (_, i) => toDead(41000 + i));
  const table = new FakeConntrack(flows);
  const { flusher, reports } = setup(table, { batchSize: 3 });
  flusher.schedule([removed(DEAD)]);
  await flusher.idle();
  t.deepEqual(table.deleteCalls, [3, 3, 1]);
  t.like(reports[0], { deleted: 7 });
});

test('failed deletes keep their targets; the next schedule retries them, other targets are done', async (t) => {
  const bad = toDead(40000);
  const ok = flow({ dst: VIP, dport: 53, replySrc: '10.244.9.10', sport: 40001 });
  const table = new FakeConntrack([bad, ok]);
  const { flusher, reports, logs } = setup(table, { batchSize: 1 });
  table.failDelete = (f) => f === bad;
  flusher.schedule([removed(DEAD), removed('10.244.9.10')]);
  await flusher.idle();
  t.like(reports[0], { deleted: 1, errors: 1, retained: 1 });
  t.is(flusher.backlog, 1, 'the failed target is kept');
  t.true(
    logs.records.some((r) => r.level === 'warn'),
    'logged',
  );
  t.true(table.has(bad));
  table.failDelete = undefined;
  flusher.schedule([]);
  await flusher.idle();
  t.like(reports[1], { targets: 1, deleted: 1, errors: 0, retained: 0 });
  t.false(table.has(bad));
  t.is(flusher.backlog, 0);
});

test('a failed dump keeps the targets; given up (logged) after maxAttempts runs', async (t) => {
  const table = new FakeConntrack([toDead(40000)]);
  const { flusher, reports, logs } = setup(table, { maxAttempts: 2 });
  table.dumpError = new Error('ENOBUFS');
  flusher.schedule([removed(DEAD)]);
  await flusher.idle();
  t.like(reports[0], { errors: 1, retained: 1, dropped: 0 });
  flusher.schedule([]);
  await flusher.idle();
  t.like(reports[1], { errors: 1, retained: 0, dropped: 1 });
  t.true(logs.records.some((r) => r.level === 'error' && /Gave up/.test(r.msg)));
  t.is(flusher.backlog, 0);
});

test('the time bound aborts a run; its targets are retried at the next schedule', async (t) => {
  const table = new FakeConntrack([toDead(40000)]);
  const { flusher, reports, clock } = setup(table, { timeoutMs: 500 });
  table.hang = true;
  flusher.schedule([removed(DEAD)]);
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  clock.advance(500);
  await flusher.idle();
  t.like(reports[0], { timedOut: true, retained: 1, deleted: 0 });
  table.hang = false;
  flusher.schedule([]);
  await flusher.idle();
  t.like(reports[1], { timedOut: false, deleted: 1 });
});

test('the guard: a retried target whose endpoint serves again deletes nothing', async (t) => {
  const f = toDead(40000);
  const table = new FakeConntrack([f]);
  const { flusher, reports } = setup(table);
  table.dumpError = new Error('EINTR');
  flusher.schedule([removed(DEAD)], desired([]));
  await flusher.idle();
  table.dumpError = undefined;
  // The endpoint came back before the retry.
  flusher.schedule([], desired([DEAD]));
  await flusher.idle();
  t.true(table.has(f));
  t.like(reports[1], { matched: 0, kept: 1, deleted: 0 });
});

test('reconcile deletes only entries whose reply source does not serve the frontend', async (t) => {
  const healthy = Array.from({ length: 5 }, (_, i) => flow({ dst: VIP, dport: 53, replySrc: LIVE, sport: 42000 + i }));
  const dead = toDead(40000);
  const cached = flow({ dst: VIP, dport: 53, replySrc: VIP, replyPort: 53, sport: 40001 });
  const tcp = flow({ dst: VIP, dport: 53, replySrc: DEAD, sport: 40002, proto: IPPROTO.TCP });
  const table = new FakeConntrack([...healthy, dead, cached, tcp]);
  const { flusher, reports } = setup(table);
  flusher.reconcile(desired([LIVE]));
  await flusher.idle();
  t.deepEqual(table.table, [...healthy, tcp]);
  t.like(reports[0], { mode: 'reconcile', families: ['IPv4'], matched: 2, deleted: 2, errors: 0 });
  t.deepEqual(table.dumps, [{ family: 'IPv4', proto: IPPROTO.UDP }], 'one dump per protocol with frontends');
});

test('a failed reconcile runs again at the next schedule', async (t) => {
  const table = new FakeConntrack([toDead(40000)]);
  const { flusher, reports } = setup(table);
  table.dumpError = new Error('EBUSY');
  flusher.reconcile(desired([LIVE]));
  await flusher.idle();
  t.like(reports[0], { mode: 'reconcile', errors: 1, retained: 1 });
  table.dumpError = undefined;
  flusher.schedule([]);
  await flusher.idle();
  t.like(reports[1], { mode: 'reconcile', deleted: 1, errors: 0 });
});

test('held targets (a sync that did not commit) wait for the next schedule', async (t) => {
  const table = new FakeConntrack([toDead(40000)]);
  const { flusher, reports } = setup(table);
  flusher.hold([removed(DEAD)]);
  await flusher.idle();
  t.is(reports.length, 0);
  flusher.schedule([]);
  await flusher.idle();
  t.like(reports[0], { targets: 1, deleted: 1 });
});

test('close aborts the run in flight and ignores later work', async (t) => {
  const table = new FakeConntrack([toDead(40000)]);
  const { flusher, reports } = setup(table);
  table.hang = true;
  flusher.schedule([removed(DEAD)]);
  await new Promise((r) => setImmediate(r));
  await flusher.close();
  t.like(reports[0], { timedOut: true });
  flusher.schedule([removed(DEAD)]);
  await flusher.idle();
  t.is(reports.length, 1);
  t.is(flusher.backlog, 0);
});

// Kernel-side flush by filter (Linux 6.12+), and the fallback where the kernel refuses it.

/** A NodePort service, for targets with a node-port filter next to the service-IP one. */
function desiredNodePort(endpoints: string[]): DesiredState {
  const { t } = newTracker();
  t.onService(
    undefined,
    svc('dns', {
      type: 'NodePort',
      clusterIP: VIP,
      ports: [{ name: 'p', protocol: 'UDP', port: 53, nodePort: 30053 }],
    }),
  );
  t.onEndpointSlice(
    slice(
      'dns-1',
      'dns',
      endpoints.map((ip) => ep(ip)),
      { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] },
    ),
    false,
  );
  return t.checkout().desired;
}

function mixedTable(kernel: '6.12' | '6.1') {
  const stale = Array.from({ length: 50 }, (_, i) => toDead(40000 + i));
  const healthy = flow({ dst: VIP, dport: 53, replySrc: LIVE, sport: 41000 });
  const tcp = flow({ dst: VIP, dport: 53, replySrc: DEAD, sport: 41001, proto: IPPROTO.TCP });
  const other = flow({ dst: '10.96.0.11', dport: 53, replySrc: DEAD, sport: 41002 });
  const otherPort = flow({ dst: VIP, dport: 54, replySrc: DEAD, replyPort: 8080, sport: 41003 });
  const table = new FlushingConntrack([...stale, healthy, tcp, other, otherPort], kernel);
  return { table, stale, kept: [healthy, tcp, other, otherPort] };
}

test('a removed endpoint goes by one kernel-side flush: no dump, no per-entry delete, the rest untouched', async (t) => {
  const { table, kept } = mixedTable('6.12');
  const { flusher, reports } = setup(table);
  flusher.schedule([removed(DEAD)], desired([LIVE]));
  await flusher.idle();
  t.deepEqual(table.table, kept);
  t.deepEqual(table.flushes, [
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: VIP, dstPort: 53 }, reply: { src: DEAD, srcPort: 8080 } },
  ]);
  t.is(table.dumps.length, 0);
  t.deepEqual(table.deleteCalls, []);
  t.like(reports[0], { mode: 'flush', targets: 1, matched: 50, deleted: 50, kernelFlushes: 1, errors: 0, retained: 0 });
});

test('a kernel without filtered flush (6.1) refuses once; the run and later ones dump and delete the same entries', async (t) => {
  const { table, kept } = mixedTable('6.1');
  const { flusher, reports } = setup(table);
  flusher.schedule([removed(DEAD)], desired([LIVE]));
  await flusher.idle();
  t.deepEqual(table.table, kept);
  t.is(table.refused, 1);
  t.is(table.dumps.length, 1);
  t.like(reports[0], { matched: 50, deleted: 50, kernelFlushes: 0, errors: 0 });
  table.table.push(toDead(45000));
  flusher.schedule([removed(DEAD)], desired([LIVE]));
  await flusher.idle();
  t.is(table.refused, 1, 'not asked again');
  t.deepEqual(table.table, kept);
  t.like(reports[1], { deleted: 1, kernelFlushes: 0 });
});

test('what the guard might keep is never flushed by the kernel: newly-active, an endpoint that serves again, node ports', async (t) => {
  // newly-active: the frontend has serving endpoints, and entries already DNATed to one stay.
  const cached = flow({ dst: VIP, dport: 53, replySrc: VIP, replyPort: 53, sport: 40001 });
  const onLive = flow({ dst: VIP, dport: 53, replySrc: LIVE, sport: 40002 });
  const t1 = new FlushingConntrack([cached, onLive]);
  const a = setup(t1);
  a.flusher.schedule([{ ...base, reason: 'newly-active' }], desired([LIVE]));
  await a.flusher.idle();
  t.deepEqual(t1.flushes, []);
  t.deepEqual(t1.table, [onLive]);
  t.like(a.reports[0], { deleted: 1, kept: 1, kernelFlushes: 0 });

  // The removed endpoint serves again (a retried target): its entries stay.
  const back = toDead(40000);
  const t2 = new FlushingConntrack([back]);
  const b = setup(t2);
  b.flusher.schedule([removed(DEAD)], desired([DEAD]));
  await b.flusher.idle();
  t.deepEqual(t2.flushes, []);
  t.true(t2.has(back));
  t.like(b.reports[0], { kept: 1, deleted: 0 });

  // A NodePort target: the service-IP filter by flush, the node-port one by dump (its guard
  // looks at each entry's destination); another host's port 30053 is never touched.
  const viaNodePort = flow({ dst: '192.168.0.2', dport: 30053, replySrc: DEAD, sport: 40003 });
  const foreign = flow({ dst: '192.168.7.7', dport: 30053, replySrc: '192.168.7.7', replyPort: 30053, sport: 40004 });
  const viaVip = toDead(40005);
  const t3 = new FlushingConntrack([viaNodePort, foreign, viaVip]);
  const c = setup(t3);
  c.flusher.schedule([{ ...removed(DEAD), nodePort: 30053 }], desiredNodePort([LIVE]));
  await c.flusher.idle();
  t.deepEqual(
    t3.flushes.map((f) => f.orig),
    [{ dst: VIP, dstPort: 53 }],
  );
  t.deepEqual(
    t3.dumps,
    [{ family: 'IPv4', proto: IPPROTO.UDP, orig: { dstPort: 30053 }, reply: { src: DEAD, srcPort: 8080 } }],
    'the dump narrowed to the node-port filter',
  );
  t.deepEqual(t3.table, [foreign]);
  t.like(c.reports[0], { deleted: 2, kernelFlushes: 1, errors: 0 });
});

test('SCTP and IPv6 targets take the dump (the kernel would not match their filters exactly)', async (t) => {
  const sctp = flow({ dst: VIP, dport: 53, replySrc: DEAD, sport: 40000, proto: IPPROTO.SCTP });
  const v6 = flow({
    family: 'IPv6',
    src: 'fd00::1',
    dst: 'fd00:96::10',
    dport: 53,
    replySrc: 'fd00:244::9',
    sport: 40001,
  });
  const table = new FlushingConntrack([sctp, v6]);
  const { flusher, reports } = setup(table);
  flusher.schedule([
    { ...removed(DEAD), protocol: 'SCTP' },
    { ...removed('fd00:244::9'), family: 'IPv6', serviceIPs: ['fd00:96::10'] },
  ]);
  await flusher.idle();
  t.deepEqual(table.flushes, []);
  t.is(table.dumps.length, 2);
  t.deepEqual(table.table, []);
  t.like(reports[0], { deleted: 2, kernelFlushes: 0 });
});

test('a failed kernel flush keeps its targets for the next run; more filters than maxKernelFlushes take the dump', async (t) => {
  const { table, kept } = mixedTable('6.12');
  const { flusher, reports, logs } = setup(table);
  table.flushError = new Error('ENOMEM');
  flusher.schedule([removed(DEAD)], desired([LIVE]));
  await flusher.idle();
  t.like(reports[0], { deleted: 0, errors: 1, retained: 1, kernelFlushes: 0 });
  t.is(table.dumps.length, 0, 'not dumped in the same run');
  t.true(logs.records.some((r) => r.level === 'warn' && /by filter failed/.test(r.msg)));
  table.flushError = undefined;
  flusher.schedule([], desired([LIVE]));
  await flusher.idle();
  t.like(reports[1], { deleted: 50, errors: 0, retained: 0, kernelFlushes: 1 });
  t.deepEqual(table.table, kept);

  const many = new FlushingConntrack([
    toDead(40000),
    flow({ dst: VIP, dport: 53, replySrc: '10.244.9.10', sport: 40001 }),
  ]);
  const capped = setup(many, { maxKernelFlushes: 1 });
  capped.flusher.schedule([removed(DEAD), removed('10.244.9.10')], desired([LIVE]));
  await capped.flusher.idle();
  t.deepEqual(many.flushes, []);
  t.is(many.dumps.length, 1);
  t.like(capped.reports[0], { deleted: 2, kernelFlushes: 0 });

  const off = new FlushingConntrack([toDead(40000)]);
  const o = setup(off, { kernelFlush: false });
  o.flusher.schedule([removed(DEAD)], desired([LIVE]));
  await o.flusher.idle();
  t.deepEqual(off.flushes, []);
  t.like(o.reports[0], { deleted: 1, kernelFlushes: 0 });
});
