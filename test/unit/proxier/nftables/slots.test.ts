import test from 'ava';
import fc from 'fast-check';
import { blockSize, orderFor, SlotAllocator } from '../../../../src/proxier/nftables/slots.ts';
import type { SlotBlock } from '../../../../src/proxier/nftables/slots.ts';

test('blocks are powers of two, aligned, and never overlap', (t) => {
  const a = new SlotAllocator();
  const blocks = [3, 1, 10, 1, 64, 5].map((n) => ({ n, b: a.allocate(n) }));
  for (const { n, b } of blocks) {
    t.true(blockSize(b.order) >= n);
    t.is(b.offset % blockSize(b.order), 0);
  }
  const ranges = blocks.map(({ b }) => [b.offset, b.offset + blockSize(b.order)] as const).sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < ranges.length; i++) t.true(ranges[i]![0] >= ranges[i - 1]![1]);
  t.is(orderFor(0), 0);
  t.is(orderFor(1), 0);
  t.is(orderFor(5), 3);
});

test('released blocks merge with their buddies so the space returns whole', (t) => {
  const a = new SlotAllocator();
  const held = Array.from({ length: 100 }, (_, i) => a.allocate((i % 7) + 1));
  for (const b of held) a.release(b);
  t.is(a.allocatedSlots, 0);
  // The whole space is one block again: the largest possible allocation succeeds.
  t.deepEqual(a.allocate(2 ** 32), { offset: 0, order: 32 });
  t.throws(() => a.release({ offset: 8, order: 3 }), { message: /not allocated/ });
});

test('a block found in the kernel can be reserved, and is not handed out again', (t) => {
  const a = new SlotAllocator();
  t.true(a.reserve({ offset: 4096, order: 4 }));
  t.false(a.reserve({ offset: 4096, order: 4 }), 'already taken');
  t.false(a.reserve({ offset: 4100, order: 4 }), 'misaligned');
  for (let i = 0; i < 300; i++) {
    const b = a.allocate(16);
    t.false(b.offset === 4096, 'the reserved block is never allocated');
  }
});

test('random allocate/release sequences keep blocks disjoint', (t) => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 40 })), { maxLength: 200 }), (ops) => {
      const a = new SlotAllocator();
      const live: SlotBlock[] = [];
      for (const [alloc, n] of ops) {
        if (alloc || live.length === 0) live.push(a.allocate(n));
        else a.release(live.splice(n % live.length, 1)[0]!);
      }
      const r = live.map((b) => [b.offset, b.offset + blockSize(b.order)] as const).sort((x, y) => x[0] - y[0]);
      return r.every((x, i) => i === 0 || x[0] >= r[i - 1]![1]);
    }),
  );
  t.pass();
});
