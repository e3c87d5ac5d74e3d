// The encoding shortcuts a full sync relies on (one reused writer per nfnetlink message, copies
// carved from shared slabs, ASCII strings stored without a Buffer) give the same bytes as the
// plain paths, and no copy is disturbed by the next one.
import test from 'ava';
import { AttrWriter, ByteWriter, nfMessage, NfnlSubsys, slabCopy } from '../../../../src/netlink/core/index.ts';
import { attr, cstr } from '../../../helpers/naive-bytes.ts';

const bytesOf = (w: AttrWriter): number[] => Array.from(w.finish());

test('strings: ASCII stored directly, anything else through UTF-8, the same bytes either way', (t) => {
  for (const s of ['KUBE-SEP-ABCDEFGHIJKLMNOP', 'ns/svc:http -> 10.0.0.1:80', 'é', 'a€b', '\u007f', '\u0080'])
    t.deepEqual(bytesOf(new AttrWriter().str(3, s)), attr(3, cstr(s)), s);
});

test('fields that do not fit are refused as Buffer refused them; 32-bit ones wrap as before', (t) => {
  t.throws(() => new ByteWriter().u8(256), { instanceOf: RangeError });
  t.throws(() => new ByteWriter().u16le(0x10000), { instanceOf: RangeError });
  t.throws(() => new ByteWriter().u16be(-1), { instanceOf: RangeError });
  t.throws(() => new AttrWriter().u32(0x10000, 1), { instanceOf: RangeError, message: /not a u16/ });
  t.deepEqual(
    Array.from(
      new ByteWriter()
        .u32le(-1)
        .u32be(2 ** 32 + 5)
        .view(),
    ),
    [255, 255, 255, 255, 0, 0, 0, 5],
  );
});

test('slab copies are plain Uint8Arrays that the next copy leaves alone', (t) => {
  const w = new ByteWriter();
  const copies: Uint8Array[] = [];
  // Enough to cross into a second slab.
  for (let i = 0; i < 1000; i++) {
    w.truncate(0);
    for (let j = 0; j <= i % 200; j++) w.u8(i & 0xff);
    copies.push(w.toSlabBytes());
  }
  copies.forEach((c, i) => {
    t.is(c.constructor, Uint8Array);
    t.is(c.length, (i % 200) + 1);
    t.true(
      c.every((x) => x === (i & 0xff)),
      `copy ${i}`,
    );
  });
  const big = new Uint8Array(10_000).fill(7);
  const c = slabCopy(big, big.length);
  big[0] = 1;
  t.is(c[0], 7, 'a large copy is a copy too');
});

test('a message built while another is being filled gets its own writer; both come out whole', (t) => {
  let inner: Uint8Array | undefined;
  const outer = nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'outer', (w) => {
    w.str(1, 'outer-before');
    inner = nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'inner', (v) => void v.str(1, 'inner')).payload;
    w.str(2, 'outer-after');
  });
  t.deepEqual(Array.from(outer.payload), [
    2,
    0,
    0,
    0,
    ...attr(1, cstr('outer-before')),
    ...attr(2, cstr('outer-after')),
  ]);
  t.deepEqual(Array.from(inner!), [2, 0, 0, 0, ...attr(1, cstr('inner'))]);
});

test('a message that fails while being filled leaves the reused writer usable', (t) => {
  t.throws(() =>
    nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'bad', (w) => {
      w.str(1, 'half');
      throw new Error('bad input');
    }),
  );
  const m = nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'good', (w) => void w.str(1, 'ok'));
  t.deepEqual(Array.from(m.payload), [2, 0, 0, 0, ...attr(1, cstr('ok'))]);
});

test('a message larger than the reused writer is written whole, and the next small one still is', (t) => {
  const big = nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'big', (w) => void w.bytes(1, new Uint8Array(40_000).fill(9)));
  t.is(big.payload.length, 4 + 4 + 40_000);
  t.true(big.payload.subarray(8).every((x) => x === 9));
  const m = nfMessage(NfnlSubsys.NFTABLES, 1, 2, 0, 'small', (w) => void w.u32(1, 5, 'net'));
  t.deepEqual(Array.from(m.payload), [2, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 5]);
});
