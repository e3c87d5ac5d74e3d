// Decoding links and addresses the kernel sent to iproute2; robustness on hostile bytes.
import test from 'ava';
import fc from 'fast-check';
import { NetlinkDecodeError, parseMessages } from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import {
  decodeAddr,
  decodeLink,
  IFA_F_NOPREFIXROUTE,
  IFA_F_PERMANENT,
  newAddrMessage,
  newLinkMessage,
  RTM_NEWADDR,
  RTM_NEWLINK,
} from '../../../../src/netlink/route/index.ts';
import { fixtureLines } from '../ipset/fixture-lines.ts';

const msgs = (f: string): InMessage[] => fixtureLines(f).flatMap((l) => parseMessages(l));

test('a link from RTM_GETLINK', (t) => {
  const [link] = msgs('route/link-get.recv.hex')
    .filter((m) => m.type === RTM_NEWLINK)
    .map(decodeLink);
  t.like(link, { index: 2, name: 'kube-ipvs0', kind: 'ifb', up: false, mtu: 1500, operState: 'down', linkType: 1 });
  t.regex(link!.mac!, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
});

test('links and addresses from a full `ip addr show` exchange', (t) => {
  const all = msgs('route/addr-dump.recv.hex');
  const links = all.filter((m) => m.type === RTM_NEWLINK).map(decodeLink);
  t.deepEqual(
    links.map((l) => [l.index, l.name, l.kind]),
    [
      [1, 'lo', undefined],
      [2, 'kube-ipvs0', 'ifb'],
    ],
  );
  const addrs = all.filter((m) => m.type === RTM_NEWADDR).map(decodeAddr);
  t.deepEqual(
    addrs.map((a) => [a.index, a.family, a.address, a.prefixLen, a.scope, a.label]),
    [
      [1, 'IPv4', '127.0.0.1', 8, 254, 'lo'],
      [2, 'IPv4', '10.96.0.1', 32, 0, 'kube-ipvs0'],
      [1, 'IPv6', '::1', 128, 254, undefined],
      [2, 'IPv6', 'fd00::1', 128, 0, undefined],
    ],
  );
  t.is(addrs[3]!.flags, IFA_F_PERMANENT | IFA_F_NOPREFIXROUTE);
});

const onlyDecodeErrors = (fn: () => unknown): boolean => {
  try {
    fn();
    return true;
  } catch (e) {
    if (e instanceof NetlinkDecodeError) return true;
    throw e;
  }
};
const decodeBoth = (m: InMessage): boolean =>
  onlyDecodeErrors(() => decodeLink({ ...m, type: RTM_NEWLINK })) &&
  onlyDecodeErrors(() => decodeAddr({ ...m, type: RTM_NEWADDR }));
const asMsg = (payload: Uint8Array): InMessage => ({ type: RTM_NEWLINK, flags: 0, seq: 0, pid: 0, payload });

test('robustness: random payloads give a value or a NetlinkDecodeError', (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 400 }), (b) => decodeBoth(asMsg(b))),
    { numRuns: 3000 },
  );
  t.pass();
});

test('robustness: every truncation and random edits of real replies', (t) => {
  const seeds = msgs('route/addr-dump.recv.hex')
    .filter((m) => m.type === RTM_NEWLINK || m.type === RTM_NEWADDR)
    .map((m) => m.payload);
  for (const s of seeds) for (let n = 0; n <= s.length; n++) t.true(decodeBoth(asMsg(s.subarray(0, n))));
  const arb = fc.record({
    seed: fc.constantFrom(...seeds),
    edits: fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 8 }),
  });
  fc.assert(
    fc.property(arb, ({ seed, edits }) => {
      const b = Uint8Array.from(seed);
      for (const [at, v] of edits) b[at % b.length] = v;
      return decodeBoth(asMsg(b));
    }),
    { numRuns: 3000 },
  );
});

test('round trip: what the encoder writes, the decoder reads back', (t) => {
  const asIn = (m: { type: number; flags: number; payload: Uint8Array }): InMessage => ({ ...m, seq: 0, pid: 0 });
  const v4 = decodeAddr(asIn(newAddrMessage(3, '10.96.0.1', 32, { scope: 253 })));
  t.deepEqual(v4, { index: 3, family: 'IPv4', address: '10.96.0.1', prefixLen: 32, scope: 253, flags: 0 });
  const v6 = decodeAddr(asIn(newAddrMessage(3, 'fd00:0::1', 128, { noPrefixRoute: true })));
  t.deepEqual(v6, {
    index: 3,
    family: 'IPv6',
    address: 'fd00::1',
    prefixLen: 128,
    scope: 0,
    flags: IFA_F_NOPREFIXROUTE,
  });
  const link = decodeLink(asIn(newLinkMessage('kube-ipvs0', 'dummy')));
  t.like(link, { index: 0, name: 'kube-ipvs0', kind: 'dummy', up: false });
  fc.assert(
    fc.property(
      fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.integer({ min: 0, max: 32 }),
      fc.nat(0x7fffffff),
      (p, len, index) => {
        const a = decodeAddr(asIn(newAddrMessage(index, p.join('.'), len)));
        return a.address === p.join('.') && a.prefixLen === len && a.index === index;
      },
    ),
  );
});
