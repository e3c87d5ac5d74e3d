// BENCHMARKS.md from one run's results (results.ts): the summary first (the run in one line, a
// table across the modes, the charts, one table per mode), then the goals, the machine, and
// every module's detail sections. Pure: the same results always give the same page.

import type { Chart } from './charts.ts';
import type { RunResults } from './results.ts';
import { figuresOf } from './results.ts';
import type { Target } from './section.ts';
import { renderSection, renderTable } from './section.ts';
import { formatMs } from './stats.ts';
import { fastestFullSync, renderGlance, renderModeTable, renderPublishedGlance } from './summary.ts';
import { MODES } from './figures.ts';

/**
 * The project's own issue numbers mean nothing to a reader of the page: dropped from titles,
 * goals and descriptions ("(issue 17)", "#17 …"); upstream's, always written with their link or
 * as "upstream issue N", stay.
 */
export function withoutIssueNumbers(text: string): string {
  return text
    .replace(/ \(issue \d+\)/g, '')
    .replace(/\(issue \d+[,;] /g, '(')
    .replace(/(^|\| )#\d+ /gm, '$1')
    .replace(/issue \d+’s budget/g, 'the budget')
    .replace(/the issue’s targets/g, 'the goals');
}

function runLine(r: RunResults, handCount: number): string {
  const e = r.environment;
  return (
    `One run of \`npm run bench${r.quick ? ' -- --quick' : ''}\` started ${e.date}, ${formatMs(r.totalMs)} in all: ` +
    `${e.cpus} × ${e.cpuModel}, ${e.memoryGiB} GiB, kernel ${e.kernel}, Node ${e.node}, ${e.source}; ` +
    `1-minute load average ${r.load.during} (on ${e.cpus} CPUs, a load above ${e.cpus} means other work competed). ` +
    (r.skipped?.length ? `Modules not run: ${r.skipped.join(', ')}. ` : '') +
    'Every figure on this page comes from that run, except those marked “published, not measured here”' +
    (handCount ? ' and the sections at its end measured by hand (their headings say so).' : '.')
  );
}

function chartLinks(charts: { dir: string; charts: readonly Chart[] } | undefined): string {
  if (!charts) return 'Charts: rendered only when the report is written to a file (into docs/bench/ beside it).';
  if (charts.charts.length === 0) return 'Charts: none (no module of this run measured a charted figure).';
  return `Charts (from the same figures, ${charts.dir}/results.json): ${charts.charts.map((c) => `[${c.title}](${charts.dir}/${c.file})`).join(' · ')}.`;
}

function goals(r: RunResults): string {
  const targets: Target[] = r.modules.flatMap((m) => m.sections.flatMap((s) => s.targets ?? []));
  const status = (t: Target): string =>
    ({ met: 'met', missed: '**missed**', measured: 'measured', 'not measured': '*not measured*' })[t.status];
  return targets.length
    ? renderTable(
        [{ title: 'what' }, { title: 'goal' }, { title: 'status' }, { title: 'figure' }],
        targets.map((t) => [t.what, t.target, status(t), t.detail]),
      )
    : 'No module reported a goal.';
}

function machine(r: RunResults): string {
  const e = r.environment;
  return renderTable(
    [{ title: 'what' }, { title: 'value' }],
    [
      ['date (UTC)', e.date],
      ['kernel (`uname -r`)', e.kernel],
      ['CPUs', `${e.cpus} × ${e.cpuModel}`],
      ['memory', `${e.memoryGiB} GiB`],
      ['Node', e.node],
      ['tools (exec side)', e.tools],
      ['source', e.source],
      ['load average (1 min), start → end', `${r.load.start} → ${r.load.end}`],
      ['load average during the run', r.load.during],
      ['suite duration', formatMs(r.totalMs)],
      ['modules', r.modules.map((m) => `${m.name} (${formatMs(m.ms)})`).join(', ')],
      ['not run', r.skipped?.length ? `${r.skipped.join(', ')} (name them to run them)` : 'none'],
    ],
  );
}

/** Marks a section measured by hand: a run keeps it from the page it replaces, as it stands. */
export const BY_HAND = 'not rewritten by `npm run bench`';

/**
 * The sections of a previous page measured by hand (their heading says BY_HAND), subsections
 * included; such a subsection of a generated section is kept as a section of its own.
 */
export function handSections(previous: string): string[] {
  const heading = (s: string): string => s.slice(0, s.indexOf('\n'));
  return previous.split(/^(?=## )/m).flatMap((s) => {
    if (!s.startsWith('## ')) return [];
    if (heading(s).includes(BY_HAND)) return [s.trimEnd()];
    return s
      .split(/^(?=### )/m)
      .filter((sub) => sub.startsWith('### ') && heading(sub).includes(BY_HAND))
      .map((sub) => sub.slice(1).trimEnd());
  });
}

export function renderReport(
  r: RunResults,
  charts: { dir: string; charts: readonly Chart[] } | undefined,
  byHand: readonly string[] = [],
): string {
  const figs = figuresOf(r);
  const parts: string[] = [
    '# Benchmarks',
    r.quick
      ? '> **Quick mode** (`--quick`): small sizes and few runs, a smoke test of the suite. These are not figures to quote.\n'
      : '',
    '## Summary',
    runLine(r, byHand.length),
    r.notes?.length ? `**About this run** (noted by hand): ${r.notes.join(' ')}` : '',
    '**Which mode.** Upstream kube-proxy’s default is iptables mode and its recommended one nftables mode; this daemon implements both, and IPVS and userspace. ' +
      `Run nftables mode where the kernel has nf_tables (upstream asks for Linux 5.13): one map lookup per packet at any number of Services${fastestFullSync(figs) === 'nftables' ? ', and the fastest full sync of this run' : ''}; ` +
      'iptables mode where other tools on the node expect iptables rules (the first packet walks one rule per Service); IPVS mode where you run it today; userspace mode only where the kernel has neither. ' +
      'What each costs at 1,000 and 10,000 Services × 10 endpoints (where a mode did not reach 10,000, the largest size it reached, named in the cell), “exec” being upstream’s way, the same work done by the command-line tools upstream runs, timed in this run:',
    renderGlance(figs),
    'Upstream kube-proxy’s own published figures beside ours for the same cluster shape (their hardware; their conditions are stated under each mode’s table below; they give the scale, not a ratio):',
    renderPublishedGlance(figs),
    chartLinks(charts),
    '“Ours”: this daemon or its proxier. “End to end”: the daemon process against a test API server, timed with packets from a client namespace. ' +
      '“In process”: the proxier fed by the model in a running process, no start-up, beside the exec peer. ' +
      '“Published, not measured here”: upstream kube-proxy’s own figure for the same cluster shape, on their hardware, with the link and their conditions: it gives the scale, not a ratio.',
    ...MODES.map((m) => renderModeTable(m, figs)),
    '## Goals',
    'What this project set out to reach, met or missed in this run.',
    goals(r),
    '## Machine and run',
    machine(r),
    `The detail sections below are all from this run. The machine may be shared: a 1-minute load average above ${r.environment.cpus} (the CPU count) means other work competed for the CPUs, ` +
      'which inflates wall-clock figures of both sides and widens their spread. Where a module reports CPU time, that figure is the steadier one.',
    ...r.modules.flatMap((m) => m.sections.map((s) => renderSection(s))),
    ...byHand,
    '## Reproduce',
    '`npm run bench` as root (the modules create throwaway network namespaces and one QEMU guest; nothing touches the root namespace) writes this page, docs/bench/results.json and the charts. ' +
      '`npm run bench -- model ipset` runs a subset and prints it; `--quick` shrinks sizes for a smoke test; `--out FILE` writes elsewhere; `--render docs/bench/results.json` renders this page and the charts again from a run’s figures.',
  ];
  return withoutIssueNumbers(
    parts
      .filter((p) => p !== '')
      .join('\n\n')
      .replace(/\n{3,}/g, '\n\n') + '\n',
  );
}
