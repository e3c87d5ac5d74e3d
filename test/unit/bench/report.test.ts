// The benchmark page and its charts, rendered from a fixture run's JSON: every series drawn and
// named, the summary first, upstream's published figures cited, no internal issue numbers.
import test from 'ava';
import { fileURLToPath } from 'node:url';
import { renderCharts } from '../../../test/bench/charts.ts';
import { MODES } from '../../../test/bench/figures.ts';
import { PUBLISHED } from '../../../test/bench/published.ts';
import { handSections, renderReport } from '../../../test/bench/report.ts';
import { figuresOf, readResults } from '../../../test/bench/results.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/bench-results.json', import.meta.url));
const xml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

test('the charts render from the JSON and their SVG names every series', async (t) => {
  const charts = await renderCharts(figuresOf(readResults(FIXTURE)));
  t.deepEqual(
    charts.map((c) => c.file),
    ['sync-time.svg', 'one-change.svg', 'rss.svg', 'churn-cpu.svg'],
  );
  const byFile = new Map(charts.map((c) => [c.file, c]));
  // The series each chart must draw, from the fixture's figures.
  const expected: Record<string, string[]> = {
    'sync-time.svg': [
      'nftables: ours',
      'nftables: exec nft -f (upstream-shaped ruleset)',
      'iptables: ours',
      'iptables: exec iptables-nft-restore',
      'ipvs: ours (QEMU)',
      'ipvs: exec ip, ipset, ipvsadm, iptables-nft-restore (QEMU)',
    ],
    'one-change.svg': ['nftables: ours, in process', 'nftables: ours, end to end (new Service)'],
    'rss.svg': ['nftables: peak', 'nftables: after first sync'],
    'churn-cpu.svg': ['nftables: 1,000 × 10', 'nftables: 10,000 × 10'],
  };
  for (const [file, series] of Object.entries(expected)) {
    const chart = byFile.get(file)!;
    t.true(chart.svg.startsWith('<svg'), file);
    t.deepEqual([...chart.series].sort(), [...series].sort(), file);
    for (const s of series) t.true(chart.svg.includes(`>${xml(s)}</text>`), `${file} names "${s}"`);
  }
});

test('the page opens with the summary: the run, one table per mode, the charts, the published figures', async (t) => {
  const results = readResults(FIXTURE);
  const charts = await renderCharts(figuresOf(results));
  const page = renderReport(results, { dir: 'docs/bench', charts });
  t.true(page.startsWith('# Benchmarks\n\n## Summary\n\nOne run of `npm run bench` started 2026-11-28T20:00:00Z'));
  const summary = page.slice(0, page.indexOf('\n## Goals'));
  for (const m of MODES) t.regex(summary, new RegExp(`^### ${m} mode$`, 'm'));
  for (const c of charts) t.true(summary.includes(`](docs/bench/${c.file})`), c.file);
  // Ours beside the exec peer of the same run, beside upstream's figure for the same shape.
  t.regex(
    summary,
    /\| full sync from empty, in process \(model \+ proxier\) \| 1,000 × 10 \| 180 ms \| [^\n]*\n\| {2}\| 10,000 × 10 \| 1\.15 s \| nft -f \(upstream-shaped ruleset\): 150 s \|/,
  );
  // A measure's other sizes stand under its first row, label and goal left blank.
  t.regex(
    summary,
    /\| cold start, end to end: daemon spawned → last Service answers \| 1,000 × 10 \| 540 ms \| — \| — \| ≤ 1 s at 10,000 × 10 \|\n(\| {2}\| [^\n]*\n)*\| {2}\| 10,000 × 2 \| 2\.10 s \| — \| ≈ 9 min \[1\] \| {2}\|$/m,
  );
  for (const p of PUBLISHED) t.true(summary.includes(p.link), p.link);
  t.true(summary.includes('(published, not measured here)'));
  t.regex(summary, /not measured in this run \(churn module/);
  // The fixture's nftables full sync (1.15 s) beats its iptables one (2.30 s) at 10,000 × 10.
  t.true(summary.includes('and the fastest full sync of this run'));
  // The project's own issue numbers are not the reader's business.
  t.notRegex(page, /\(issue \d+\)|\| #\d+ /);
  t.regex(page, /^## Fixture: detail$/m);
});

test('the first screen: each mode at 1,000 and 10,000 Services, and upstream’s published figures beside ours', (t) => {
  const page = renderReport(readResults(FIXTURE), undefined);
  const first = page.slice(0, page.indexOf('\n### nftables mode'));
  t.regex(
    first,
    /^\| nftables \| 1,000 × 10 \| 180 ms \(exec: 1\.33 s nft -f \(upstream-shaped ruleset\)\) \| [^|]+ \| 540 ms \| 7\.00 ms \|/m,
  );
  t.regex(
    first,
    /^\| {2}\| 10,000 × 10 \| 1\.15 s \(exec: 150 s nft -f \(upstream-shaped ruleset\)\) \| 5\.75 ms \| 3\.45 s \| 7\.00 ms \|/m,
  );
  // IPVS reached only 1,000 × 10 in the fixture: its 10,000 row says nothing rather than repeat it.
  t.regex(
    first,
    /^\| ipvs \(under QEMU: compare with its exec peer only\) \| 1,000 × 10 \| 14\.5 s \(exec: 17\.5 s ip, ipset, ipvsadm, [^)]+\) \|/m,
  );
  t.regex(first, /^\| {2}\| 10,000 × 10 \| — \| — \|/m);
  // Upstream's figures, linked, beside ours for the same shape; a shape this run lacks said so.
  for (const p of PUBLISHED) t.true(first.includes(`[${p.figure}](${p.link})`), p.link);
  t.regex(
    first,
    /\| 10,000 × 2 \| \[≈ 9 min\]\(https:\/\/github\.com\/kubernetes\/kubernetes\/pull\/126013\) \| 2\.10 s \|/,
  );
  t.regex(first, /\| 44,000 × 1 \| \[16 min 44 s\]\([^)]+\) \| not in this run \|/);
});

test('the run line says which sections were measured by hand, when the page carries any', (t) => {
  const results = readResults(FIXTURE);
  t.regex(
    renderReport(results, undefined),
    /comes from that run, except those marked “published, not measured here”\.\n/,
  );
  t.regex(
    renderReport(results, undefined, ['## Reliability (measured by hand, not rewritten by `npm run bench`)\n\nr']),
    /“published, not measured here” and the sections at its end measured by hand \(their headings say so\)\.\n/,
  );
});

test('notes added to a run by hand stand under its run line; without them, nothing', (t) => {
  const results = readResults(FIXTURE);
  t.false(renderReport(results, undefined).includes('About this run'));
  const noted = renderReport(
    { ...results, notes: ['The iptables module shared the CPUs.', 'Quiet re-run: 7 s.'] },
    undefined,
  );
  t.regex(
    noted,
    /^One run of .*\n\n\*\*About this run\*\* \(noted by hand\): The iptables module shared the CPUs\. Quiet re-run: 7 s\.\n/m,
  );
});

test('sections measured by hand are kept from the page a run replaces, and only those', (t) => {
  const previous =
    '# Benchmarks\n\n## Summary\n\nold\n\n## Reliability (issue 18; measured by hand, not rewritten by `npm run bench`)\n\nr\n\n### Second round\n\ns\n\n' +
    '## nftables proxier: full sync\n\nold figures\n\n### Where its memory goes (measured by hand, not rewritten by `npm run bench`)\n\nm\n\n' +
    '## Reproduce\n\nx\n';
  const kept = handSections(previous);
  t.deepEqual(kept, [
    '## Reliability (issue 18; measured by hand, not rewritten by `npm run bench`)\n\nr\n\n### Second round\n\ns',
    '## Where its memory goes (measured by hand, not rewritten by `npm run bench`)\n\nm',
  ]);
  const page = renderReport(readResults(FIXTURE), undefined, kept);
  t.regex(
    page,
    /^## Reliability \(measured by hand, not rewritten by `npm run bench`\)\n\nr\n\n### Second round\n\ns\n\n## Where its memory goes/m,
  );
  t.false(page.includes('old figures'));
});

test('a file that is not a run’s JSON is refused with one line', (t) => {
  const self = fileURLToPath(import.meta.url);
  t.throws(() => readResults(self), { message: /report\.test\.ts|not a benchmark results file|JSON/ });
});
