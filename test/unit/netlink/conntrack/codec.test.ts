// Decoding real kernel replies, the CTA_FILTER encoding against a naive builder, round trips
// and hostile input.
import test from 'ava';
import fc from 'fast-check';
import {
  AttrWriter,
  encodeMessage,
  NetlinkDecodeError,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  parseMessages,
} from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import {
  decodeFlow,
  decodeReply,
  dumpRequest,
  flowMatches,
  IPPROTO,
  readTuple,
  TCP_STATE_NAMES,
  tupleText,
  writeNewFlow,
  writeTuple,
} from '../../../../src/netlink/conntrack/index.ts';
import type { Flow, FlowFilter, Tuple } from '../../../../src/netlink/conntrack/index.ts';
import { attr, be16, bytes, le16, le32, nestedAttr, nlmsg } from '../../../helpers/naive-bytes.ts';
import { fixture } from '../../../helpers/fixtures.ts';

const strip = (f: Flow): Omit<Flow, 'id' | 'unknown'> => {
  const { id: _id, unknown: _u, ...rest } = f;
  return rest;
};

test('the kernel dump of four entries decodes: IPv4/IPv6, UDP/TCP/ICMP, state, mark, unknown kept', (t) => {
  const msgs = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  const flows = msgs.map((m, i) => decodeReply(m, `entry ${i}`));
  t.deepEqual(flows.map((f) => `${f.family} ${tupleText(f.orig)} | ${tupleText(f.reply)}`).sort(), [
    'IPv4 icmp 10.0.0.1 -> 10.0.0.2 type 8 code 0 id 77 | icmp 10.0.0.2 -> 10.0.0.1 type 0 code 0 id 77',
    'IPv4 tcp 10.0.0.1:40001 -> 10.96.0.10:80 | tcp 10.96.0.10:80 -> 10.0.0.1:40001',
    'IPv4 udp 10.0.0.1:40000 -> 10.96.0.10:53 | udp 10.96.0.10:53 -> 10.0.0.1:40000',
    'IPv6 udp [fd00::1]:40002 -> [fd00::10]:53 | udp [fd00::10]:53 -> [fd00::1]:40002',
  ]);
  const tcp = flows.find((f) => f.orig.proto === IPPROTO.TCP)!;
  t.is(TCP_STATE_NAMES[tcp.tcpState!], 'ESTABLISHED');
  t.is(tcp.mark, 5);
  t.is(tcp.status & 8, 8, 'IPS_CONFIRMED');
  t.true(tcp.timeout! > 200 && tcp.timeout! <= 300);
  t.is(typeof tcp.id, 'number');
  // CTA_SYNPROXY (24) is not interpreted, and kept as received.
  t.deepEqual(
    tcp.unknown.map((u) => [u.type, u.nested, u.data.length]),
    [[24, true, 24]],
  );
});

test('the kernel answer to a GET decodes into the entry', (t) => {
  const [m] = parseMessages(fixture('conntrack/get-udp-ipv4.recv.hex'));
  const f = decodeReply(m!, 'get');
  t.deepEqual(f.orig, { src: '10.0.0.1', dst: '10.96.0.10', proto: 17, srcPort: 40000, dstPort: 53 });
  t.deepEqual(f.reply, { src: '10.96.0.10', dst: '10.0.0.1', proto: 17, srcPort: 53, dstPort: 40000 });
});

// CTA_FILTER bytes, written field by field (CTA_FILTER = 25, ORIG_FLAGS = 1, REPLY_FLAGS = 2;
// flags host order; CTA_TUPLE_ORIG = 1, CTA_TUPLE_IP = 1, CTA_IP_V4_DST = 2, CTA_TUPLE_PROTO = 2,
// CTA_PROTO_NUM = 1, CTA_PROTO_SRC_PORT = 2, CTA_PROTO_DST_PORT = 3; CTA_TUPLE_REPLY = 2, CTA_IP_V4_SRC = 1).
const F_IP_SRC = 1;
const F_IP_DST = 2;
const F_PROTO_NUM = 8;
const F_SRC_PORT = 16;
const F_DST_PORT = 32;
const dumpMsg = (family: number, attrs: number[]): number[] =>
  nlmsg((1 << 8) | 1, NLM_F_REQUEST | NLM_F_DUMP, 0, 0, [family, 0, 0, 0, ...attrs]);
const encoded = (f: FlowFilter, family: 'IPv4' | 'IPv6' | undefined): number[] =>
  Array.from(encodeMessage({ ...dumpRequest(family, f, true), flags: NLM_F_REQUEST | NLM_F_DUMP }, 0));

test('a dump filtered by UDP, original destination 10.96.0.10:53 and reply source 10.244.1.5', (t) => {
  const f: FlowFilter = { proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { src: '10.244.1.5' } };
  const expected = dumpMsg(2, [
    ...nestedAttr(25, attr(1, le32(F_PROTO_NUM | F_IP_DST | F_DST_PORT)), attr(2, le32(F_PROTO_NUM | F_IP_SRC))),
    ...nestedAttr(1, nestedAttr(1, attr(2, [10, 96, 0, 10])), nestedAttr(2, attr(1, [17]), attr(3, be16(53)))),
    ...nestedAttr(2, nestedAttr(1, attr(1, [10, 244, 1, 5])), nestedAttr(2, attr(1, [17]))),
  ]);
  t.deepEqual(encoded(f, 'IPv4'), expected);
});

test('a dump filtered by protocol and source port alone', (t) => {
  const f: FlowFilter = { family: 'IPv4', proto: IPPROTO.TCP, orig: { srcPort: 1234 } };
  const expected = dumpMsg(2, [
    ...nestedAttr(25, attr(1, le32(F_PROTO_NUM | F_SRC_PORT)), attr(2, le32(0))),
    ...nestedAttr(1, nestedAttr(2, attr(1, [6]), attr(2, be16(1234)))),
  ]);
  t.deepEqual(encoded(f, 'IPv4'), expected);
});

test('IPv6 addresses and port-without-protocol stay client-side; mark and zone go to the kernel', (t) => {
  // The kernel's IPv6 address match is inverted (see filter.ts): only the protocol is sent.
  const v6: FlowFilter = { proto: IPPROTO.UDP, orig: { dst: 'fd00::10', dstPort: 53 } };
  t.deepEqual(
    encoded(v6, 'IPv6'),
    dumpMsg(10, [
      ...nestedAttr(25, attr(1, le32(F_PROTO_NUM | F_DST_PORT)), attr(2, le32(0))),
      ...nestedAttr(1, nestedAttr(2, attr(1, [17]), attr(3, be16(53)))),
    ]),
  );
  t.deepEqual(encoded({ family: 'IPv4', orig: { dstPort: 53 } }, 'IPv4'), dumpMsg(2, []));
  t.deepEqual(
    encoded({ mark: { value: 0x4000, mask: 0x4000 }, zone: 3 }, undefined),
    dumpMsg(0, [...attr(8, [0, 0, 0x40, 0]), ...attr(21, [0, 0, 0x40, 0]), ...attr(18, be16(3))]),
  );
  t.deepEqual(le16(1), [1, 0]);
});

test('without the tuple filter only mark/status/zone are written', (t) => {
  const f: FlowFilter = { proto: IPPROTO.UDP, orig: { dst: '10.96.0.10' }, mark: { value: 1 } };
  const m = dumpRequest('IPv4', f, false);
  t.deepEqual(Array.from(m.payload), [2, 0, 0, 0, ...attr(8, [0, 0, 0, 1]), ...attr(21, [255, 255, 255, 255])]);
});

const baseFlow = (over: Partial<Flow>): Flow => ({
  family: 'IPv4',
  orig: { src: '10.0.0.1', dst: '10.96.0.10', proto: 17, srcPort: 40000, dstPort: 53 },
  reply: { src: '10.244.1.5', dst: '10.0.0.1', proto: 17, srcPort: 5353, dstPort: 40000 },
  status: 0x18a,
  mark: 0x4001,
  unknown: [],
  ...over,
});

test('the client-side filter checks every field', (t) => {
  const f = baseFlow({});
  t.true(flowMatches({}, f));
  t.true(
    flowMatches(
      { family: 'IPv4', proto: 17, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { src: '10.244.1.5' } },
      f,
    ),
  );
  t.false(flowMatches({ family: 'IPv6' }, f));
  t.false(flowMatches({ proto: 6 }, f));
  t.false(flowMatches({ orig: { dstPort: 54 } }, f));
  t.false(flowMatches({ reply: { src: '10.244.1.6' } }, f));
  t.true(flowMatches({ mark: { value: 0x4000, mask: 0x4000 } }, f));
  t.false(flowMatches({ mark: { value: 0x4000 } }, f));
  t.true(flowMatches({ status: { value: 0x8, mask: 0x8 } }, f));
  t.false(flowMatches({ status: { value: 0x4, mask: 0x4 } }, f));
  t.true(flowMatches({ zone: 0 }, f));
  const v6 = baseFlow({
    family: 'IPv6',
    orig: { src: 'fd00::1', dst: 'fd00::10', proto: 17, srcPort: 1, dstPort: 53 },
  });
  t.true(flowMatches({ orig: { dst: 'fd00:0:0::10' } }, v6), 'addresses compare in canonical form');
});

// Round trips: any tuple we encode decodes to itself, and any flow we create decodes too.
const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((b) => b.join('.'));
const v6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':'));
const canon = (a: string): string => (a.includes(':') ? new URL(`http://[${a}]`).hostname.slice(1, -1) : a);
const portTuple = (addr: fc.Arbitrary<string>): fc.Arbitrary<Tuple> =>
  fc.record({
    src: addr,
    dst: addr,
    proto: fc.constantFrom(6, 17, 132, 33, 136),
    srcPort: fc.nat(0xffff),
    dstPort: fc.nat(0xffff),
  });
const icmpTuple = (addr: fc.Arbitrary<string>, proto: number): fc.Arbitrary<Tuple> =>
  fc.record({
    src: addr,
    dst: addr,
    proto: fc.constant(proto),
    icmpId: fc.nat(0xffff),
    icmpType: fc.nat(255),
    icmpCode: fc.nat(255),
  });
const anyTuple = fc
  .oneof(portTuple(v4), portTuple(v6), icmpTuple(v4, 1), icmpTuple(v6, 58))
  .chain((t) => fc.option(fc.nat(0xffff), { nil: undefined }).map((zone) => (zone === undefined ? t : { ...t, zone })));

test('tuples round-trip through the encoder and decoder', (t) => {
  fc.assert(
    fc.property(anyTuple, (tuple) => {
      const w = new AttrWriter();
      writeTuple(w, tuple);
      const back = readTuple(w.finish());
      const want = { ...tuple, src: canon(tuple.src), dst: canon(tuple.dst) };
      t.deepEqual(back, want);
    }),
    { numRuns: 500 },
  );
});

test('created flows decode back (orig, reply, status, timeout, mark, zone, TCP state)', (t) => {
  fc.assert(
    fc.property(
      portTuple(v4),
      fc.nat(0xffffffff),
      fc.nat(0xffffffff),
      fc.nat(0xffffffff),
      fc.nat(0xffff),
      fc.nat(9),
      (orig, status, timeout, mark, zone, st) => {
        const reply = {
          src: orig.dst,
          dst: orig.src,
          proto: orig.proto,
          srcPort: orig.dstPort!,
          dstPort: orig.srcPort!,
        };
        const w = new AttrWriter();
        writeNewFlow(w, { orig, reply, status, timeout, mark, zone, tcpState: st });
        const f = decodeFlow(2, w.finish());
        t.deepEqual(strip(f), { family: 'IPv4', orig, reply, status, timeout, mark, zone, tcpState: st });
      },
    ),
    { numRuns: 200 },
  );
});

const ctMsg = (payload: Uint8Array): InMessage => ({ type: 0x100, flags: 2, seq: 1, pid: 0, payload });

test('random bytes never crash the decoder: a Flow or a NetlinkDecodeError', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (b) => {
      try {
        decodeReply(ctMsg(b), 'fuzz');
      } catch (e) {
        if (!(e instanceof NetlinkDecodeError)) throw e;
      }
    }),
    { numRuns: 3000 },
  );
  t.pass();
});

test('every truncation and every single-byte corruption of a real reply is handled', (t) => {
  const msgs = parseMessages(fixture('conntrack/dump-all.recv.hex'));
  let errors = 0;
  for (const m of msgs) {
    for (let n = 0; n < m.payload.length; n++) {
      try {
        decodeReply(ctMsg(m.payload.subarray(0, n)), 'truncated');
      } catch (e) {
        t.true(e instanceof NetlinkDecodeError, String(e));
        errors++;
      }
    }
    for (let i = 0; i < m.payload.length; i++) {
      for (const v of [0, 0xff, m.payload[i]! ^ 0x80]) {
        const p = Uint8Array.from(m.payload);
        p[i] = v;
        try {
          decodeReply(ctMsg(p), 'corrupt');
        } catch (e) {
          if (!(e instanceof NetlinkDecodeError)) t.fail(`offset ${i}=${v}: ${String(e)}`);
        }
      }
    }
  }
  t.true(errors > 0);
});

test('structural lies get a NetlinkDecodeError naming the place', (t) => {
  const noReply = bytes([
    2,
    0,
    0,
    0,
    ...nestedAttr(1, nestedAttr(1, attr(1, [1, 2, 3, 4]), attr(2, [1, 2, 3, 4])), nestedAttr(2, attr(1, [17]))),
  ]);
  t.throws(() => decodeReply(ctMsg(noReply), 'dump entry 7'), {
    instanceOf: NetlinkDecodeError,
    message: /dump entry 7.*CTA_TUPLE_REPLY/,
  });
  const shortAddr = bytes([
    2,
    0,
    0,
    0,
    ...nestedAttr(1, nestedAttr(1, attr(1, [1, 2, 3]), attr(2, [1, 2, 3, 4]))),
    ...nestedAttr(2),
  ]);
  t.throws(() => decodeReply(ctMsg(shortAddr), 'x'), {
    instanceOf: NetlinkDecodeError,
    message: /3 bytes, expected 4/,
  });
  t.throws(() => decodeReply({ ...ctMsg(bytes([2, 0, 0, 0])), type: 0x101 }, 'x'), {
    instanceOf: NetlinkDecodeError,
    message: /unexpected message type/,
  });
  t.throws(() => decodeReply(ctMsg(bytes([7, 0, 0, 0, ...nestedAttr(1), ...nestedAttr(2)])), 'x'), {
    instanceOf: NetlinkDecodeError,
  });
});
