// Decoders on hostile input: random bytes, truncated and bit-flipped fixture messages. The
// only acceptable failure is a NetlinkDecodeError; never a RangeError, TypeError or hang.
import test from 'ava';
import fc from 'fast-check';
import { readdirSync } from 'node:fs';
import { AttrSet, NetlinkDecodeError } from '../../../../src/netlink/core/index.ts';
import type { NftSetLike } from '../../../../src/netlink/nftables/index.ts';
import {
  decodeChain,
  decodeRawElements,
  decodeRule,
  decodeSet,
  decodeTable,
  decodeUdata,
  readExprs,
  toElements,
} from '../../../../src/netlink/nftables/index.ts';
import { loadFixture } from './fixture.ts';

const SETS: NftSetLike[] = [
  { kind: 'set', name: 's', key: ['ipv4_addr'], flags: ['interval'] },
  { kind: 'set', name: 's', key: ['ipv4_addr', 'inet_service'], flags: ['interval'] },
  { kind: 'map', name: 's', key: ['ipv4_addr', 'inet_proto', 'inet_service'], data: 'verdict' },
  { kind: 'map', name: 's', key: ['ipv6_addr'], data: ['ipv4_addr', 'inet_service'] },
  { kind: 'set', name: 's', key: ['ifname', 'mark'] },
];

const DECODERS: [string, (b: Uint8Array) => unknown][] = [
  ['table', (b) => decodeTable({ payload: b })],
  ['chain', (b) => decodeChain({ payload: b })],
  ['set', (b) => decodeSet({ payload: b })],
  ['rule', (b) => decodeRule({ payload: b })],
  ['elements', (b) => SETS.map((s) => toElements(s, decodeRawElements({ payload: b }).elements))],
  ['exprs', (b) => readExprs(new AttrSet(b, 'exprs'))],
  ['udata', (b) => decodeUdata(b)],
];

function safely(name: string, fn: (b: Uint8Array) => unknown, b: Uint8Array): true {
  try {
    fn(b);
  } catch (e) {
    if (!(e instanceof NetlinkDecodeError))
      throw new Error(
        `${name} threw ${(e as Error).name}: ${(e as Error).message} on ${Buffer.from(b).toString('hex')}`,
        { cause: e },
      );
  }
  return true;
}

// Payloads (nfgenmsg + attributes) of every captured message: realistic starting points.
const payloads = readdirSync(new URL('../../../fixtures/netlink/nftables/', import.meta.url))
  .filter((f) => f.endsWith('.hex'))
  .flatMap((f) => loadFixture(f.replace(/\.hex$/, '')).messages.map((m) => m.subarray(16)));

for (const [name, fn] of DECODERS) {
  test(`${name}: random bytes give a value or a NetlinkDecodeError`, (t) => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (b) => safely(name, fn, b)),
      { numRuns: 2000 },
    );
    t.pass();
  });

  test(`${name}: every truncation of every fixture message is handled`, (t) => {
    for (const p of payloads) for (let n = 0; n <= p.length; n++) safely(name, fn, p.subarray(0, n));
    t.pass();
  });

  test(`${name}: byte flips in fixture messages are handled`, (t) => {
    fc.assert(
      fc.property(
        fc.constantFrom(...payloads),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
        (p, flips) => {
          const b = Uint8Array.from(p);
          for (const [at, v] of flips) b[at % b.length] = v;
          return safely(name, fn, b);
        },
      ),
      { numRuns: 3000 },
    );
    t.pass();
  });
}

test('fixture messages themselves decode without error', (t) => {
  let decoded = 0;
  for (const p of payloads) {
    for (const [, fn] of DECODERS.slice(0, 4)) {
      try {
        fn(p);
        decoded++;
      } catch (e) {
        if (!(e instanceof NetlinkDecodeError)) throw e;
      }
    }
  }
  t.true(decoded >= payloads.length);
});
