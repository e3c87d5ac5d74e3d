// ConntrackClient over a real NetlinkConnection whose "kernel" is a function (FakeKernel):
// pipelined deletes, ENOENT as already-gone, errors naming the flow, filter fallback.
import test from 'ava';
import {
  AttrSet,
  NetlinkConnection,
  NetlinkError,
  NLM_F_ACK,
  NLM_F_DUMP,
  parseMessages,
  splitNfPayload,
} from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply, doneReply, errorReply, FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { FakeReply } from '../../../../src/netlink/core/fake/index.ts';
import { attr, be16, be32, bytes, le32, nestedAttr } from '../../../helpers/naive-bytes.ts';
import { ConntrackClient, IPPROTO, readTuple } from '../../../../src/netlink/conntrack/index.ts';
import type { Flow, Tuple } from '../../../../src/netlink/conntrack/index.ts';
import { fixture } from '../../../helpers/fixtures.ts';

const ENOENT = 2;
const EPERM = 1;
const EOPNOTSUPP = 95;

const tuple = (i: number): Tuple => ({
  src: '10.0.0.1',
  dst: '10.96.0.10',
  proto: IPPROTO.UDP,
  srcPort: 10000 + i,
  dstPort: 53,
});
const attrsOf = (m: InMessage): AttrSet => new AttrSet(splitNfPayload(m.payload)!.attrs, 'request');
const srcPortOf = (m: InMessage): number => readTuple(attrsOf(m).bytes(1)!).srcPort!;

function client(handler: ConstructorParameters<typeof FakeKernel>[0]): {
  c: ConntrackClient;
  k: FakeKernel;
  conn: NetlinkConnection;
} {
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
  const report = await c.deleteMany(
    Array.from({ length: 1000 }, (_, i) => tuple(i)),
    { perDatagram: 256 },
  );
  t.is(k.sent.length, 4);
  t.deepEqual(
    seen.map((d) => d.length),
    [256, 256, 256, 232],
  );
  for (const d of seen) {
    t.deepEqual(
      d.map((m) => (m.flags & NLM_F_ACK ? 1 : 0)),
      [...new Array<number>(d.length - 1).fill(0), 1],
    );
    t.true(
      d.every((m, i) => i === 0 || m.seq === d[i - 1]!.seq + 1),
      'consecutive seqs',
    );
    t.true(
      d.every((m) => m.type === 0x102 && attrsOf(m).has(1)),
      'IPCTNL_MSG_CT_DELETE, always with CTA_TUPLE_ORIG',
    );
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
  const bad = await t.throwsAsync(c.delete({ src: '10.0.0.1', dst: 'fd00::1', proto: 17, srcPort: 1, dstPort: 2 }), {
    instanceOf: NetlinkError,
  });
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
  t.deepEqual(
    r1.flows.map((f) => f.orig.srcPort),
    [40000],
  );
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
    const out: FakeReply[] = src
      .filter((m) => m.type !== 3 && m.type !== 2)
      .map((m) => ({ type: m.type, flags: m.flags, payload: m.payload }));
    return cmd === 5 ? [...out, ackReply(r)] : [...out, doneReply(r)];
  });
  const s = await c.stats();
  t.is(s.maxEntries, 262144);
  t.is(typeof s.entries, 'number');
  const per = await c.statsPerCpu();
  t.true(per.length >= 1);
  t.deepEqual(
    per.map((p) => p.cpu),
    per.map((_, i) => i),
  );
  t.is(typeof per[0]!.insertFailed, 'number');
});

test('a datagram never exceeds what the socket accepts: pipeline splits by bytes too', async (t) => {
  const sizes: number[] = [];
  const { c, k } = client((reqs, raw) => {
    sizes.push(raw.length);
    return [ackReply(reqs.at(-1)!)];
  });
  k.maxSend = 1000;
  const report = await c.deleteMany(
    Array.from({ length: 100 }, (_, i) => tuple(i)),
    { perDatagram: 256 },
  );
  t.is(report.deleted, 100);
  t.true(sizes.length > 1);
  t.true(
    sizes.every((n) => n <= 1000),
    String(sizes),
  );
});

/** IPCTNL_MSG_CT_GET_STATS answer holding `entries` (CTA_STATS_GLOBAL_ENTRIES, MAX_ENTRIES). */
const statsReply = (entries: number): FakeReply => ({
  type: 0x105,
  flags: 0,
  payload: bytes([0, 0, 0, 0, ...attr(1, be32(entries)), ...attr(2, be32(262144))]),
});
const CT_GET = 1;
const CT_DELETE = 2;
const CT_GET_STATS = 5;
const EINVAL = 22;

test('deleteMatching: one dump per family and protocol, matched here, deleted with ids (a kernel without filtered flush)', async (t) => {
  const entries = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  const dumps: InMessage[] = [];
  const deletes: InMessage[] = [];
  const flushes: InMessage[] = [];
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === CT_GET) {
      dumps.push(r);
      return [...entries.map((e) => ({ type: e.type, flags: e.flags, payload: e.payload })), doneReply(r)];
    }
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(4), ackReply(r)];
    // As 6.1 does: a DELETE with CTA_FILTER and a partial CTA_TUPLE_ORIG is refused (EINVAL).
    if (attrsOf(r).has(25)) {
      flushes.push(r);
      return [errorReply(r, EINVAL)];
    }
    deletes.push(...reqs);
    return [ackReply(reqs.at(-1)!)];
  });
  const report = await c.deleteMatching([
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { src: '10.96.0.10' } },
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dstPort: 9999 } },
    { family: 'IPv6', proto: IPPROTO.UDP, orig: { dst: 'fd00::10', dstPort: 53 } },
  ]);
  t.deepEqual(report, { deleted: 2, notFound: 0, errors: [], matched: 2, dumps: 2, flushes: 0 });
  t.is(flushes.length, 1, 'one filtered flush tried, refused, not tried again');
  t.false(c.kernelFlushFilter);
  t.deepEqual(
    dumps.map((d) => d.payload[0]),
    [2, 10],
  );
  t.deepEqual(deletes.map((d) => srcPortOf(d)).sort(), [40000, 40002]);
  t.true(
    deletes.every((d) => attrsOf(d).has(12)),
    'with CTA_ID',
  );
  const bad = await t.throwsAsync(c.deleteMatching([{ orig: { dst: 'nope' } }]), { instanceOf: NetlinkError });
  t.is(bad.code, 'EINVAL');
});

test('flushMatching: one DELETE with CTA_FILTER and partial tuples; the count is the table shrinking', async (t) => {
  let entries = 10_000;
  const seen: InMessage[] = [];
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    seen.push(r);
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(entries), ackReply(r)];
    if ((r.type & 0xff) === CT_DELETE) entries -= 9_000;
    return [ackReply(r)];
  });
  t.is(c.kernelFlushFilter, undefined);
  const filter = {
    family: 'IPv4' as const,
    proto: IPPROTO.UDP,
    orig: { dst: '10.96.0.10', dstPort: 53 },
    reply: { src: '10.244.1.5', srcPort: 8080 },
  };
  t.deepEqual(await c.flushMatching(filter), { deleted: 9_000 });
  t.true(c.kernelFlushFilter);
  t.deepEqual(
    seen.map((m) => m.type),
    [0x105, 0x102, 0x105],
    'stats, DELETE, stats',
  );
  // Expected bytes from the naive builder (flags host order; tuples hold only what is matched).
  const F_IP_SRC = 1;
  const F_IP_DST = 2;
  const F_PROTO_NUM = 8;
  const F_SRC_PORT = 16;
  const F_DST_PORT = 32;
  t.deepEqual(Array.from(seen[1]!.payload), [
    2,
    0,
    0,
    0,
    ...nestedAttr(
      25,
      attr(1, le32(F_PROTO_NUM | F_IP_DST | F_DST_PORT)),
      attr(2, le32(F_PROTO_NUM | F_IP_SRC | F_SRC_PORT)),
    ),
    ...nestedAttr(1, nestedAttr(1, attr(2, [10, 96, 0, 10])), nestedAttr(2, attr(1, [17]), attr(3, be16(53)))),
    ...nestedAttr(2, nestedAttr(1, attr(1, [10, 244, 1, 5])), nestedAttr(2, attr(1, [17]), attr(2, be16(8080)))),
  ]);
  t.is(seen[1]!.flags & NLM_F_ACK, NLM_F_ACK);
  // Traffic in between can make the table grow: never a negative count.
  entries = 100;
  const grow = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(entries++ * 2), ackReply(r)];
    return [ackReply(r)];
  });
  t.deepEqual(await grow.c.flushMatching(filter), { deleted: 0 });
});

test('flushMatching answers undefined, sending nothing, for filters the kernel would not match exactly', async (t) => {
  const seen: InMessage[] = [];
  const { c } = client((reqs) => {
    seen.push(...reqs);
    return [ackReply(reqs[0]!)];
  });
  const inexact = [
    { family: 'IPv6' as const, proto: IPPROTO.UDP, orig: { dst: 'fd00::10', dstPort: 53 } }, // IPv6 address match inverted
    { family: 'IPv4' as const, proto: IPPROTO.SCTP, orig: { dst: '10.96.0.10', dstPort: 53 } }, // SCTP ports not compared
    { family: 'IPv4' as const, proto: IPPROTO.UDP }, // every UDP entry: never by flush
    { family: 'IPv4' as const, orig: { dst: '10.96.0.10' } }, // no protocol
    {
      family: 'IPv4' as const,
      proto: IPPROTO.UDP,
      orig: { src: '10.0.0.1', dst: '10.96.0.10', srcPort: 1, dstPort: 53 },
    }, // a full tuple: 6.1 would delete that entry
    { family: 'IPv4' as const, proto: IPPROTO.UDP, orig: { dstPort: 53 }, mark: { value: 1 } },
    { family: 'IPv4' as const, proto: IPPROTO.UDP, orig: { dstPort: 70000 } },
    { proto: IPPROTO.UDP, orig: { dst: 'not an address', dstPort: 53 } },
  ];
  for (const f of inexact) {
    t.false(c.canFlush(f));
    t.is(await c.flushMatching(f), undefined);
  }
  t.is(seen.length, 0);
  t.true(c.canFlush({ family: 'IPv6', proto: IPPROTO.UDP, orig: { dstPort: 53 } }), 'IPv6 without addresses is exact');
  t.true(
    c.canFlush({ proto: IPPROTO.TCP, orig: { dst: '10.96.0.10', dstPort: 80 } }),
    'the family follows from the address',
  );
  const off = new ConntrackClient(new NetlinkConnection(new FakeKernel(() => []), { timeoutMs: 100 }), {
    kernelFlushFilter: false,
  });
  t.false(off.canFlush({ family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 } }));
});

test('a kernel that refuses the filtered flush is not asked again; one that did flush only skips the refused filter', async (t) => {
  const refused: InMessage[] = [];
  const old = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(5), ackReply(r)];
    refused.push(r);
    return [errorReply(r, EOPNOTSUPP)];
  });
  const f = { family: 'IPv4' as const, proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 } };
  t.is(await old.c.flushMatching(f), undefined);
  t.is(await old.c.flushMatching(f), undefined);
  t.is(refused.length, 1);
  t.false(old.c.kernelFlushFilter);

  let n = 0;
  const recent = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(5), ackReply(r)];
    return [n++ === 1 ? errorReply(r, EINVAL) : ackReply(r)];
  });
  t.deepEqual(await recent.c.flushMatching(f), { deleted: 0 });
  t.is(await recent.c.flushMatching(f), undefined, 'this one refused');
  t.true(recent.c.kernelFlushFilter, 'still a kernel that flushes by filter');
  t.deepEqual(await recent.c.flushMatching(f), { deleted: 0 });
  const eperm = client((reqs) => {
    const r = reqs[0]!;
    if ((r.type & 0xff) === CT_GET_STATS) return [statsReply(5), ackReply(r)];
    return [errorReply(r, EPERM)];
  });
  const err = await t.throwsAsync(eperm.c.flushMatching(f), { instanceOf: NetlinkError });
  t.is(err.code, 'EPERM');
  t.is(err.op, 'flush conntrack IPv4 udp orig dst 10.96.0.10:53');
});

test('deleteMatching flushes the exact filters and dumps the rest', async (t) => {
  const entries = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  let size = 100;
  const kinds: string[] = [];
  const { c } = client((reqs) => {
    const r = reqs[0]!;
    const cmd = r.type & 0xff;
    if (cmd === CT_GET_STATS) return [statsReply(size), ackReply(r)];
    if (cmd === CT_GET) {
      kinds.push(`dump ${r.payload[0]}`);
      return [...entries.map((e) => ({ type: e.type, flags: e.flags, payload: e.payload })), doneReply(r)];
    }
    if (attrsOf(r).has(25)) {
      kinds.push('flush');
      size -= 7;
      return [ackReply(r)];
    }
    kinds.push(`delete ${reqs.length}`);
    return [ackReply(reqs.at(-1)!)];
  });
  const report = await c.deleteMatching([
    { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.99', dstPort: 53 }, reply: { src: '10.244.1.5' } },
    { family: 'IPv6', proto: IPPROTO.UDP, orig: { dst: 'fd00::10', dstPort: 53 } },
  ]);
  t.deepEqual(kinds, ['flush', 'dump 10', 'delete 1']);
  t.deepEqual(report, { deleted: 8, notFound: 0, errors: [], matched: 8, dumps: 1, flushes: 1 });
  kinds.length = 0;
  const viaDump = await c.deleteMatching(
    [{ family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 } }],
    { kernelFlush: false },
  );
  t.deepEqual(kinds, ['dump 2', 'delete 1']);
  t.like(viaDump, { deleted: 1, flushes: 0, dumps: 1 });
});
