// Decoders fed random, truncated and oversized bytes: a NetlinkDecodeError or a value,
// never another exception, a hang or an allocation sized from an unchecked length.
import test from 'ava';
import fc from 'fast-check';
import {
  AttrSet,
  NetlinkDecodeError,
  parseErrorPayload,
  parseFamily,
  parseMessages,
  readAttrs,
} from '../../../../src/netlink/core/index.ts';
import { fixture } from '../../../helpers/fixtures.ts';

const onlyDecodeErrors = (fn: () => unknown): boolean => {
  try {
    fn();
    return true;
  } catch (e) {
    if (e instanceof NetlinkDecodeError) return true;
    throw e;
  }
};

const walk = (s: AttrSet, depth = 0): void => {
  if (depth > 4) return;
  for (const a of s.all) if (a.nested) walk(new AttrSet(a.data, 'fuzz', a.offset + 4), depth + 1);
};

const decodeEverything = (buf: Uint8Array): void => {
  for (const m of parseMessages(buf)) {
    if (m.type === 2) parseErrorPayload(m);
    else if (m.type === 0x10) parseFamily(m);
    else walk(new AttrSet(m.payload.subarray(Math.min(4, m.payload.length)), 'fuzz'));
  }
};

test('random bytes', (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 512 }),
      (b) => onlyDecodeErrors(() => [...readAttrs(b, 'fuzz')]) && onlyDecodeErrors(() => decodeEverything(b)),
    ),
    { numRuns: 3000 },
  );
  t.pass();
});

const seeds = [
  'core/nft-add-table-batch.hex',
  'core/genl-getfamily-nlctrl.recv.hex',
  'core/nft-create-table-eexist.recv.hex',
  'core/nft-list-tables.recv.hex',
].map(fixture);

test('every truncation of real kernel messages', (t) => {
  for (const seed of seeds)
    for (let n = 0; n <= seed.length; n++) t.true(onlyDecodeErrors(() => decodeEverything(seed.subarray(0, n))));
});

test('real kernel messages with random bytes overwritten', (t) => {
  const arb = fc.record({
    seed: fc.constantFrom(...seeds),
    edits: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
  });
  fc.assert(
    fc.property(arb, ({ seed, edits }) => {
      const b = Uint8Array.from(seed);
      for (const [at, v] of edits) b[at % b.length] = v;
      return onlyDecodeErrors(() => decodeEverything(b));
    }),
    { numRuns: 5000 },
  );
  t.pass();
});

test('a length field claiming 4 GiB allocates nothing and fails fast', (t) => {
  const b = Uint8Array.from(seeds[0]!);
  b.set([0xff, 0xff, 0xff, 0xff], 0);
  t.throws(() => parseMessages(b), { instanceOf: NetlinkDecodeError, message: /claims 4294967295 bytes/ });
});
