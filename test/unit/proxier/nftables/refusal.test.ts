// A batch the kernel refuses is narrowed down to the service port it was refused for; that
// port is reported and skipped, everything else is programmed, and nothing already
// programmed is lost. The "kernel" here is FakeNft refusing any operation that names the
// poisoned Service (as a kernel limit or a name it cuts would).
import test from 'ava';
import { memoryLogger, type LogRecord } from '../../../../src/base/logger.ts';
import { errnoNumber, NetlinkError } from '../../../../src/netlink/core/index.ts';
import { NftValidationError, type NftTransaction } from '../../../../src/netlink/nftables/index.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { NftTracer } from '../../../helpers/nft-tracer.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';
import { problemText } from '../../../../src/proxier/types.ts';

const signal = new AbortController().signal;

class PoisonedNft extends FakeNft {
  sent = 0;
  poison = 'poison';
  override async run(tx: NftTransaction, s?: AbortSignal) {
    this.sent++;
    if (tx.toString().includes(this.poison))
      throw new NetlinkError('add set ip kube-proxy-ts affinity-…', errnoNumber('ENFILE'));
    return super.run(tx, s);
  }
}

function setup(services: number, maxBatchBytes?: number) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'] });
  const nft = new PoisonedNft({ family: 'ip', table: TABLE });
  const records: LogRecord[] = [];
  const proxier = new NftablesProxier({
    nft,
    logger: memoryLogger(records),
    ...(maxBatchBytes ? { maxBatchBytes } : {}),
  });
  const add = (name: string, i: number): void => {
    t.onService(undefined, svc(name, { clusterIP: `10.96.${i >> 8}.${i & 255}`, affinity: 'ClientIP' }));
    t.onEndpointSlice(slice(`${name}-1`, name, [ep(`10.244.${i >> 8}.${(i & 255) + 1}`)]), false);
  };
  for (let i = 0; i < services; i++) add(`s${i}`, i);
  return { t, nft, proxier, add, records };
}

const vipOf = (i: number) => `10.96.${i >> 8}.${i & 255}`;
/** A connection to the Service's VIP reaches its one endpoint (a packet traced through the rules). */
const programmed = (nft: FakeNft, i: number, endpoint = `10.244.${i >> 8}.${(i & 255) + 1}`): boolean => {
  const r = new NftTracer(nft, { localAddresses: [] }).trace({
    protocol: 'tcp',
    saddr: '10.244.250.1',
    daddr: vipOf(i),
    dport: 80,
  });
  if (r.endpoints.length === 0) return false;
  if (r.endpoints.join() !== `${endpoint}:8080`) throw new Error(`${vipOf(i)} reaches ${r.endpoints.join()}`);
  return true;
};

test('one refused service port is found, reported and skipped; all others are programmed', async (t) => {
  const { t: tracker, nft, proxier, add, records } = setup(100, 16_384);
  add('poison', 200);
  const c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.true(r.full);
  t.is(r.refused, 1);
  t.is(r.errors.length, 1);
  t.regex(r.errors[0]!.what, /default\/poison:p\/TCP/);
  t.is((r.errors[0]!.cause as NetlinkError).code, 'ENFILE');
  t.regex(problemText(r.errors[0]!), /default\/poison:p\/TCP.*ENFILE/);
  t.truthy(records.find((x) => x.msg.includes('refused by the kernel')));
  for (let i = 0; i < 100; i++) t.true(programmed(nft, i), `s${i}`);
  t.false(programmed(nft, 200));
  t.false(nft.dump().includes('poison'));
});

test('later syncs skip the refused port without asking the kernel again, and new Services land', async (t) => {
  const { t: tracker, nft, proxier, add } = setup(20);
  add('poison', 200);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  // A periodic full sync: no refusal, no extra sends.
  tracker.requestFullSync();
  const before = nft.sent;
  const full = tracker.checkout();
  const r = await proxier.sync(full.desired, full.change, signal);
  t.is(r.refused, 0);
  t.true(nft.sent - before <= 2);
  add('later', 300);
  const p = tracker.checkout();
  await proxier.sync(p.desired, p.change, signal);
  t.true(programmed(nft, 300));
  for (let i = 0; i < 20; i++) t.true(programmed(nft, i));
});

test('a refused port that changes is tried again, and programmed once the kernel takes it', async (t) => {
  const { t: tracker, nft, proxier } = setup(5);
  tracker.onService(undefined, svc('poison', { clusterIP: vipOf(200), affinity: 'ClientIP' }));
  tracker.onEndpointSlice(slice('poison-1', 'poison', [ep('10.244.9.9')]), false);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  t.false(programmed(nft, 200));
  nft.poison = 'nothing-matches-this';
  tracker.onEndpointSlice(slice('poison-1', 'poison', [ep('10.244.9.10')]), false);
  const p = tracker.checkout();
  await proxier.sync(p.desired, p.change, signal);
  t.true(programmed(nft, 200, '10.244.9.10'));
});

test("a refusal that is no service port's (the skeleton) fails the sync as the kernel said it", async (t) => {
  const { t: tracker, nft, proxier } = setup(3);
  nft.poison = 'masquerading';
  const c = tracker.checkout();
  await t.throwsAsync(proxier.sync(c.desired, c.change, signal), { instanceOf: NetlinkError, message: /ENFILE/ });
});

test('a kernel that refuses every port: the sync fails after a bounded number of rounds', async (t) => {
  const { t: tracker, nft, proxier } = setup(40);
  nft.poison = 'affinity-';
  const c = tracker.checkout();
  await t.throwsAsync(proxier.sync(c.desired, c.change, signal), { message: /service port .* refused/ });
  t.true(nft.sent < 40 * 8, `${nft.sent} sends`);
});

test('a name holding a NUL byte is refused before it is sent (the kernel would keep only its start)', async (t) => {
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const tx = nft.newTransaction();
  tx.add({ kind: 'table' });
  tx.add({ kind: 'chain', name: 'service-ABCDEFGH-default/web\0x' });
  await t.throwsAsync(nft.run(tx), { instanceOf: NftValidationError, message: /NUL byte/ });
});

test('an encoder refusal of one port is isolated like a kernel refusal', async (t) => {
  const { t: tracker, nft, proxier, add } = setup(10);
  add('poison', 200);
  const run = FakeNft.prototype.run;
  nft.run = async function (tx, s) {
    if (tx.toString().includes('poison'))
      throw new NftValidationError('add set: set name affinity-… is longer than 255 bytes');
    return run.call(this, tx, s);
  };
  const c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.is(r.refused, 1);
  for (let i = 0; i < 10; i++) t.true(programmed(nft, i));
});

test('a partial sync the kernel refuses becomes a full sync that isolates the port, not a failed sync', async (t) => {
  const { t: tracker, nft, proxier, add } = setup(10);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  add('poison', 200);
  add('fine', 201);
  const p = tracker.checkout();
  const r = await proxier.sync(p.desired, p.change, signal);
  t.true(r.full);
  t.is(r.refused, 1);
  t.true(programmed(nft, 201));
  t.false(programmed(nft, 200));
  for (let i = 0; i < 10; i++) t.true(programmed(nft, i));
  add('later', 202);
  const q = tracker.checkout();
  const r2 = await proxier.sync(q.desired, q.change, signal);
  t.false(r2.full, 'partial syncs go on');
  t.true(programmed(nft, 202));
});

test('our table deleted while a full sync writes is drift, not a refusal: the sync starts again and skips no port', async (t) => {
  const { t: tracker, nft, proxier } = setup(100, 16_384);
  const c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  // Someone deletes the table just before the full sync's third batch: that batch (and the
  // narrowing's sends) fail with ENOENT.
  const run = nft.run.bind(nft);
  let batches = 0;
  nft.run = async (tx, s) => {
    if (++batches === 3) {
      const drop = nft.newTransaction();
      drop.delete({ kind: 'table' });
      await run(drop, s);
    }
    return run(tx, s);
  };
  tracker.requestFullSync();
  const full = tracker.checkout();
  const r = await proxier.sync(full.desired, full.change, signal);
  t.true(r.full);
  t.deepEqual(r.errors, []);
  t.is(r.refused ?? 0, 0);
  for (let i = 0; i < 100; i++) t.true(programmed(nft, i), `s${i}`);
});

test('a refused transaction is logged by its first lines only, with how many more it had', async (t) => {
  // One batch of 500 Services (no batch limit), refused for the one named poison.
  const { t: tracker, proxier, add, records } = setup(500);
  add('poison', 600);
  const cold = tracker.checkout();
  await proxier.sync(cold.desired, cold.change, signal);
  const logged = records.filter((r) => r.msg === 'failed transaction').map((r) => String(r.fields['transaction']));
  t.true(logged.length > 0);
  const first = logged[0]!.split('\n');
  t.is(first.length, 201, 'its first 200 lines and the count');
  t.regex(first.at(-1)!, /^… \d+ more lines$/);
  t.true(Number(/\d+/.exec(first.at(-1)!)![0]) > 1000, first.at(-1));
});
