// Attribute encoding against a naive test-side builder, and decoding of real kernel replies.
import test from 'ava';
import {
  AttrSet,
  AttrWriter,
  readAttrs,
  NetlinkDecodeError,
  NLA_F_NESTED,
} from '../../../../src/netlink/core/index.ts';
import { attr, be16, be32, cstr, le16, le32, nestedAttr } from '../../../helpers/naive-bytes.ts';

const bytesOf = (w: AttrWriter): number[] => Array.from(w.finish());

test('integers are written in host or network order, padded to 4 bytes', (t) => {
  t.deepEqual(bytesOf(new AttrWriter().u8(1, 0xab)), attr(1, [0xab]));
  t.deepEqual(bytesOf(new AttrWriter().u16(2, 0x1234)), attr(2, le16(0x1234)));
  t.deepEqual(bytesOf(new AttrWriter().u16(2, 0x1234, 'net')), attr(2, be16(0x1234)));
  t.deepEqual(bytesOf(new AttrWriter().u32(3, 0xdeadbeef)), attr(3, le32(0xdeadbeef)));
  t.deepEqual(bytesOf(new AttrWriter().u32(3, 0xdeadbeef, 'net')), attr(3, be32(0xdeadbeef)));
  t.deepEqual(bytesOf(new AttrWriter().u64(4, 0x0102030405060708n, 'net')), attr(4, [1, 2, 3, 4, 5, 6, 7, 8]));
  t.deepEqual(bytesOf(new AttrWriter().u64(4, 0x0102030405060708n)), attr(4, [8, 7, 6, 5, 4, 3, 2, 1]));
});

test('strings are NUL-terminated; binary and flags are written as given', (t) => {
  t.deepEqual(bytesOf(new AttrWriter().str(1, 'kpts')), attr(1, cstr('kpts')));
  t.deepEqual(bytesOf(new AttrWriter().str(1, '')), attr(1, [0]));
  t.deepEqual(bytesOf(new AttrWriter().bytes(7, Uint8Array.of(10, 96, 0, 1, 9))), attr(7, [10, 96, 0, 1, 9]));
  t.deepEqual(bytesOf(new AttrWriter().flag(9)), attr(9, []));
});

test('nested attributes carry NLA_F_NESTED and the length of everything inside', (t) => {
  const w = new AttrWriter().str(1, 't').nested(2, (n) => n.u32(1, 7, 'net').nested(3, (m) => m.u8(1, 1)));
  t.deepEqual(bytesOf(w), [...attr(1, cstr('t')), ...nestedAttr(2, attr(1, be32(7)), nestedAttr(3, attr(1, [1])))]);
});

test('a writer grows past its initial buffer without corrupting earlier bytes', (t) => {
  const w = new AttrWriter();
  const expected: number[] = [];
  for (let i = 0; i < 2000; i++) {
    w.u32(i & 0x3fff, i, 'net');
    expected.push(...attr(i & 0x3fff, be32(i)));
  }
  t.deepEqual(bytesOf(w), expected);
});

test('decoding keeps every attribute, unknown ones included, with flags and offsets', (t) => {
  const buf = Uint8Array.from([
    ...attr(1, cstr('kpts')),
    ...attr(0x4000 | 99, be32(5)),
    ...nestedAttr(2, attr(1, [7])),
  ]);
  const attrs = [...readAttrs(buf, 'test')];
  t.deepEqual(
    attrs.map((a) => [a.type, a.nested, a.netOrder, a.offset]),
    [
      [1, false, false, 0],
      [99, false, true, 12],
      [2, true, false, 20],
    ],
  );
  const set = new AttrSet(buf, 'test');
  t.is(set.str(1), 'kpts');
  t.is(set.u32(99, 'net'), 5);
  t.is(set.nested(2)?.u8(1), 7);
  t.is(set.all.length, 3);
  t.is(set.get(42), undefined);
  t.is(NLA_F_NESTED, 0x8000);
});

test('decoding rejects lies about lengths with a NetlinkDecodeError that names the place', (t) => {
  const tooLong = Uint8Array.from([...le16(64), ...le16(1), 1, 2, 3, 4]);
  const e1 = t.throws(() => [...readAttrs(tooLong, 'table attrs')], { instanceOf: NetlinkDecodeError });
  t.regex(e1.message, /table attrs at offset 0: attribute type 1 claims 64 bytes, only 8 left/);
  const tooShort = Uint8Array.from([...le16(2), ...le16(1)]);
  t.throws(() => [...readAttrs(tooShort, 'x')], { instanceOf: NetlinkDecodeError, message: /below the header size/ });
  const trailing = Uint8Array.from([...attr(1, [1]), 9, 9]);
  t.throws(() => [...readAttrs(trailing, 'x')], {
    instanceOf: NetlinkDecodeError,
    message: /offset 8: 2 trailing bytes/,
  });
  const shortU32 = Uint8Array.from(attr(3, [1, 2]));
  t.throws(() => new AttrSet(shortU32, 'x').u32(3), {
    instanceOf: NetlinkDecodeError,
    message: /has 2 bytes, expected 4/,
  });
});
