// IpvsClient.applyMany over the fake IPVS kernel: list order, many requests per datagram,
// one named result per operation, failures that do not stop the others, encoder refusals
// that are never sent, and the one-at-a-time fallback for a transport without pipeline().
import test from 'ava';
import { NetlinkConnection, NetlinkError } from '../../../../src/netlink/core/index.ts';
import {
  IPVS_OPS_PER_DATAGRAM,
  IpvsClient,
  IpvsCmd,
  IpvsSchedulerError,
  isIpvsExists,
  isServiceNotFound,
} from '../../../../src/netlink/ipvs/index.ts';
import type { IpvsOp, IpvsServiceSpec, IpvsTransport } from '../../../../src/netlink/ipvs/index.ts';
import { FakeIpvs } from './fake-ipvs.ts';

const svc = (i: number): IpvsServiceSpec => ({
  family: 'IPv4',
  protocol: 'tcp',
  address: `10.96.${i >> 8}.${i & 255}`,
  port: 80,
  scheduler: 'rr',
});
const dest = (i: number, j: number) => ({
  address: `10.0.${i & 255}.${j}`,
  port: 8080,
  weight: 1,
  forward: 'masq' as const,
});

function setup(): { fake: FakeIpvs; conn: NetlinkConnection; client: IpvsClient } {
  const fake = new FakeIpvs();
  const conn = new NetlinkConnection(fake.kernel, { timeoutMs: 2000 });
  return { fake, conn, client: new IpvsClient(conn) };
}

/** The requests per datagram after the family look-up. */
const bursts = (fake: FakeIpvs): number[] => fake.datagrams.slice(1);

test('operations apply in list order, many per datagram: a service added earlier takes its destinations later in the list', async (t) => {
  const { fake, client } = setup();
  const ops: IpvsOp[] = [];
  for (let i = 0; i < 10; i++) {
    ops.push({ op: 'add-service', service: svc(i) });
    for (let j = 1; j <= 3; j++) ops.push({ op: 'add-destination', service: svc(i), destination: dest(i, j) });
  }
  ops.push({ op: 'edit-service', service: { ...svc(0), scheduler: 'wrr' } });
  ops.push({ op: 'edit-destination', service: svc(1), destination: { ...dest(1, 1), weight: 0 } });
  ops.push({ op: 'delete-destination', service: svc(2), destination: dest(2, 3) });
  ops.push({ op: 'delete-service', service: svc(9) });
  const res = await client.applyMany(ops);
  t.deepEqual(res, new Array(ops.length).fill(undefined));
  t.deepEqual(bursts(fake), [ops.length], 'one datagram');
  t.is(fake.services.size, 9);
  t.is(fake.services.get('TCP 10.96.0.0:80')!.svc.scheduler, 'wrr');
  t.is(fake.services.get('TCP 10.96.0.1:80')!.dests.get('10.0.1.1:8080')!.weight, 0);
  t.deepEqual([...fake.services.get('TCP 10.96.0.2:80')!.dests.keys()], ['10.0.2.1:8080', '10.0.2.2:8080']);
});

test('each failure is its own NetlinkError naming the operation and object; the operations after it still apply', async (t) => {
  const { fake, client } = setup();
  await client.addService(svc(1));
  const ops: IpvsOp[] = [
    { op: 'add-service', service: svc(1) },
    { op: 'add-destination', service: svc(2), destination: dest(2, 1) },
    { op: 'add-service', service: { ...svc(3), scheduler: 'nosuch' } },
    { op: 'add-service', service: svc(4) },
    { op: 'add-destination', service: svc(4), destination: dest(4, 1) },
    { op: 'delete-service', service: svc(5) },
  ];
  const [exists, noService, noScheduler, ok1, ok2, gone] = await client.applyMany(ops);
  t.true(isIpvsExists(exists));
  t.is(exists!.message, 'add ipvs service TCP 10.96.0.1:80 scheduler rr: EEXIST');
  t.true(isServiceNotFound(noService));
  t.is(noService!.message, 'add ipvs destination 10.0.2.1:8080 of TCP 10.96.0.2:80: ESRCH');
  t.true(noScheduler instanceof IpvsSchedulerError);
  t.regex(
    noScheduler!.message,
    /^add ipvs service TCP 10\.96\.0\.3:80 scheduler nosuch: scheduler "nosuch" is not available/,
  );
  t.is(ok1, undefined);
  t.is(ok2, undefined);
  t.true(isServiceNotFound(gone));
  t.deepEqual([...fake.services.get('TCP 10.96.0.4:80')!.dests.keys()], ['10.0.4.1:8080']);
});

test('a value the encoders refuse is EINVAL naming the operation, never sent; the others go', async (t) => {
  const { fake, client } = setup();
  const ops: IpvsOp[] = [
    { op: 'add-service', service: svc(1) },
    { op: 'add-destination', service: svc(1), destination: { ...dest(1, 1), weight: -1 } },
    { op: 'add-destination', service: svc(1), destination: { ...dest(1, 2), address: 'not-an-ip' } },
    { op: 'add-destination', service: svc(1), destination: dest(1, 3) },
  ];
  const [a, bad1, bad2, b] = await client.applyMany(ops);
  t.is(a, undefined);
  t.is(b, undefined);
  t.true(bad1 instanceof NetlinkError);
  t.is(bad1!.code, 'EINVAL');
  t.is(
    bad1!.message,
    'add ipvs destination 10.0.1.1:8080 of TCP 10.96.0.1:80: EINVAL (destination weight -1 is out of range)',
  );
  t.regex(
    bad2!.message,
    /^add ipvs destination not-an-ip:8080 of TCP 10\.96\.0\.1:80: EINVAL \(.*not an IP address\)$/,
  );
  t.deepEqual(bursts(fake), [2]);
});

test(`at most ${IPVS_OPS_PER_DATAGRAM} requests per datagram, so every error reply of an all-failing burst fits the receive buffer`, async (t) => {
  const { fake, client } = setup();
  // Destinations of a service that does not exist: every request fails (ESRCH).
  const many = (j: number) => ({ ...dest(1, 1), address: `10.1.${j >> 8}.${j & 255}` });
  const ops: IpvsOp[] = Array.from({ length: 600 }, (_, j) => ({
    op: 'add-destination',
    service: svc(1),
    destination: many(j),
  }));
  const res = await client.applyMany(ops);
  t.deepEqual(bursts(fake), [256, 256, 88]);
  t.is(res.filter((e) => isServiceNotFound(e)).length, 600);
  t.is(res[599]!.message, 'add ipvs destination 10.1.2.87:8080 of TCP 10.96.0.1:80: ESRCH');
  // perDatagram overrides.
  await client.applyMany(ops.slice(0, 10), { perDatagram: 4 });
  t.deepEqual(bursts(fake).slice(3), [4, 4, 2]);
});

test('a transport without pipeline(): the same results, one request at a time', async (t) => {
  const { fake, conn } = setup();
  const plain: IpvsTransport = {
    request: (m, o) => conn.request(m, o),
    batch: (s, m, o) => conn.batch(s, m, o),
    get maxBatchBytes() {
      return conn.maxBatchBytes;
    },
    close: () => conn.close(),
  };
  const client = new IpvsClient(plain);
  const res = await client.applyMany([
    { op: 'add-service', service: svc(1) },
    { op: 'add-service', service: svc(1) },
    { op: 'add-destination', service: svc(1), destination: dest(1, 1) },
  ]);
  t.is(res[0], undefined);
  t.true(isIpvsExists(res[1]));
  t.is(res[2], undefined);
  t.deepEqual(bursts(fake), [1, 1, 1]);
});

test('an exchange that fails (aborted) rejects: which operations took effect is unknown', async (t) => {
  const { client } = setup();
  await client.familyId();
  const ac = new AbortController();
  ac.abort(new Error('sync aborted'));
  await t.throwsAsync(client.applyMany([{ op: 'add-service', service: svc(1) }], { signal: ac.signal }), {
    message: 'sync aborted',
  });
});

test('the fake acknowledges only requests that ask for it, as the kernel does', async (t) => {
  const { fake, client } = setup();
  await client.applyMany([
    { op: 'add-service', service: svc(1) },
    { op: 'add-service', service: svc(2) },
  ]);
  const cmds = fake.requests.slice(-2).map((r) => [r.payload[0], (r.flags & 4) !== 0]);
  t.deepEqual(cmds, [
    [IpvsCmd.NEW_SERVICE, false],
    [IpvsCmd.NEW_SERVICE, true],
  ]);
});
