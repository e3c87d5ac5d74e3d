// The request engine over a fake kernel (a function from requests to replies): everything
// above the socket runs for real. Each test states the kernel behaviour it imitates.
import test from 'ava';
import {
  AF_INET,
  ByteWriter,
  NetlinkConnection,
  NetlinkError,
  nfMessage,
  NfnlSubsys,
  NLM_F_ACK,
  NLM_F_DUMP_INTR,
  NLM_F_MULTI,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  isExists,
  isNotFound,
  isTimeout,
  parseMessages,
} from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { InMessage, OutMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply, doneReply, errorReply } from '../../../../src/netlink/core/fake/index.ts';
import type { FakeReply } from '../../../../src/netlink/core/fake/index.ts';
import { fixture, hexdiff, maskSeqPid } from '../../../helpers/fixtures.ts';
import { attr, cstr, le32 } from '../../../helpers/naive-bytes.ts';

const msg = (label: string, cmd = 1): OutMessage =>
  nfMessage(NfnlSubsys.NFTABLES, cmd, AF_INET, 0, label, (w) => w.str(1, label));
const part = (req: InMessage, n: number, flags = NLM_F_MULTI): FakeReply => ({
  type: req.type,
  flags,
  payload: Uint8Array.of(2, 0, 0, 0, ...attr(1, cstr(`obj${n}`))),
  seq: req.seq,
});
const open = (kernel: FakeKernel, timeoutMs = 1000): NetlinkConnection => new NetlinkConnection(kernel, { timeoutMs });

test('a request gets its reply messages, then the ACK ends it', async (t) => {
  const kernel = new FakeKernel(([req]) => [part(req!, 1, 0), ackReply(req!)]);
  const c = open(kernel);
  const replies = await c.request(msg('get x'));
  t.is(replies.length, 1);
  const [sent] = parseMessages(kernel.sent[0]!);
  t.truthy(sent!.flags & NLM_F_ACK, 'non-dump requests ask for an ACK');
  t.is(sent!.pid, kernel.localPort);
});

test('an error reply becomes a NetlinkError naming the operation and the errno', async (t) => {
  const c = open(new FakeKernel(([req]) => [errorReply(req!, 2)]));
  const err = await t.throwsAsync(c.request(msg('get table ip nope')), { instanceOf: NetlinkError });
  t.is(err.message, 'get table ip nope: ENOENT');
  t.is(err.op, 'get table ip nope');
  t.true(isNotFound(err));
});

test('the extended ACK message and offset are carried on the error', async (t) => {
  const tlvs = Uint8Array.from([
    ...attr(NLMSGERR_ATTR_MSG, cstr('Chain already exists')),
    ...attr(NLMSGERR_ATTR_OFFS, le32(20)),
  ]);
  const c = open(new FakeKernel(([req]) => [errorReply(req!, 17, tlvs, NLM_F_ACK_TLVS | NLM_F_CAPPED)]));
  const err = await t.throwsAsync(c.request(msg('add chain ip t c')), { instanceOf: NetlinkError });
  t.true(isExists(err));
  t.deepEqual(err.extack, { msg: 'Chain already exists', offset: 20 });
  t.is(err.message, 'add chain ip t c: EEXIST (Chain already exists)');
});

test('a dump collects parts spread over several datagrams until NLMSG_DONE', async (t) => {
  const c = open(new FakeKernel(([req]) => [[part(req!, 1), part(req!, 2)], [part(req!, 3)], [doneReply(req!)]]));
  const replies = await c.request(msg('list'), { dump: true });
  t.is(replies.length, 3);
});

test('replies with a foreign seq (late answers to abandoned requests) are ignored', async (t) => {
  const c = open(new FakeKernel(([req]) => [{ ...part(req!, 9), seq: req!.seq - 1 }, part(req!, 1), doneReply(req!)]));
  t.is((await c.request(msg('list'), { dump: true })).length, 1);
});

test('an interrupted dump (NLM_F_DUMP_INTR) is restarted and the clean result returned', async (t) => {
  let calls = 0;
  const c = open(
    new FakeKernel(([req]) => {
      calls++;
      if (calls === 1) return [part(req!, 1, NLM_F_MULTI | NLM_F_DUMP_INTR), doneReply(req!)];
      return [part(req!, 1), part(req!, 2), doneReply(req!)];
    }),
  );
  const replies = await c.request(msg('list'), { dump: true });
  t.is(calls, 2);
  t.is(replies.length, 2);
});

test('a dump interrupted every time gives up after a bounded number of retries', async (t) => {
  let calls = 0;
  const c = new NetlinkConnection(
    new FakeKernel(([req]) => {
      calls++;
      return [part(req!, 1, NLM_F_MULTI | NLM_F_DUMP_INTR), doneReply(req!, 0, NLM_F_MULTI | NLM_F_DUMP_INTR)];
    }),
    { timeoutMs: 1000, dumpRetries: 3 },
  );
  const err = await t.throwsAsync(c.request(msg('list chains'), { dump: true }), { instanceOf: NetlinkError });
  t.is(err.code, 'EINTR');
  t.is(err.op, 'list chains', 'the bare label');
  t.is(err.attempts, 4);
  t.is(err.message, 'list chains: dump interrupted 4 times: EINTR');
  t.is(calls, 4);
});

test('a dump interrupted with onInterrupted is returned as read, once, and the caller told', async (t) => {
  let calls = 0;
  let told = 0;
  const c = new NetlinkConnection(
    new FakeKernel(([req]) => {
      calls++;
      return [part(req!, 1), part(req!, 2, NLM_F_MULTI | NLM_F_DUMP_INTR), doneReply(req!, 0, NLM_F_MULTI)];
    }),
    { timeoutMs: 1000, dumpRetries: 3 },
  );
  const replies = await c.request(msg('list elements'), { dump: true, onInterrupted: () => told++ });
  t.is(calls, 1, 'not restarted');
  t.is(told, 1);
  t.is(replies.length, 2);
  // Without it the same dump is restarted until the retries run out.
  await t.throwsAsync(c.request(msg('list elements'), { dump: true }), { instanceOf: NetlinkError });
  t.is(calls, 5);
});

test('a dump whose NLMSG_DONE carries a negative status fails with that errno', async (t) => {
  const c = open(new FakeKernel(([req]) => [part(req!, 1), doneReply(req!, -16)]));
  const err = await t.throwsAsync(c.request(msg('list'), { dump: true }), { instanceOf: NetlinkError });
  t.is(err.code, 'EBUSY');
});

test('a lost reply times out with ETIMEDOUT and the connection keeps working', async (t) => {
  let n = 0;
  const kernel = new FakeKernel(([req]) => (++n === 1 ? [] : [ackReply(req!)]));
  const c = open(kernel, 50);
  const err = await t.throwsAsync(c.request(msg('get slow')), { instanceOf: NetlinkError });
  t.true(isTimeout(err));
  t.regex(err.message, /get slow: no reply within 50 ms/);
  t.deepEqual(await c.request(msg('get next')), []);
});

test('ENOBUFS on the socket fails the exchange in flight instead of hanging it', async (t) => {
  const kernel = new FakeKernel(() => []);
  const c = open(kernel, 5000);
  const p = c.request(msg('list'), { dump: true });
  setImmediate(() => kernel.fail('ENOBUFS'));
  const err = await t.throwsAsync(p, { instanceOf: NetlinkError });
  t.is(err.code, 'ENOBUFS');
});

test('an aborted request rejects with the signal reason', async (t) => {
  const c = open(new FakeKernel(() => []), 5000);
  const ac = new AbortController();
  const p = c.request(msg('get'), { signal: ac.signal });
  setImmediate(() => ac.abort(new Error('shutting down')));
  await t.throwsAsync(p, { message: 'shutting down' });
});

test('concurrent callers are served one at a time, each with its own replies', async (t) => {
  const kernel = new FakeKernel(([req]) => [part(req!, req!.seq, 0), ackReply(req!)]);
  const c = open(kernel);
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => c.request(msg(`get ${i}`))));
  const seqs = kernel.sent.map((b) => parseMessages(b)[0]!.seq);
  results.forEach((r, i) => t.is(r[0]!.seq, seqs[i]!));
  t.is(new Set(seqs).size, 20);
});

test('a batch is framed like nft frames it: begin and end carry the subsystem id', async (t) => {
  const kernel = new FakeKernel((reqs) => [ackReply(reqs.at(-2)!)]);
  const c = open(kernel);
  const table = nfMessage(NfnlSubsys.NFTABLES, 0, AF_INET, 0, 'add table ip kpts', (w) =>
    w.str(1, 'kpts').u32(2, 0, 'net'),
  );
  await c.batch(NfnlSubsys.NFTABLES, [table]);
  // We ask for an ACK on the last message (nft instead polls the socket); clear that bit.
  const sent = maskSeqPid(kernel.sent[0]!);
  sent[20 + 6] = sent[20 + 6]! & ~NLM_F_ACK;
  const expected = maskSeqPid(fixture('core/nft-add-table-batch.hex'));
  t.deepEqual(sent, expected, hexdiff(sent, expected));
});

test('a batch the kernel refuses names the message that failed', async (t) => {
  const kernel = new FakeKernel((reqs) => {
    const body = reqs.slice(1, -1); // without batch begin and end
    return [errorReply(body[2]!, 95), ackReply(body[3]!)];
  });
  const c = open(kernel);
  const msgs = [msg('add table ip t'), msg('add chain ip t a'), msg('add chain ip t bad'), msg('add chain ip t d')];
  const err = await t.throwsAsync(c.batch(NfnlSubsys.NFTABLES, msgs), { instanceOf: NetlinkError });
  t.is(err.message, 'add chain ip t bad: ENOTSUP');
});

test('a refused message that carries set elements: the bare label, the count in a field and the text', async (t) => {
  const kernel = new FakeKernel((reqs) => [errorReply(reqs[1]!, 17)]);
  const c = open(kernel);
  const els = { ...msg('add element ip t s'), elements: 300 };
  const err = await t.throwsAsync(c.batch(NfnlSubsys.NFTABLES, [els]), { instanceOf: NetlinkError });
  t.is(err.op, 'add element ip t s');
  t.is(err.verb, 'add');
  t.is(err.kind, 'element');
  t.is(err.elements, 300);
  t.is(err.message, 'add element ip t s (300 elements): EEXIST');
});

test('a batch refused as a whole (error on the begin message) ends without waiting', async (t) => {
  const c = open(new FakeKernel((reqs) => [errorReply(reqs[0]!, 1)]), 10_000);
  const err = await t.throwsAsync(c.batch(NfnlSubsys.NFTABLES, [msg('add table ip t')]), { instanceOf: NetlinkError });
  t.is(err.code, 'EPERM');
  t.is(err.op, 'batch begin');
  t.is(err.messages, 1);
  t.is(err.message, "batch begin: the batch's control message (its first message: add table ip t): EPERM");
});

test('a batch larger than the socket accepts fails with EMSGSIZE before sending', async (t) => {
  const kernel = new FakeKernel(() => []);
  kernel.maxSend = 200;
  const c = open(kernel);
  const msgs = Array.from({ length: 10 }, (_, i) => msg(`add chain ip t c${i}`));
  const err = await t.throwsAsync(c.batch(NfnlSubsys.NFTABLES, msgs), { instanceOf: NetlinkError });
  t.is(err.code, 'EMSGSIZE');
  t.is(kernel.sent.length, 0);
});

test('a datagram that does not parse fails the exchange with a decode error', async (t) => {
  const c = open(new FakeKernel(([req]) => [{ type: 2, payload: new ByteWriter().u32le(0).toBytes(), seq: req!.seq }]));
  await t.throwsAsync(c.request(msg('get')), { name: 'NetlinkDecodeError' });
});
