// The IPVS proxier's pipelined writes over fakes: a cold sync sends its many IPVS and address
// writes in few datagrams, virtual servers before their real servers; one refused object is a
// named error that stops neither the others nor the sync; a VS someone else made is adopted.
import test from 'ava';
import { IpvsCmd } from '../../../../src/netlink/ipvs/index.ts';
import { IpvsSyncError } from '../../../../src/proxier/ipvs/index.ts';
import { ep, harness, slice, svc } from './harness.ts';
import { problemText } from '../../../../src/proxier/types.ts';

const EINVAL = 22;

/** A refuse hook for FakeIpvs: EINVAL for requests of `cmd` whose payload holds `address`'s bytes. */
function refuseEinval(cmd: number, address: number[]): (req: { payload: Uint8Array }, c: number) => number | undefined {
  const needle = Buffer.from(address);
  return (req, c) => (c === cmd && Buffer.from(req.payload).includes(needle) ? EINVAL : undefined);
}

function bulk(h: ReturnType<typeof harness>, n: number, eps = 2): void {
  for (let i = 0; i < n; i++) {
    h.tracker.onService(undefined, svc(`s${i}`, { clusterIP: `10.97.${i >> 8}.${i & 255}` }));
    h.tracker.onEndpointSlice(
      slice(
        `s${i}-1`,
        `s${i}`,
        Array.from({ length: eps }, (_, j) => ep(`10.1.${i & 255}.${j + 1}`)),
      ),
      false,
    );
  }
}

test('a cold sync of 300 Services x 2 endpoints: every VS before any real server, all in few datagrams', async (t) => {
  const h = harness();
  bulk(h, 300);
  const r = await h.sync();
  t.true(r.full);
  const w = h.writes();
  t.is(w.newService, 301, "ours and init()'s scheduler probe");
  t.is(w.newDest, 600);
  const firstDest = w.ipvsOrder.indexOf('NEW_DEST');
  t.is(w.ipvsOrder.lastIndexOf('NEW_SERVICE'), firstDest - 1, 'a virtual server exists before its real servers');
  t.true(Math.max(...h.ipvsFake.datagrams) <= 256);
  // 900 IPVS writes in 4 datagrams (256 + 44 services, 256 + 256 + 88 servers), not 900.
  t.true(h.ipvsFake.datagrams.filter((n) => n > 1).length <= 5, String(h.ipvsFake.datagrams));
  t.true(h.proxier.lastOps < 60, `kernel calls ${h.proxier.lastOps}`);
  t.true(h.proxier.lastRequests > 1200, `requests ${h.proxier.lastRequests}`);
  t.is(h.addrs().length, 300);
  t.is(h.vs().length, 900);
});

test('one refused VS is a named error; the other VSes and their real servers are written, its own real servers are not tried', async (t) => {
  const h = harness();
  bulk(h, 20);
  h.ipvsFake.refuse = refuseEinval(IpvsCmd.NEW_SERVICE, [10, 97, 0, 7]);
  const e = await t.throwsAsync(h.sync(), { instanceOf: IpvsSyncError });
  t.deepEqual(e!.report.errors.map(problemText), [
    'ensure ipvs service TCP 10.97.0.7:80: add ipvs service TCP 10.97.0.7:80 scheduler rr: EINVAL',
  ]);
  t.is(h.vs().length, 19 * 3);
  const w = h.writes();
  t.is(w.newDest, 19 * 2, 'no real server of the refused VS was sent');
  t.deepEqual(h.set('KUBE-CLUSTER-IP').length, 20, 'later steps ran');
  // The next sync is full and finishes the job.
  h.ipvsFake.refuse = undefined;
  const r = await h.sync();
  t.true(r.full);
  t.is(h.vs().length, 60);
});

test('one refused real server is a named error; the others are written', async (t) => {
  const h = harness();
  bulk(h, 5);
  h.ipvsFake.refuse = refuseEinval(IpvsCmd.NEW_DEST, [10, 1, 3, 2]);
  const e = await t.throwsAsync(h.sync(), { instanceOf: IpvsSyncError });
  t.deepEqual(e!.report.errors.map(problemText), [
    'ensure real server 10.1.3.2:8080 of TCP 10.97.0.3:80: add ipvs destination 10.1.3.2:8080 of TCP 10.97.0.3:80: EINVAL',
  ]);
  t.is(h.vs().length, 5 * 3 - 1);
  h.ipvsFake.refuse = undefined;
  await h.sync();
  t.is(h.vs().length, 15);
});

test('a VS someone else made between syncs (EEXIST) is adopted: its real servers are read, its settings and ours written', async (t) => {
  const h = harness();
  bulk(h, 1);
  await h.sync();
  await h.ipvs.addService({ family: 'IPv4', protocol: 'tcp', address: '10.97.0.9', port: 80, scheduler: 'wrr' });
  await h.ipvs.addDestination(
    { family: 'IPv4', protocol: 'tcp', address: '10.97.0.9', port: 80 },
    { address: '10.9.9.9', port: 8080, weight: 3 },
  );
  h.tracker.onService(undefined, svc('late', { clusterIP: '10.97.0.9' }));
  h.tracker.onEndpointSlice(slice('late-1', 'late', [ep('10.1.9.1')]), false);
  const r = await h.sync();
  t.false(r.full);
  t.deepEqual(
    h.vs().filter((l) => l.includes('10.97.0.9')),
    ['TCP 10.97.0.9:80 -> 10.1.9.1:8080 1', 'TCP 10.97.0.9:80 -> 10.9.9.9:8080 0', 'TCP 10.97.0.9:80 rr'],
  );
});

test('deleting many Services: drains, VS deletes and VIP unbinds are pipelined too', async (t) => {
  const h = harness();
  bulk(h, 50);
  await h.sync();
  h.writes();
  const before = h.ipvsFake.datagrams.length;
  for (let i = 0; i < 50; i++) h.tracker.onService(svc(`s${i}`, { clusterIP: `10.97.0.${i}` }), undefined);
  await h.sync();
  const w = h.writes();
  t.is(w.delService, 50);
  t.is(h.ipvsFake.datagrams.length - before, 1, 'one datagram of 50 DEL_SERVICE');
  t.deepEqual(h.addrs(), []);
  t.deepEqual(h.vs(), []);
});

test('graceful termination: drained real servers of many Services are deleted pipelined; a refused delete stays queued', async (t) => {
  const h = harness();
  bulk(h, 100);
  await h.sync();
  // Every Service loses its second endpoint: 100 real servers go to weight 0 and drain.
  for (let i = 0; i < 100; i++)
    h.tracker.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.1.${i & 255}.1`)], { rv: '2' }), false);
  await h.sync();
  t.is(h.proxier.terminating().length, 100);
  h.writes();
  const before = h.ipvsFake.datagrams.length;
  // One delete refused by the kernel (its Service is 10.97.0.7).
  h.ipvsFake.refuse = refuseEinval(IpvsCmd.DEL_DEST, [10, 97, 0, 7]);
  h.clock.advance(1000);
  await h.proxier.whenIdle();
  const w = h.writes();
  t.is(w.getDest, 100, 'one destination dump per draining virtual server, for its counters');
  t.is(w.delDest, 100);
  const multi = h.ipvsFake.datagrams.slice(before).filter((n) => n > 1);
  t.deepEqual(multi, [100], 'the 100 deletes went in one datagram');
  t.deepEqual(
    h.proxier.terminating().map((x) => x.vs),
    ['TCP 10.97.0.7:80'],
    'the refused one is still queued',
  );
  t.true(h.records.some((r) => r.msg === 'deleting a drained real server failed'));
  t.is(h.vs().length, 100 * 2 + 1);
  // The next tick deletes it.
  h.ipvsFake.refuse = undefined;
  h.clock.advance(1000);
  await h.proxier.whenIdle();
  t.deepEqual(h.proxier.terminating(), []);
  t.is(h.vs().length, 100 * 2);
});
