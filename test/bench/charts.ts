// SVG charts of a run's figures (figures.ts), drawn by vega-lite and vega's headless renderer (no
// browser, no canvas): sync time, one-change latency, RSS, each against the number of Services,
// and daemon CPU against the churn rate. Linked from the summary; rendered from the same figures.

import { View, parse } from 'vega';
import type { TopLevelSpec } from 'vega-lite';
import { compile } from 'vega-lite';
import type { Figure } from './figures.ts';
import { OURS } from './figures.ts';

export interface Chart {
  /** File name inside the charts directory. */
  file: string;
  title: string;
  /** The series the chart draws, as its legend names them. */
  series: string[];
  svg: string;
}

interface Point {
  x: number;
  y: number;
  series: string;
}

/** Legend labels are never cut short: the test and the reader look for every series by name. */
const LEGEND = { orient: 'bottom', columns: 1, labelLimit: 1000, title: null } as const;

interface Axis {
  title: string;
  scale: 'log' | 'symlog' | 'linear';
}

function spec(title: string, points: Point[], x: Axis, y: Axis): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 560,
    height: 300,
    data: { values: points },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'x', type: 'quantitative', title: x.title, scale: { type: x.scale } },
      y: { field: 'y', type: 'quantitative', title: y.title, scale: { type: y.scale } },
      color: { field: 'series', type: 'nominal', legend: LEGEND },
    },
  };
}

async function render(file: string, title: string, points: Point[], x: Axis, y: Axis): Promise<Chart> {
  const view = new View(parse(compile(spec(title, points, x, y)).spec), { renderer: 'none' });
  try {
    const svg = await view.toSVG();
    return { file, title, series: [...new Set(points.map((p) => p.series))], svg };
  } finally {
    view.finalize();
  }
}

/** The series of a figure; IPVS's ran under QEMU, which the legend says (not comparable with the host's). */
const who = (f: Figure): string =>
  `${f.mode}: ${f.series === OURS ? 'ours' : `exec ${f.series}`}${f.where ? ` (${f.where})` : ''}`;

/** Against the number of Services, × 10 endpoints only (the other shapes are single points). */
const perServices = (figs: readonly Figure[], pick: (f: Figure) => boolean, series: (f: Figure) => string): Point[] =>
  figs
    .filter((f) => pick(f) && f.endpoints === 10)
    .sort((a, b) => a.services - b.services)
    .map((f) => ({ x: f.services, y: f.value, series: series(f) }));

export async function renderCharts(figs: readonly Figure[]): Promise<Chart[]> {
  const services: Axis = { title: 'Services (× 10 endpoints)', scale: 'log' };
  const charts: Chart[] = [];
  const sync = perServices(figs, (f) => f.metric === 'fullSync', who);
  if (sync.length)
    charts.push(
      await render('sync-time.svg', 'Full sync from empty, in process: ours vs the exec peers', sync, services, {
        title: 'ms (log)',
        scale: 'log',
      }),
    );
  const change = perServices(
    figs,
    (f) => f.metric === 'oneChange' || (f.metric === 'changeE2E' && f.series === OURS),
    (f) => (f.metric === 'oneChange' ? `${who(f)}, in process` : `${f.mode}: ours, end to end (${f.variant})`),
  );
  if (change.length)
    charts.push(
      await render('one-change.svg', 'One change: in process and end to end', change, services, {
        title: 'ms (log)',
        scale: 'log',
      }),
    );
  const rss = figs
    .filter((f) => f.metric === 'rss' && (f.endpoints === 10 || f.services === 0))
    .sort((a, b) => a.services - b.services)
    .map((f) => ({ x: f.services, y: f.value, series: `${f.mode}: ${f.variant ?? 'RSS'}` }));
  if (rss.length)
    charts.push(
      await render(
        'rss.svg',
        'Daemon RSS, end to end',
        rss,
        { title: 'Services (× 10 endpoints; 0 = idle)', scale: 'symlog' },
        { title: 'MiB', scale: 'linear' },
      ),
    );
  const cpu = figs
    .filter((f) => f.metric === 'churnCpu' && f.rate !== undefined)
    .sort((a, b) => a.rate! - b.rate!)
    .map((f) => ({
      x: f.rate!,
      y: f.value * 100,
      series: `${f.mode}: ${f.services.toLocaleString('en-US')} × ${f.endpoints}`,
    }));
  if (cpu.length)
    charts.push(
      await render(
        'churn-cpu.svg',
        'Daemon CPU under endpoint churn',
        cpu,
        { title: 'endpoint updates per second (log)', scale: 'log' },
        { title: '% of one core', scale: 'linear' },
      ),
    );
  return charts;
}
