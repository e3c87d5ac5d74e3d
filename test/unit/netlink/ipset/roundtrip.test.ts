// Every entry the encoder writes decodes back to itself; every text form parses back.
import test from 'ava';
import fc from 'fast-check';
import { AttrSet, AttrWriter, NetlinkDecodeError, parseMessages } from '../../../../src/netlink/core/index.ts';
import {
  decodeEntry,
  decodeList,
  entryProblem,
  formatEntry,
  parseByNameReply,
  parseEntry,
  parseTypeReply,
} from '../../../../src/netlink/ipset/index.ts';
import type { IpsetEntry, IpsetType } from '../../../../src/netlink/ipset/index.ts';
import { echoedLineno, writeEntry } from '../../../../src/netlink/ipset/codec.ts';
import { fixtureLines } from './fixture-lines.ts';

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
const proto = fc.constantFrom('tcp' as const, 'udp' as const, 'sctp' as const);
const port = fc.nat(65535);
const comment = fc.option(
  fc.string({ maxLength: 40 }).filter((s) => !s.includes('\0')),
  { nil: undefined },
);

const entryArb = (type: IpsetType, ip: fc.Arbitrary<string>, max: number): fc.Arbitrary<IpsetEntry> => {
  const withComment = (e: IpsetEntry, c: string | undefined): IpsetEntry =>
    c === undefined ? e : { ...e, comment: c };
  switch (type) {
    case 'hash:ip':
      return fc.tuple(ip, comment).map(([a, c]) => withComment({ ip: a }, c));
    case 'hash:ip,port':
      return fc.tuple(ip, proto, port, comment).map(([a, p, n, c]) => withComment({ ip: a, proto: p, port: n }, c));
    case 'hash:ip,port,ip':
      return fc
        .tuple(ip, proto, port, ip, comment)
        .map(([a, p, n, b, c]) => withComment({ ip: a, proto: p, port: n, ip2: b }, c));
    case 'hash:ip,port,net':
      return fc
        .tuple(ip, proto, port, ip, fc.integer({ min: 1, max }), comment)
        .map(([a, p, n, b, m, c]) => withComment({ ip: a, proto: p, port: n, ip2: b, cidr2: m }, c));
    case 'hash:net':
      return fc.tuple(ip, fc.integer({ min: 1, max }), comment).map(([a, m, c]) => withComment({ ip: a, cidr: m }, c));
    case 'bitmap:port':
      return fc.tuple(port, comment).map(([n, c]) => withComment({ port: n }, c));
  }
};

const TYPES: IpsetType[] = [
  'hash:ip',
  'hash:ip,port',
  'hash:ip,port,ip',
  'hash:ip,port,net',
  'hash:net',
  'bitmap:port',
];

test('encode then decode gives the entry back, for every type (IPv4)', (t) => {
  for (const type of TYPES) {
    fc.assert(
      fc.property(entryArb(type, v4, 32), (e) => {
        t.is(entryProblem(type, 'inet', e), undefined);
        const w = new AttrWriter();
        writeEntry(w, e, 1);
        const back = decodeEntry(new AttrSet(w.finish(), 'rt'));
        t.deepEqual(back, e);
      }),
      { numRuns: 200 },
    );
  }
});

test('encode then decode, IPv6 addresses (canonical text)', (t) => {
  const canon = (s: string): string => {
    const w = new AttrWriter();
    writeEntry(w, { ip: s }, undefined);
    return decodeEntry(new AttrSet(w.finish(), 'c')).ip!;
  };
  fc.assert(
    fc.property(fc.ipV6(), proto, port, (a, p, n) => {
      const ip = canon(a);
      const e: IpsetEntry = { ip, proto: p, port: n };
      const w = new AttrWriter();
      writeEntry(w, e, 7);
      t.deepEqual(decodeEntry(new AttrSet(w.finish(), 'rt')), e);
      t.is(canon(ip), ip);
    }),
    { numRuns: 300 },
  );
  t.is(canon('FD00:0:0::1'), 'fd00::1');
});

test('the text form parses back to the entry', (t) => {
  for (const type of TYPES) {
    fc.assert(
      fc.property(entryArb(type, v4, 32), (e) => {
        const { comment: _c, ...bare } = e;
        t.deepEqual(parseEntry(type, formatEntry(e)), bare);
      }),
      { numRuns: 100 },
    );
  }
  t.deepEqual(parseEntry('hash:ip,port', 'fd00::1,sctp:9'), { ip: 'fd00::1', proto: 'sctp', port: 9 });
  t.throws(() => parseEntry('hash:ip,port', '10.0.0.1'), { instanceOf: TypeError });
});

test('entryProblem catches what the kernel would refuse', (t) => {
  t.regex(entryProblem('hash:ip,port', 'inet', { ip: 'fd00::1', proto: 'tcp', port: 1 })!, /not IPv4/);
  t.regex(entryProblem('hash:ip,port', 'inet', { ip: '10.0.0.1', port: 1 })!, /protocol/);
  t.regex(entryProblem('hash:net', 'inet', { ip: '10.0.0.0', cidr: 33 })!, /out of range/);
  t.regex(entryProblem('bitmap:port', 'inet', { port: 70000 })!, /out of range/);
  t.regex(entryProblem('hash:ip', 'inet', { ip: '10.0.0.1', port: 5 })!, /no port/);
  t.is(
    entryProblem('hash:ip,port,net', 'inet6', { ip: 'fd00::1', proto: 'udp', port: 53, ip2: 'fd00::', cidr2: 64 }),
    undefined,
  );
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

const decodeAll = (buf: Uint8Array): void => {
  const msgs = parseMessages(buf);
  for (const m of msgs) {
    onlyDecodeErrors(() => decodeList([m]));
    onlyDecodeErrors(() => parseTypeReply(m));
    onlyDecodeErrors(() => parseByNameReply(m));
    echoedLineno(m.payload);
  }
};

const seeds = [
  'ipset/list.recv.hex',
  'ipset/list-all.recv.hex',
  'ipset/restore.hex',
  'ipset/add-ip-port-net.hex',
  'ipset/add-inet6.hex',
].flatMap((f) => fixtureLines(f));

test('robustness: random bytes give a value or a NetlinkDecodeError', (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 600 }),
      (b) =>
        onlyDecodeErrors(() => decodeAll(b)) &&
        onlyDecodeErrors(() => decodeList([{ type: 0x607, flags: 0, seq: 0, pid: 0, payload: b }])),
    ),
    { numRuns: 3000 },
  );
  t.pass();
});

test('robustness: every truncation and random edits of real messages', (t) => {
  for (const s of seeds) {
    for (let n = 0; n <= s.length; n++) {
      t.true(onlyDecodeErrors(() => decodeAll(s.subarray(0, n))));
      t.true(
        onlyDecodeErrors(() =>
          decodeList([{ type: 0x607, flags: 0, seq: 0, pid: 0, payload: s.subarray(16, Math.max(16, n)) }]),
        ),
      );
    }
  }
  const arb = fc.record({
    seed: fc.constantFrom(...seeds),
    edits: fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 8 }),
  });
  fc.assert(
    fc.property(arb, ({ seed, edits }) => {
      const b = Uint8Array.from(seed);
      for (const [at, v] of edits) b[at % b.length] = v;
      return (
        onlyDecodeErrors(() => decodeAll(b)) &&
        onlyDecodeErrors(() => decodeList([{ type: 0x607, flags: 0, seq: 0, pid: 0, payload: b.subarray(16) }]))
      );
    }),
    { numRuns: 5000 },
  );
});
