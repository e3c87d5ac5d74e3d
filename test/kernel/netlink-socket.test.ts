// Our netlink socket addon (native/netlink-socket) through src/netlink/core's RawSocket, against
// the machine's kernel in fresh namespaces: floods of error replies, truncation, close inside a
// callback, forced buffer sizes, the kernel's extended ACK text, and unref.
import test from 'ava';
import { fileURLToPath } from 'node:url';
import { netnsFor } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/netlink-socket.ts';

const S = new URL('./scenarios/netlink-socket.ts', import.meta.url).href;

test('5,000 error replies to one datagram overflow the receive buffer: ENOBUFS, no crash, the socket goes on', async (t) => {
  // The `netlink` package aborted the process here ("terminate called after throwing Napi::Error").
  const ns = await netnsFor(t, 'nls-overflow');
  const a = await ns.agent();
  // A 128 KiB receive buffer (64 KiB doubled) whatever the machine's rmem_max: ~160 replies fit.
  const r = await a.call<Scenario.OverflowResult>(S, 'overflowErrors', 5000, { recvBufferBytes: 64 << 10 });
  t.like(r.error, { name: 'NetlinkError', code: 'ENOBUFS' });
  t.is(r.after, 'ok', 'the next request on the same connection is answered');
});

test('with forced buffers and capped ACKs, 20,000 failing requests in one datagram each get their own ENODEV', async (t) => {
  const ns = await netnsFor(t, 'nls-many');
  const a = await ns.agent();
  const r = await a.call<Scenario.OverflowResult>(S, 'overflowErrors', 20_000, {
    forceBuffers: true,
    recvBufferBytes: 32 << 20,
    capAck: true,
  });
  t.is(r.error, null);
  t.is(r.failed, 20_000);
  t.deepEqual(r.codes, ['ENODEV']);
  t.is(r.recvBuffer, 64 << 20, 'SO_RCVBUFFORCE: the kernel doubles the 32 MiB asked for');
  t.is(r.after, 'ok');
});

test('SO_SNDBUFFORCE/SO_RCVBUFFORCE pass net.core.{w,r}mem_max; the plain options stop there', async (t) => {
  const ns = await netnsFor(t, 'nls-bufs');
  const a = await ns.agent();
  const bytes = 16 << 20;
  const r = await a.call<ReturnType<typeof Scenario.bufferSizes>>(S, 'bufferSizes', bytes);
  t.true(r.wmemMax < bytes && r.rmemMax < bytes, 'the machine caps below 16 MiB (else this test proves nothing)');
  t.deepEqual(r.plain, { send: 2 * r.wmemMax, recv: 2 * r.rmemMax });
  t.deepEqual(r.forced, { send: 2 * bytes, recv: 2 * bytes });
  t.is(r.maxSendBytes, 2 * bytes - 32);
});

test('a batch past the capped send buffer goes through in one datagram with forced buffers', async (t) => {
  const ns = await netnsFor(t, 'nls-bigbatch');
  const a = await ns.agent();
  // 20,000 tables: about 1.4 MB of batch. 256 KiB asked for: at most 512 KiB, whatever wmem_max.
  const capped = await a.call<Scenario.ErrorView | null>(S, 'bigBatch', 20_000, 256 << 10, false);
  t.like(capped, { code: 'EMSGSIZE' });
  t.is(await a.call(S, 'bigBatch', 20_000, 64 << 20, true), null);
  // The first and the last table of the batch are there (nft itself cannot list 20,000 tables).
  for (const i of [0, 19_999]) {
    const name = `kpts-table-with-a-long-name-${i}`;
    t.regex(await ns.run('nft', 'list', 'table', 'ip', name), new RegExp(`table ip ${name}`));
  }
});

test("NETLINK_EXT_ACK: a refused nf_tables message carries the kernel's text and the attribute's offset", async (t) => {
  const ns = await netnsFor(t, 'nls-extack');
  const a = await ns.agent();
  const on = await a.call<Awaited<ReturnType<typeof Scenario.refusedWithExtAck>>>(S, 'refusedWithExtAck', true);
  t.is(on.view.code, 'ERANGE');
  t.truthy(on.extack?.msg, 'the kernel said why');
  t.true(typeof on.extack?.offset === 'number' && on.extack.offset > 16, 'offset points into the message');
  t.true(on.view.message.endsWith(`ERANGE (${on.extack!.msg})`), on.view.message);
  const off = await a.call<Awaited<ReturnType<typeof Scenario.refusedWithExtAck>>>(S, 'refusedWithExtAck', false);
  t.is(off.view.code, 'ERANGE');
  t.is(off.extack, undefined, 'without NETLINK_EXT_ACK the kernel adds nothing');
});

test('close() inside the receive callback, with datagrams still queued, stops the callbacks', async (t) => {
  const ns = await netnsFor(t, 'nls-close');
  const a = await ns.agent();
  t.deepEqual(await a.call(S, 'closeInsideCallback'), { seen: 1, closedOk: true });
});

test('a datagram larger than a fixed receive buffer is reported as ENOBUFS; the next reply arrives', async (t) => {
  const ns = await netnsFor(t, 'nls-trunc');
  const a = await ns.agent();
  const r = await a.call<{ first: Scenario.ErrorView | 'ok'; second: Scenario.ErrorView | 'ok' }>(S, 'truncatedReply');
  t.like(r.first, { code: 'ENOBUFS' });
  t.like(r.second, { code: 'ENODEV' });
});

test('a listening socket does not keep the process alive', async (t) => {
  const ns = await netnsFor(t, 'nls-unref');
  const core = fileURLToPath(new URL('../../src/netlink/core/index.ts', import.meta.url));
  const script = `import { openRawSocket } from ${JSON.stringify(core)};
const s = openRawSocket(0, { groups: [1] });
s.listen(() => {}, () => {});
console.log('listening', s.localPort > 0);`;
  // The test's time-out bounds this: a socket that kept the loop alive would never exit.
  const out = await ns.run(process.execPath, '--input-type=module', '-e', script);
  t.is(out.trim(), 'listening true');
});
