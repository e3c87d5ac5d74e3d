// ConntrackClient over a real NetlinkConnection whose "kernel" is a function (FakeKernel):
// pipelined deletes, ENOENT as already-gone, errors naming the flow, filter fallback.
import test from 'ava';
import { AttrSet, NetlinkConnection, NetlinkError, NLM_F_ACK, NLM_F_DUMP, parseMessages, splitNfPayload } from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply, doneReply, errorReply, FakeKernel } from '../../../../src/netlink/core/fake-kernel.ts';
import type { FakeReply } from '../../../../src/netlink/core/fake-kernel.ts';
import { ConntrackClient, IPPROTO, readTuple } from '../../../../src/netlink/conntrack/index.ts';
import type { Flow, Tuple } from '../../../../src/netlink/conntrack/index.ts';
import { fixture } from '../../../helpers/fixtures.ts';

const ENOENT = 2;
const EPERM = 1;
const EOPNOTSUPP = 95;

const tuple = (i: number): Tuple => ({ src: '10.0.0.1', dst: '10.96.0.10', proto: IPPROTO.UDP, srcPort: 10000 + i, dstPort: 53 });
const attrsOf = (m: InMessage): AttrSet => new AttrSet(splitNfPayload(m.payload)!.attrs, 'request');
const srcPortOf = (m: InMessage): number => readTuple(attrsOf(m).bytes(1)!).srcPort!;

function client(handler: ConstructorParameters<typeof FakeKernel>[0]): { c: ConntrackClient; k: FakeKernel; conn: NetlinkConnection } {
  const k = new FakeKernel(handler);
  const conn = new NetlinkConnection(k, { timeoutMs: 2000 });
  return { c: new ConntrackClient(conn), k, conn };
}

test('deleteMany packs requests into datagrams, ACKs only the last of each, tallies ENOENT apart from errors', async (t) => {
  const seen: InMessage[][] = [];
  const { c, k } = client((reqs) => {
    seen.push(reqs);
    const out: FakeReply[] = [];
    for (const r of reqs) {
      const port = srcPortOf(r) - 10000;
      if (port % 10 === 3) out.push(errorReply(r, ENOENT));
      else if (port === 777) out.push(errorReply(r, EPERM));
      else if (r.flags & NLM_F_ACK) out.push(ackReply(r));
    }
    return out;
  });
  const report = await c.deleteMany(Array.from({ length: 1000 }, (_, i) => tuple(i)), { perDatagram: 256 });
  t.is(k.sent.length, 4);
  t.deepEqual(seen.map((d) => d.length), [256, 256, 256, 232]);
  for (const d of seen) {
    t.deepEqual(d.map((m) => (m.flags & NLM_F_ACK ? 1 : 0)), [...new Array<number>(d.length - 1).fill(0), 1]);
    t.true(d.every((m, i) => i === 0 || m.seq === d[i - 1]!.seq + 1), 'consecutive seqs');
    t.true(d.every((m) => m.type === 0x102 && attrsOf(m).has(1)), 'IPCTNL_MSG_CT_DELETE, always with CTA_TUPLE_ORIG');
  }
  t.is(report.notFound, 100);
  t.is(report.errors.length, 1);
  t.is(report.deleted, 899);
  const e = report.errors[0]!;
  t.true(e instanceof NetlinkError);
  t.is(e.code, 'EPERM');
  t.is(e.op, 'delete conntrack udp 10.0.0.1:10777 -> 10.96.0.10:53');
});

test('delete(): true when removed, false when already gone, a NetlinkError naming the flow otherwise', async (t) => {
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    const port = srcPortOf(r) - 10000;
    return [port === 1 ? ackReply(r) : errorReply(r, port === 2 ? ENOENT : EPERM)];
  });
  t.true(await c.delete(tuple(1)));
  t.false(await c.delete(tuple(2)));
  const err = await t.throwsAsync(c.delete(tuple(3)), { instanceOf: NetlinkError });
  t.is(err.message, 'delete conntrack udp 10.0.0.1:10003 -> 10.96.0.10:53: EPERM');
  const bad = await t.throwsAsync(c.delete({ src: '10.0.0.1', dst: 'fd00::1', proto: 17, srcPort: 1, dstPort: 2 }), { instanceOf: NetlinkError });
  t.is(bad.code, 'EINVAL');
  t.regex(bad.op, /^delete conntrack udp 10\.0\.0\.1:1 -> \[fd00::1\]:2$/);
});

const flowOf = (i: number): Flow => ({
  family: 'IPv4',
  orig: tuple(i),
  reply: { ...tuple(i), src: '10.96.0.10', dst: '10.0.0.1' },
  status: 8,
  id: 0xdeadbeef,
  zone: 7,
  unknown: [],
});

test('deleting a dumped Flow sends its id and zone, so only that very entry goes', async (t) => {
  const got: AttrSet[] = [];
  const { c } = client((reqs) => {
    got.push(attrsOf(reqs[0]!));
    return [ackReply(reqs[0]!)];
  });
  await c.delete(flowOf(1));
  t.is(got[0]!.u32(12, 'net'), 0xdeadbeef, 'CTA_ID');
  t.is(got[0]!.u16(18, 'net'), 7, 'CTA_ZONE');
  await c.delete(flowOf(1), { matchId: false });
  t.false(got[1]!.has(12));
});

test('a kernel that refuses CTA_FILTER gets a plain dump, filtered here, and is not asked again', async (t) => {
  const entries = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  const requests: InMessage[] = [];
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    requests.push(r);
    if (attrsOf(r).has(25)) return [errorReply(r, EOPNOTSUPP)];
    return [...entries.map((e) => ({ type: e.type, flags: e.flags, payload: e.payload })), doneReply(r)];
  });
  const r1 = await c.dumpDetailed({ family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 } });
  t.false(r1.kernelTupleFilter);
  t.is(r1.received, 4);
  t.deepEqual(r1.flows.map((f) => f.orig.srcPort), [40000]);
  t.is(requests.length, 2);
  t.true(requests.every((r) => (r.flags & NLM_F_DUMP) === NLM_F_DUMP));
  await c.dump({ family: 'IPv4', proto: IPPROTO.TCP });
  t.is(requests.length, 3);
  t.false(attrsOf(requests[2]!).has(25));
});

test('a tuple filter without a family dumps IPv4 and IPv6 separately (CTA_FILTER needs one)', async (t) => {
  const families: number[] = [];
  const { c } = client((reqs) => {
    families.push(reqs[0]!.payload[0]!);
    return [doneReply(reqs[0]!)];
  });
  const r = await c.dumpDetailed({ proto: IPPROTO.UDP });
  t.true(r.kernelTupleFilter);
  t.deepEqual(families, [2, 10]);
  await c.dump({});
  t.deepEqual(families, [2, 10, 0]);
});

test('get() answers undefined for ENOENT and decodes the entry otherwise', async (t) => {
  const [reply] = parseMessages(fixture('conntrack/get-udp-ipv4.recv.hex'));
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    if (srcPortOf(r) === 40000) return [{ type: reply!.type, flags: 0, payload: reply!.payload }, ackReply(r)];
    return [errorReply(r, ENOENT)];
  });
  t.is(await c.get(tuple(1)), undefined);
  const f = await c.get({ src: '10.0.0.1', dst: '10.96.0.10', proto: 17, srcPort: 40000, dstPort: 53 });
  t.is(f?.reply.src, '10.96.0.10');
});

test('stats and per-CPU stats decode the kernel replies captured from conntrack -C and -S', async (t) => {
  const global = parseMessages(fixture('conntrack/stats.recv.hex'));
  const cpus = parseMessages(fixture('conntrack/stats-cpu.recv.hex'));
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    const cmd = r.type & 0xff;
    const src = cmd === 5 ? global : cpus;
    const out: FakeReply[] = src.filter((m) => m.type !== 3 && m.type !== 2).map((m) => ({ type: m.type, flags: m.flags, payload: m.payload }));
    return cmd === 5 ? [...out, ackReply(r)] : [...out, doneReply(r)];
  });
  const s = await c.stats();
  t.is(s.maxEntries, 262144);
  t.is(typeof s.entries, 'number');
  const per = await c.statsPerCpu();
  t.true(per.length >= 1);
  t.deepEqual(per.map((p) => p.cpu), per.map((_, i) => i));
  t.is(typeof per[0]!.insertFailed, 'number');
});

test('a datagram never exceeds what the socket accepts: pipeline splits by bytes too', async (t) => {
  const sizes: number[] = [];
  const { c, k } = client((reqs, raw) => {
    sizes.push(raw.length);
    return [ackReply(reqs.at(-1)!)];
  });
  k.maxSend = 1000;
  const report = await c.deleteMany(Array.from({ length: 100 }, (_, i) => tuple(i)), { perDatagram: 256 });
  t.is(report.deleted, 100);
  t.true(sizes.length > 1);
  t.true(sizes.every((n) => n <= 1000), String(sizes));
});

test('deleteMatching: one dump per family and protocol, matched here, deleted with ids', async (t) => {
  const entries = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  const dumps: InMessage[] = [];
  const deletes: InMessage[] = [];
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === 1) {
      dumps.push(r);
      return [...entries.map((e) => ({ type: e.type, flags: e.flags, payload: e.payload })), doneReply(r)];
    }
    deletes.push(...reqs);
    return [ackReply(reqs.at(-1)!)];
  });
  const report = await c.deleteMatching([
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { src: '10.96.0.10' } },
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dstPort: 9999 } },
    { family: 'IPv6', proto: IPPROTO.UDP, orig: { dst: 'fd00::10', dstPort: 53 } },
  ]);
  t.deepEqual(report, { deleted: 2, notFound: 0, errors: [], matched: 2, dumps: 2 });
  t.deepEqual(dumps.map((d) => d.payload[0]), [2, 10]);
  t.deepEqual(deletes.map((d) => srcPortOf(d)).sort(), [40000, 40002]);
  t.true(deletes.every((d) => attrsOf(d).has(12)), 'with CTA_ID');
  const bad = await t.throwsAsync(c.deleteMatching([{ orig: { dst: 'nope' } }]), { instanceOf: NetlinkError });
  t.is(bad.code, 'EINVAL');
});
