// Our ctnetlink requests against what the conntrack CLI (1.4.7) sends, seq and pid masked and
// attribute padding zeroed (libnetfilter_conntrack leaves garbage there). See CAPTURE.md.
import test from 'ava';
import {
  encodeMessage,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  parseMessages,
} from '../../../../src/netlink/core/index.ts';
import type { OutMessage } from '../../../../src/netlink/core/index.ts';
import {
  deleteRequest,
  dumpRequest,
  flushRequest,
  getRequest,
  IPPROTO,
  IPS,
  newRequest,
  statsCpuRequest,
  statsRequest,
} from '../../../../src/netlink/conntrack/index.ts';
import { fixture, hexdiff, maskSeqPid, zeroAttrPadding } from '../../../helpers/fixtures.ts';

/** One message: seq/pid masked, padding zeroed (attributes start after nlmsghdr + nfgenmsg). */
function normalize(msg: Uint8Array): Uint8Array {
  const out = maskSeqPid(msg);
  zeroAttrPadding(out, 20, out.length);
  return out;
}

const ours = (m: OutMessage, extraFlags: number): Uint8Array =>
  normalize(encodeMessage({ ...m, flags: m.flags | NLM_F_REQUEST | extraFlags }, 0));
const theirs = (path: string): Uint8Array => normalize(fixture(path));

/** The bytes of top-level attribute `type` (header included) in a captured message. */
function topAttr(msg: Uint8Array, type: number): number[] {
  let off = 20;
  while (off + 4 <= msg.length) {
    const len = msg[off]! | (msg[off + 1]! << 8);
    if (((msg[off + 2]! | (msg[off + 3]! << 8)) & 0x3fff) === type)
      return Array.from(msg.subarray(off, off + ((len + 3) & ~3)));
    off += (len + 3) & ~3;
  }
  throw new Error(`attribute ${type} not found`);
}

const udp4 = { src: '10.0.0.1', dst: '10.96.0.10', proto: IPPROTO.UDP, srcPort: 40000, dstPort: 53 };

test('GET of an IPv4 UDP entry matches conntrack -G', (t) => {
  const a = ours(getRequest({ orig: udp4 }), NLM_F_ACK);
  const e = theirs('conntrack/get-udp-ipv4.hex');
  t.deepEqual(a, e, hexdiff(a, e));
});

test('GET of an IPv6 UDP entry matches conntrack -G', (t) => {
  const a = ours(
    getRequest({ orig: { src: 'fd00::1', dst: 'fd00::10', proto: IPPROTO.UDP, srcPort: 40002, dstPort: 53 } }),
    NLM_F_ACK,
  );
  const e = theirs('conntrack/get-udp-ipv6.hex');
  t.deepEqual(a, e, hexdiff(a, e));
});

test('GET of an ICMP echo entry matches conntrack -G (code, type, id order)', (t) => {
  const a = ours(
    getRequest({
      orig: { src: '10.0.0.1', dst: '10.0.0.2', proto: IPPROTO.ICMP, icmpType: 8, icmpCode: 0, icmpId: 77 },
    }),
    NLM_F_ACK,
  );
  const e = theirs('conntrack/get-icmp-ipv4.hex');
  t.deepEqual(a, e, hexdiff(a, e));
});

test('DELETE carries the same header and CTA_TUPLE_ORIG as conntrack -D', (t) => {
  // conntrack -D echoes every attribute of the dumped entry; the kernel needs only the tuple.
  const captured = theirs('conntrack/delete-udp-ipv4.hex');
  const mine = ours(deleteRequest({ orig: udp4 }), NLM_F_ACK);
  t.deepEqual(Array.from(mine.subarray(4, 20)), Array.from(captured.subarray(4, 20)), 'type, flags, nfgenmsg');
  t.deepEqual(topAttr(mine, 1), topAttr(captured, 1), 'CTA_TUPLE_ORIG');
  t.is(parseMessages(mine).length, 1);
  t.is(mine.length, 20 + topAttr(captured, 1).length, 'nothing but the tuple');
});

test('CREATE of a UDP entry matches conntrack -I', (t) => {
  const reply = { src: '10.96.0.10', dst: '10.0.0.1', proto: IPPROTO.UDP, srcPort: 53, dstPort: 40000 };
  const a = ours(newRequest({ orig: udp4, reply, timeout: 30 }), NLM_F_ACK);
  const e = theirs('conntrack/create-udp-ipv4.hex');
  t.deepEqual(a, e, hexdiff(a, e));
});

test('CREATE of an IPv6 TCP entry has the tuples and timeout of conntrack -I', (t) => {
  const orig = { src: 'fd00::1', dst: 'fd00::10', proto: IPPROTO.TCP, srcPort: 40001, dstPort: 80 };
  const reply = { src: 'fd00::10', dst: 'fd00::1', proto: IPPROTO.TCP, srcPort: 80, dstPort: 40001 };
  const mine = ours(newRequest({ orig, reply, timeout: 300, tcpState: 3 }), NLM_F_ACK);
  const captured = theirs('conntrack/create-tcp-ipv6.hex');
  t.deepEqual(Array.from(mine.subarray(4, 20)), Array.from(captured.subarray(4, 20)));
  for (const type of [1, 2, 7]) t.deepEqual(topAttr(mine, type), topAttr(captured, type), `attribute ${type}`);
  // conntrack -I also sends the TCP flags (CTA_PROTOINFO_TCP_FLAGS_*): we send the state alone.
  t.deepEqual(
    topAttr(mine, 4).slice(0, 4).concat(topAttr(mine, 4).slice(8, 16)),
    [0x10, 0, 4, 0x80, 5, 0, 1, 0, 3, 0, 0, 0],
  );
});

test('dump requests match conntrack -L, -L -f ipv4, -L -m 5 and -L --status ASSURED', (t) => {
  const cases: [OutMessage, string][] = [
    [dumpRequest(undefined, {}, true), 'conntrack/dump-all.hex'],
    [dumpRequest('IPv4', {}, true), 'conntrack/dump-ipv4.hex'],
    [dumpRequest(undefined, { mark: { value: 5 } }, true), 'conntrack/dump-mark.hex'],
    [
      dumpRequest(undefined, { status: { value: IPS.ASSURED, mask: IPS.ASSURED } }, true),
      'conntrack/dump-status-assured.hex',
    ],
  ];
  for (const [m, path] of cases) {
    const a = ours(m, NLM_F_DUMP);
    const e = theirs(path);
    t.deepEqual(a, e, `${path}\n${hexdiff(a, e)}`);
  }
});

test('the filtered flush is a DELETE with the header of conntrack -F -f ipv4 and the attributes of a CTA_FILTER dump', (t) => {
  // conntrack-tools 1.4.7 never sends CTA_FILTER (see CAPTURE.md): the header and nfgenmsg are
  // held to its flush, the attributes to our dump request (itself checked against the naive
  // builder in codec.test.ts), byte for byte.
  const filter = {
    family: 'IPv4' as const,
    proto: IPPROTO.UDP,
    orig: { dst: '10.96.0.10', dstPort: 53 },
    reply: { src: '10.244.1.5', srcPort: 8080 },
  };
  const mine = ours(flushRequest(filter), NLM_F_ACK);
  const captured = theirs('conntrack/flush-ipv4.hex');
  t.deepEqual(
    Array.from(mine.subarray(4, 20)),
    Array.from(captured.subarray(4, 20)),
    'type DELETE, flags REQUEST|ACK, nfgenmsg AF_INET v0',
  );
  const dump = ours(dumpRequest('IPv4', filter, true), NLM_F_DUMP);
  t.deepEqual(
    Array.from(mine.subarray(20)),
    Array.from(dump.subarray(20)),
    'CTA_FILTER, CTA_TUPLE_ORIG, CTA_TUPLE_REPLY',
  );
  t.true(mine.length > 20, 'never a bare flush: that would delete every entry');
  t.is(flushRequest(filter).label, 'flush conntrack IPv4 udp orig dst 10.96.0.10:53 reply src 10.244.1.5:8080');
  t.throws(() => flushRequest({ family: 'IPv4', proto: IPPROTO.UDP }), { instanceOf: TypeError });
  t.throws(() => flushRequest({ proto: IPPROTO.SCTP, orig: { dst: '10.96.0.10', dstPort: 53 } }), {
    instanceOf: TypeError,
  });
});

test('stats requests match conntrack -S and -C', (t) => {
  const cpu = ours(statsCpuRequest(), NLM_F_DUMP);
  t.deepEqual(cpu, theirs('conntrack/stats-cpu.hex'), hexdiff(cpu, theirs('conntrack/stats-cpu.hex')));
  // conntrack -C does not ask for an ACK; the transport always does for non-dump requests.
  const global = ours(statsRequest(), 0);
  t.deepEqual(global, theirs('conntrack/stats.hex'), hexdiff(global, theirs('conntrack/stats.hex')));
});

test('the bulk DELETE encoder writes the same messages as the single one; a bad key becomes a TypeError in place', async (t) => {
  const { deleteRequests } = await import('../../../../src/netlink/conntrack/index.ts');
  const keys = [
    { orig: udp4 },
    { orig: { ...udp4, dst: 'not an address' } },
    { orig: { src: 'fd00::1', dst: 'fd00::10', proto: IPPROTO.TCP, srcPort: 1, dstPort: 80 }, zone: 3, id: 0xfffffffe },
    { orig: { src: '10.0.0.1', dst: '10.0.0.2', proto: IPPROTO.ICMP, icmpType: 8, icmpCode: 0, icmpId: 9 } },
  ];
  const bulk = deleteRequests(keys);
  t.true(bulk[1] instanceof TypeError);
  for (const i of [0, 2, 3]) {
    const m = bulk[i] as OutMessage;
    const single = deleteRequest(keys[i]!);
    t.deepEqual(Array.from(m.payload), Array.from(single.payload));
    t.is(m.type, single.type);
    t.is(m.label, single.label);
  }
  t.is((bulk[2] as OutMessage).label, 'delete conntrack tcp [fd00::1]:1 -> [fd00::10]:80 zone 3 id 4294967294');
});
