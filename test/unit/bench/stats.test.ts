import test from 'ava';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  formatCount,
  formatMs,
  formatRange,
  formatRatio,
  formatSpread,
  formatSummary,
  formatUs,
  median,
  percentile,
  summarize,
} from '../../../test/bench/stats.ts';
import { renderSection, renderTable } from '../../../test/bench/section.ts';
import { parseArgs, REGISTRY } from '../../../test/bench/run.ts';

test('median: middle sample, or the mean of the two middle ones; order does not matter', (t) => {
  t.is(median([3]), 3);
  t.is(median([5, 1, 3]), 3);
  t.is(median([4, 1, 3, 2]), 2.5);
  t.is(median([-1, -1, 10]), -1);
});

test('percentile interpolates between ranks; p0 and p100 are min and max', (t) => {
  const xs = [10, 20, 30, 40, 50];
  t.is(percentile(xs, 0), 10);
  t.is(percentile(xs, 100), 50);
  t.is(percentile(xs, 25), 20);
  t.is(percentile(xs, 10), 14);
  t.is(percentile(xs, 90), 46);
  t.is(percentile([7], 90), 7);
});

test('bad input is refused rather than summarised', (t) => {
  t.throws(() => median([]), { instanceOf: RangeError });
  t.throws(() => percentile([1, 2], 101), { instanceOf: RangeError });
  t.throws(() => percentile([1, 2], -1), { instanceOf: RangeError });
  t.throws(() => summarize([1, Number.NaN]), { instanceOf: RangeError });
  t.throws(() => summarize([1, Infinity]), { instanceOf: RangeError });
});

test('summarize does not reorder the caller’s samples', (t) => {
  const xs = [3, 1, 2];
  const s = summarize(xs);
  t.deepEqual(xs, [3, 1, 2]);
  t.deepEqual(s, { runs: 3, median: 2, p10: 1.2, p90: 2.8, min: 1, max: 3, mean: 2 });
});

test('formatMs picks µs, ms or s and keeps three significant digits', (t) => {
  t.is(formatMs(0), '0 µs');
  t.is(formatMs(0.0421), '42.1 µs');
  t.is(formatMs(0.5), '500 µs');
  t.is(formatMs(1), '1.00 ms');
  t.is(formatMs(12.34), '12.3 ms');
  t.is(formatMs(123.4), '123 ms');
  t.is(formatMs(2345), '2.35 s');
  t.is(formatMs(145_000), '145 s');
  t.is(formatUs(42.1), '42.1 µs');
  t.is(formatUs(1500), '1.50 ms');
});

test('spread: p10–p90 from 10 runs on, min–max below, a single run said so', (t) => {
  const ten = Array.from({ length: 10 }, (_, i) => i + 1);
  t.is(formatSpread(summarize(ten)), 'p10–p90 1.90–9.10 ms');
  t.is(formatSpread(summarize([1, 2, 30])), 'min–max 1.00–30.0 ms');
  t.is(formatSpread(summarize([5])), 'one run');
  t.is(formatRange(0.5, 2), '0.500–2.00 ms');
  t.is(formatRange(0.02, 0.5), '20.0–500 µs');
  t.is(formatSummary(summarize([1, 2, 3])), '2.00 ms (min–max 1.00–3.00 ms, 3 runs)');
});

test('counts and ratios', (t) => {
  t.is(formatCount(10_000), '10,000');
  t.is(formatCount(81_357.6), '81,358');
  t.is(formatRatio(100, 10), '10×');
  t.is(formatRatio(30, 10), '3.0×');
  t.is(formatRatio(5, 10), '0.50×');
  t.is(formatRatio(5, 0), '—');
});

test('tables: alignment row, escaped pipes, and rows of the wrong width refused', (t) => {
  const md = renderTable([{ title: 'way' }, { title: 'ms', align: 'right' }], [['a|b', '1']]);
  t.is(md, '| way | ms |\n| --- | ---: |\n| a\\|b | 1 |');
  t.throws(() => renderTable([{ title: 'one' }], [['a', 'b']]));
  const section = renderSection({
    title: 'T',
    description: 'D',
    columns: [{ title: 'c' }],
    rows: [['x']],
    notes: ['n'],
  });
  t.is(section, '## T\n\nD\n\n| c |\n| --- |\n| x |\n\n- n\n');
});

test('arguments: subset, quick, out; unknown names and options refused', (t) => {
  t.deepEqual(parseArgs(['--quick', 'model', 'ipset', 'model']), {
    names: ['model', 'ipset'],
    quick: true,
    out: undefined,
    list: false,
    help: false,
    render: undefined,
  });
  t.is(parseArgs(['--out', '-']).out, '-');
  t.is(parseArgs(['--out=x.md']).out, 'x.md');
  t.throws(() => parseArgs(['nosuch']), { message: /unknown benchmark "nosuch"/ });
  t.throws(() => parseArgs(['--fast']), { message: /unknown option/ });
  t.throws(() => parseArgs(['--out']));
  t.deepEqual(new Set(REGISTRY.map((e) => e.name)).size, REGISTRY.length);
});

test('smoke: `run.ts --quick model` prints a report with the model section', async (t) => {
  const script = fileURLToPath(new URL('../../../test/bench/run.ts', import.meta.url));
  const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [script, '--quick', 'model'], { timeout: 50_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
  t.is(code, 0, stderr);
  t.regex(stdout, /^# Benchmarks/);
  t.regex(stdout, /\*\*Quick mode\*\*/);
  t.regex(stdout, /\| kernel \(`uname -r`\) \| \S+ \|/);
  t.regex(stdout, /^## Model: desired state/m);
  t.regex(stdout, /^## Summary/m);
  t.notRegex(stdout, /\(issue \d+\)|\| #\d+ /);
  t.regex(stdout, /^\| Services × endpoints \| step \| median \(wall\) \|/m);
  t.regex(stdout, /^\| 1,000 × 10 \| one endpoint replaced/m);
  t.notRegex(stdout, /^## (ipset|Conntrack)/m);
});
