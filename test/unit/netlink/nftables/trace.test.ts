// NFT_MSG_TRACE decoding (nf_tables.h enum nft_trace_attributes), with messages written by the
// naive test builder; the real kernel's are decoded in test/kernel/explain-trace.test.ts.
import test from 'ava';
import { NetlinkDecodeError, parseMessages } from '../../../../src/netlink/core/index.ts';
import { decodeTrace } from '../../../../src/netlink/nftables/trace.ts';
import { attr, be32, bytes, cstr, nestedAttr, nlmsg } from '../../../helpers/naive-bytes.ts';

const TRACE = (10 << 8) | 17; // NFNL_SUBSYS_NFTABLES, NFT_MSG_TRACE
const nfgen = (family: number): number[] => [family, 0, 0, 0];
const be64 = (n: number): number[] => [0, 0, 0, 0, ...be32(n)];

test('a rule event: table, chain, handle, jump verdict, id, interfaces', (t) => {
  const msg = nlmsg(TRACE, 0, 0, 0, [
    ...nfgen(2),
    ...attr(1, cstr('kube-proxy-ts')),
    ...attr(2, cstr('nat-prerouting')),
    ...attr(3, be64(12)),
    ...attr(4, be32(3)),
    ...nestedAttr(5, attr(1, be32(-3 >>> 0)), attr(2, cstr('services'))),
    ...attr(6, be32(0xdeadbeef)),
    ...attr(10, be32(4)),
    ...attr(15, be32(2)),
  ]);
  const [m] = parseMessages(bytes(msg));
  t.deepEqual(decodeTrace(m!), {
    id: 0xdeadbeef,
    family: 'ip',
    table: 'kube-proxy-ts',
    chain: 'nat-prerouting',
    type: 'rule',
    ruleHandle: 12n,
    verdict: 'jump services',
    iif: 4,
    nfproto: 2,
  });
});

test('a policy event reads NFTA_TRACE_POLICY; other messages are not events', (t) => {
  const policy = nlmsg(TRACE, 0, 0, 0, [
    ...nfgen(10),
    ...attr(1, cstr('t')),
    ...attr(2, cstr('c')),
    ...attr(4, be32(1)),
    ...attr(6, be32(7)),
    ...attr(16, be32(0)),
  ]);
  const e = decodeTrace(parseMessages(bytes(policy))[0]!);
  t.is(e?.family, 'ip6');
  t.is(e?.type, 'policy');
  t.is(e?.verdict, 'drop');
  const newTable = nlmsg((10 << 8) | 0, 0, 0, 0, [...nfgen(2), ...attr(1, cstr('t'))]);
  t.is(decodeTrace(parseMessages(bytes(newTable))[0]!), undefined);
});

test('a truncated attribute is a NetlinkDecodeError, never a crash', (t) => {
  const good = nlmsg(TRACE, 0, 0, 0, [...nfgen(2), ...attr(1, cstr('kube-proxy-ts')), ...attr(6, be32(1))]);
  const m = parseMessages(bytes(good))[0]!;
  // Claim a longer attribute than there is.
  const payload = Uint8Array.from(m.payload);
  payload[4] = 0xff;
  t.throws(() => decodeTrace({ ...m, payload }), { instanceOf: NetlinkDecodeError });
});
