import test from 'ava';
import { hexdiff } from '../../../helpers/hexdiff.ts';

test('hexdiff is empty for equal bytes and marks differing 4-byte lines', (t) => {
  t.is(hexdiff(Uint8Array.of(1, 2, 3, 4, 5), Uint8Array.of(1, 2, 3, 4, 5)), '');
  const d = hexdiff(Uint8Array.of(1, 2, 3, 4, 5, 6), Uint8Array.of(1, 2, 3, 4, 9));
  t.is(d.split('\n')[1], '  0000 01 02 03 04 | 01 02 03 04');
  t.is(d.split('\n')[2], '! 0004 05 06       | 09         ');
  t.regex(d, /\(6 bytes vs 5 bytes\)$/);
});
