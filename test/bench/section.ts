// What a benchmark module hands to the suite runner (run.ts): one or more sections, each a
// markdown table with a short description, notes, and the issue targets it checks. Modules
// measure; run.ts only orders, renders and writes.

import type { Figure } from './figures.ts';

export type Align = 'left' | 'right';

export interface Column {
  title: string;
  align?: Align;
}

/** One issue target and how this run fared against it. */
export interface Target {
  /** Which issue and what is measured, e.g. "#6 10,000 stale entries deleted". */
  what: string;
  /** The target as the issue states it, e.g. "< 100 ms". */
  target: string;
  /** 'measured' is for figures the issue asks for without setting a threshold. */
  status: 'met' | 'missed' | 'measured' | 'not measured';
  /** The figure behind the status, or why there is none. */
  detail: string;
}

export interface Section {
  title: string;
  /** What was measured and how: sizes, the exec way it stands beside, where it ran. */
  description: string;
  columns: readonly Column[];
  rows: readonly (readonly string[])[];
  notes?: readonly string[];
  targets?: readonly Target[];
  /** The section's headline numbers, structured: the summary, the JSON and the charts are made from them. */
  figures?: readonly Figure[];
}

export interface BenchOptions {
  /** Smaller sizes and fewer runs: a smoke test of the module, not figures to publish. */
  quick: boolean;
  /** Progress lines (stderr in run.ts). */
  log: (line: string) => void;
}

export interface Bench {
  /** Needs root for network namespaces; the runner reports it as not measured otherwise. */
  needsRoot: boolean;
  run(opts: BenchOptions): Promise<Section[]>;
}

/** "|" inside a cell would end it. */
const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const out = [
    `| ${columns.map((c) => cell(c.title)).join(' | ')} |`,
    `| ${columns.map((c) => (c.align === 'right' ? '---:' : '---')).join(' | ')} |`,
  ];
  for (const row of rows) {
    if (row.length !== columns.length)
      throw new Error(`row has ${row.length} cells, table has ${columns.length} columns: ${row.join(' / ')}`);
    out.push(`| ${row.map(cell).join(' | ')} |`);
  }
  return out.join('\n');
}

export function renderSection(s: Section, level = 2): string {
  const parts = [`${'#'.repeat(level)} ${s.title}`, s.description.trim(), renderTable(s.columns, s.rows)];
  if (s.notes?.length) parts.push(s.notes.map((n) => `- ${n}`).join('\n'));
  return parts.join('\n\n') + '\n';
}

/** A section whose rows could not be measured: every row says so, the reason is given once. */
export function notMeasured(
  title: string,
  description: string,
  rows: readonly (readonly [what: string, size: string])[],
  reason: string,
  targets: readonly Omit<Target, 'status' | 'detail'>[] = [],
): Section {
  return {
    title,
    description,
    columns: [
      { title: 'measurement' },
      { title: 'size' },
      { title: 'ours' },
      { title: 'exec (upstream’s way)' },
      { title: 'status' },
    ],
    rows: rows.map(([what, size]) => [what, size, '—', '—', '**not yet measured**']),
    notes: [`Not yet measured because ${reason}.`],
    targets: targets.map((t) => ({ ...t, status: 'not measured' as const, detail: reason })),
  };
}
