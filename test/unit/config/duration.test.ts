import test from 'ava';
import fc from 'fast-check';
import { formatDuration, parseDuration } from '../../../src/config/duration.ts';

const parseTable: [string, number][] = [
  ['0', 0],
  ['0s', 0],
  ['30s', 30_000],
  ['1m30s', 90_000],
  ['250ms', 250],
  ['1h0m0s', 3_600_000],
  ['1.5h', 5_400_000],
  ['2h22m', 8_520_000],
  ['-5s', -5_000],
  ['+1s', 1000],
  ['1000000us', 1000],
  ['1500000ns', 2], // rounds to ms
  ['1ns', 1], // never rounds to 0 ("unset" in a file)
  ['-1ns', -1],
  ['596h', 2_145_600_000],
  ['600h', 2_160_000_000], // parsed as is; boundDuration holds it to the timer limit
  ['.5s', 500],
  ['24h0m0s', 86_400_000],
];

for (const [text, ms] of parseTable) {
  test(`parseDuration(${JSON.stringify(text)}) = ${ms}`, (t) => {
    t.is(parseDuration(text), ms);
  });
}

for (const bad of ['', '30', 'abc', '1x', 's', '1m30', '--1s', '1 s', `${'9'.repeat(400)}h`]) {
  test(`parseDuration rejects ${JSON.stringify(bad)} naming it`, (t) => {
    const err = t.throws(() => parseDuration(bad));
    t.true(err.message.includes(JSON.stringify(bad)));
  });
}

const formatTable: [number, string][] = [
  [0, '0s'],
  [250, '250ms'],
  [1000, '1s'],
  [1500, '1.5s'],
  [90_000, '1m30s'],
  [3_600_000, '1h0m0s'],
  [86_400_000, '24h0m0s'],
  [900_000, '15m0s'],
  [-5000, '-5s'],
];

for (const [ms, text] of formatTable) {
  test(`formatDuration(${ms}) = ${text} (as Go's Duration.String)`, (t) => {
    t.is(formatDuration(ms), text);
  });
}

test('formatDuration output parses back to the same milliseconds', (t) => {
  fc.assert(fc.property(fc.integer({ min: -1e10, max: 1e10 }), (ms) => parseDuration(formatDuration(ms)) === ms));
  t.pass();
});
