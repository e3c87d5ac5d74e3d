// nfacct requests against the bytes `nfacct` 1.0.2 sends, and the kernel's replies decoded,
// captured with strace in a throwaway namespace (test/fixtures/netlink/capture-ipset-route.sh,
// CAPTURE.md); the client over the fake kernel.
import test from 'ava';
import { NetlinkConnection, errnoNumber, isBusy, isNotFound } from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import { ackReply, doneReply, errorReply } from '../../../../src/netlink/core/fake/index.ts';
import {
  NfacctClient,
  NfacctCmd,
  checkNfacctName,
  decodeCounter,
  delMessage,
  dumpMessage,
  getMessage,
  newMessage,
} from '../../../../src/netlink/nfacct/index.ts';
import { NetlinkDecodeError } from '../../../../src/netlink/core/index.ts';
import { fixtureLines, fixtureMessage, sameAsFixture } from '../ipset/fixture-lines.ts';

const f = (name: string): string => `nfacct/${name}.hex`;
const INVALID = 'ct_state_invalid_dropped_pkts';
const LOCALHOST = 'localhost_nps_accepted_pkts';

test('new, get, dump and del equal what nfacct sends, byte for byte', (t) => {
  sameAsFixture(t, newMessage(INVALID), f('add'), 1);
  sameAsFixture(t, getMessage(INVALID), f('get'), 1);
  sameAsFixture(t, dumpMessage(), f('list'), 1, { dump: true });
  sameAsFixture(t, delMessage(LOCALHOST), f('del'), 1);
});

test('nfacct add sends no NLM_F_EXCL, and the kernel answers an existing name with EBUSY', (t) => {
  const add = fixtureLines(f('add'))[0]!;
  t.is(add[6]! | (add[7]! << 8), 0x405, 'REQUEST|ACK|CREATE');
  const err = fixtureMessage(f('add-ebusy.recv'), 1);
  t.is(new DataView(err.payload.buffer, err.payload.byteOffset).getInt32(0, true), -errnoNumber('EBUSY'));
  const missing = fixtureMessage(f('get-enoent.recv'), 1);
  t.is(new DataView(missing.payload.buffer, missing.payload.byteOffset).getInt32(0, true), -errnoNumber('ENOENT'));
});

test("the kernel's replies decode to name, counters and use", (t) => {
  t.deepEqual(decodeCounter(fixtureMessage(f('get.recv'), 1)), { name: INVALID, packets: 0n, bytes: 0n, use: 1 });
  const dump = [1, 2, 3].map((n) => decodeCounter(fixtureMessage(f('list.recv'), n)));
  t.deepEqual(
    dump.map((c) => c.name),
    [INVALID, LOCALHOST, 'other'],
  );
});

test('counters are big-endian u64 (a patched fixture reads back)', (t) => {
  const m = fixtureMessage(f('get.recv'), 1);
  const payload = Uint8Array.from(m.payload);
  // PKTS is the second attribute: nfgenmsg (4) + NAME (4 + 30, padded to 36) + header (4).
  new DataView(payload.buffer).setBigUint64(4 + 36 + 4, 0x1_0000_0002n, false);
  t.is(decodeCounter({ ...m, payload }).packets, 0x1_0000_0002n);
});

test('names: 1 to 31 bytes; bad replies give a NetlinkDecodeError', (t) => {
  t.is(checkNfacctName(INVALID), INVALID);
  t.throws(() => newMessage(''), { instanceOf: TypeError });
  t.throws(() => newMessage('x'.repeat(32)), { message: /1 to 31 bytes/ });
  const m = fixtureMessage(f('get.recv'), 1);
  for (const cut of [0, 3, 10, 40, 50]) {
    t.throws(() => decodeCounter({ ...m, payload: m.payload.subarray(0, cut) }), { instanceOf: NetlinkDecodeError });
  }
});

function client(handler: ConstructorParameters<typeof FakeKernel>[0]) {
  return new NfacctClient(new NetlinkConnection(new FakeKernel(handler)));
}

test('ensure keeps an existing object (EBUSY) and creates a missing one', async (t) => {
  const seen: number[] = [];
  const busy = client(([req]) => {
    seen.push(req!.type);
    return [errorReply(req!, errnoNumber('EBUSY'))];
  });
  await t.notThrowsAsync(busy.ensure(INVALID));
  t.deepEqual(seen, [(7 << 8) | NfacctCmd.NEW]);
  const other = client(([req]) => [errorReply(req!, errnoNumber('EPERM'))]);
  await t.throwsAsync(other.ensure(INVALID), { message: /add nfacct ct_state_invalid_dropped_pkts/ });
  const busyAdd = client(([req]) => [errorReply(req!, errnoNumber('EBUSY'))]);
  t.true(isBusy(await t.throwsAsync(busyAdd.add(INVALID))));
});

test('get and list decode the replies; del with missingOk ignores ENOENT only', async (t) => {
  const reply = fixtureMessage(f('get.recv'), 1);
  const c = client(([req]) => {
    if (req!.type === ((7 << 8) | NfacctCmd.DEL)) return [errorReply(req!, errnoNumber('ENOENT'))];
    if (req!.flags & 0x300)
      return [{ type: reply.type, flags: 2, payload: reply.payload, seq: req!.seq }, doneReply(req!)];
    return [{ type: reply.type, payload: reply.payload, seq: req!.seq }, ackReply(req!)];
  });
  t.is((await c.get(INVALID)).name, INVALID);
  t.is((await c.list()).length, 1);
  await t.notThrowsAsync(c.del(LOCALHOST, { missingOk: true }));
  t.true(isNotFound(await t.throwsAsync(c.del(LOCALHOST))));
});
