// AttrCursor: the zero-allocation attribute walker with a latched error. Expected bytes come
// from the naive builder; hostile input must end in a NetlinkDecodeError naming the offset,
// never another exception, a hang or a read past the buffer.
import test from 'ava';
import fc from 'fast-check';
import { AttrCursor, NetlinkDecodeError } from '../../../../src/netlink/core/index.ts';
import { attr, be16, be32, bytes, cstr, le16, le32, nestedAttr } from '../../../helpers/naive-bytes.ts';

/** Every attribute the cursor reaches, nested ones walked, as [depth, type, payload length]. */
function walkAll(c: AttrCursor, depth = 0, out: [number, number, number][] = []): [number, number, number][] {
  while (c.next()) {
    out.push([depth, c.type(), c.len]);
    if (c.nested && depth < 8) {
      const outer = c.enter();
      walkAll(c, depth + 1, out);
      c.exit(outer);
    }
  }
  return out;
}

test('walks a level, nests and padding, reading each value in the cursor byte order', (t) => {
  const buf = bytes([
    ...attr(1, be32(0x0a000001)),
    ...attr(2, cstr('svc')),
    ...nestedAttr(3, attr(1, [7]), attr(2, be16(8080)), nestedAttr(3, attr(1, [...be32(1), ...be32(2)]))),
    ...attr(4, []),
  ]);
  const c = new AttrCursor(buf, 'test', 0, 'net');
  const seen: unknown[] = [];
  while (c.next()) {
    if (c.type() === 1) seen.push(c.u32());
    else if (c.type() === 2) seen.push(c.str());
    else if (c.type() === 3) {
      t.true(c.nested);
      const outer = c.enter();
      while (c.next()) {
        if (c.type() === 1) seen.push(c.u8());
        else if (c.type() === 2) seen.push(c.u16());
        else {
          const inner = c.enter();
          while (c.next()) seen.push(c.u64());
          c.exit(inner);
        }
      }
      c.exit(outer);
    } else seen.push(`flag ${c.type()}`);
  }
  c.check();
  t.deepEqual(seen, [0x0a000001, 'svc', 7, 8080, (1n << 32n) | 2n, 'flag 4']);
  t.is(c.err(), undefined);
});

test('host order reads little-endian; bytes() is a view of the payload', (t) => {
  const buf = bytes([...attr(5, le16(0x1234)), ...attr(6, le32(0xdeadbeef)), ...attr(7, [1, 2, 3])]);
  const c = new AttrCursor(buf, 'host');
  const out: unknown[] = [];
  while (c.next()) out.push(c.type() === 5 ? c.u16() : c.type() === 6 ? c.u32() : Array.from(c.bytes()));
  c.check();
  t.deepEqual(out, [0x1234, 0xdeadbeef, [1, 2, 3]]);
});

test('a truncated header, a short length and an overlong length latch a NetlinkDecodeError with the offset', (t) => {
  const good = attr(1, be32(1));
  const cases: [number[], RegExp, number][] = [
    [[...good, 8, 0], /2 trailing bytes, too short for an attribute header/, 8],
    [[...good, 2, 0, 1, 0], /attribute length 2 is below the header size/, 8],
    [[...good, 64, 0, 9, 0, 0, 0, 0, 0], /attribute type 9 claims 64 bytes, only 8 left/, 8],
  ];
  for (const [b, message, offset] of cases) {
    const c = new AttrCursor(bytes(b), 'case', 100, 'net');
    let n = 0;
    while (c.next()) n++;
    t.is(n, 1, 'the good attribute is read, then the walk stops');
    const e = c.err();
    t.true(e instanceof NetlinkDecodeError);
    t.is(e!.offset, 100 + offset);
    t.regex(e!.message, message);
    t.throws(() => c.check(), { instanceOf: NetlinkDecodeError, message });
  }
});

test('a value larger than its payload is an error, reads return 0, and the walk ends', (t) => {
  const c = new AttrCursor(bytes([...attr(1, [1, 2]), ...attr(2, be32(5))]), 'short', 0, 'net');
  t.true(c.next());
  t.is(c.u32(), 0);
  t.false(c.next(), 'nothing after a latched error');
  t.throws(() => c.check(), {
    instanceOf: NetlinkDecodeError,
    message: /short at offset 0: attribute 1 has 2 bytes, expected 4/,
  });
});

test('an error inside a nest ends every level; exit() keeps it ended', (t) => {
  const buf = bytes([...nestedAttr(1, attr(1, [1]), [12, 0, 2, 0]), ...attr(2, be32(9))]);
  const c = new AttrCursor(buf, 'nest');
  t.true(c.next());
  const outer = c.enter();
  t.true(c.next());
  t.false(c.next());
  c.exit(outer);
  t.false(c.next());
  t.is(c.err()?.offset, 12);
});

test("fail() latches the caller's own objection at the current attribute", (t) => {
  const c = new AttrCursor(bytes([...attr(1, [1, 2, 3, 4]), ...attr(2, [9, 9, 9])]), 'addr', 4);
  c.next();
  c.next();
  t.false(c.fail('address attribute 2 has 3 bytes, expected 4'));
  t.false(c.next());
  t.is(c.err()?.offset, 12);
});

test('reset() reuses a cursor for another buffer and clears its error', (t) => {
  const c = new AttrCursor(bytes([1, 0]), 'first');
  t.false(c.next());
  t.truthy(c.err());
  c.reset(bytes([...attr(7, [1]), ...attr(8, [2])]), 'second', 0, 8);
  t.true(c.next());
  t.is(c.type(), 8);
  t.false(c.next());
  t.is(c.err(), undefined);
});

test('hostile input: random, truncated and oversized bytes end in a value or a NetlinkDecodeError', (t) => {
  const seed = bytes([...nestedAttr(1, attr(1, be32(3)), nestedAttr(2, attr(1, cstr('x')))), ...attr(2, be16(4))]);
  const ok = (b: Uint8Array): boolean => {
    const c = new AttrCursor(b, 'fuzz', 0, 'net');
    const walked = walkAll(c);
    for (const [, , len] of walked) if (len > b.length) return false;
    const e = c.err();
    return e === undefined || (e instanceof NetlinkDecodeError && e.offset >= 0 && e.offset <= b.length);
  };
  for (let n = 0; n <= seed.length; n++) t.true(ok(seed.subarray(0, n)), `truncated to ${n}`);
  // A length field claiming 64 KiB in a 12-byte buffer: nothing is read past the end.
  t.true(ok(bytes([0xff, 0xff, 1, 0x80, 0, 0, 0, 0, 0, 0, 0, 0])));
  fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), ok), { numRuns: 3000 });
  fc.assert(
    fc.property(fc.nat(seed.length - 1), fc.integer({ min: 0, max: 255 }), (i, v) => {
      const b = Uint8Array.from(seed);
      b[i] = v;
      return ok(b);
    }),
    { numRuns: 2000 },
  );
});
