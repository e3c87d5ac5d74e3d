// NetlinkError keeps its parts apart: the operation label, the errno, what else is known
// (detail) and the refused request's sequence number; callers test the errno, not the text.
import test from 'ava';
import {
  AF_INET,
  errnoNumber,
  isNotFound,
  isTimeout,
  NetlinkConnection,
  NetlinkDecodeError,
  NetlinkError,
  nfMessage,
  NfnlSubsys,
  parseMessages,
} from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { OutMessage } from '../../../../src/netlink/core/index.ts';
import { errorReply } from '../../../../src/netlink/core/fake/index.ts';

const msg = (label: string): OutMessage => nfMessage(NfnlSubsys.NFTABLES, 1, AF_INET, 0, label, (w) => w.str(1, label));

test('the label, the detail and the errno are separate fields; the message joins them', (t) => {
  const e = new NetlinkError('get ipvs info', errnoNumber('EIO'), undefined, { detail: 'no reply' });
  t.is(e.op, 'get ipvs info');
  t.is(e.detail, 'no reply');
  t.is(e.code, 'EIO');
  t.is(e.message, 'get ipvs info: no reply: EIO');
  t.is(new NetlinkError('x', 2).detail, undefined);
});

test('a kernel refusal carries the sequence number of the refused request', async (t) => {
  const kernel = new FakeKernel(([req]) => [errorReply(req!, 2)]);
  const c = new NetlinkConnection(kernel, { timeoutMs: 1000 });
  const err = await t.throwsAsync(c.request(msg('get table ip nope')), { instanceOf: NetlinkError });
  const [sent] = parseMessages(kernel.sent[0]!);
  t.is(err.seq, sent!.seq);
  t.is(err.op, 'get table ip nope');
  t.true(isNotFound(err));
});

test('a time-out names the operation in op and the wait in detail', async (t) => {
  const c = new NetlinkConnection(new FakeKernel(() => []), { timeoutMs: 20 });
  const err = await t.throwsAsync(c.request(msg('get slow')), { instanceOf: NetlinkError });
  t.true(isTimeout(err));
  t.is(err.op, 'get slow');
  t.is(err.detail, 'no reply within 20 ms');
});

test("verb and kind are the label's first two words; a label of one word has no kind", (t) => {
  const e = new NetlinkError('add chain ip kube-proxy services', errnoNumber('EEXIST'));
  t.is(e.verb, 'add');
  t.is(e.kind, 'chain');
  const r = new NetlinkError('receive', errnoNumber('ENOBUFS'));
  t.is(r.verb, 'receive');
  t.is(r.kind, '');
});

test('a time-out of a batch names its first message in op and the batch size in messages', async (t) => {
  const c = new NetlinkConnection(new FakeKernel(() => []), { timeoutMs: 20 });
  const msgs = [msg('add table ip t'), msg('add chain ip t a'), msg('add chain ip t b')];
  const err = await t.throwsAsync(c.batch(NfnlSubsys.NFTABLES, msgs), { instanceOf: NetlinkError });
  t.true(isTimeout(err));
  t.is(err.op, 'add table ip t');
  t.is(err.messages, 3);
  t.is(err.message, 'add table ip t (first of 3 messages sent together): no reply within 20 ms: ETIMEDOUT');
});

test('a decode error keeps where, offset and reason apart', (t) => {
  const e = new NetlinkDecodeError('nfgenmsg', 4, 'payload shorter than its header');
  t.is(e.where, 'nfgenmsg');
  t.is(e.offset, 4);
  t.is(e.reason, 'payload shorter than its header');
  t.is(e.message, 'nfgenmsg at offset 4: payload shorter than its header');
});
