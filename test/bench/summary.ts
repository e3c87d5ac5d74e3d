// The first screen of BENCHMARKS.md: an at-a-glance table across the modes, then one table per
// mode (ours, the exec peer measured in the same run, upstream's published figure for the same
// cluster shape, the goal), rendered only from the run's figures (figures.ts) and PUBLISHED.

import type { Figure, Metric, Mode, Unit } from './figures.ts';
import { MODES, OURS, shape } from './figures.ts';
import type { Published } from './published.ts';
import { PUBLISHED } from './published.ts';
import { renderTable } from './section.ts';
import { formatMs } from './stats.ts';

interface RowSpec {
  metric: Metric;
  /** Only figures with this variant; without it, one row per variant found. */
  variant?: string;
  label: string;
  goal?: string;
  /** Where a missing figure would come from (the module, and its knob where a default run skips it). */
  source: string;
  /** The modes the row applies to (default: every mode). */
  modes?: readonly Mode[];
  /** Measured on the host's kernel by the daemon itself: IPVS needs a kernel with IPVS. */
  host?: true;
}

const ROWS: readonly RowSpec[] = [
  {
    metric: 'coldStart',
    host: true,
    variant: 'last Service',
    label: 'cold start, end to end: daemon spawned → last Service answers',
    goal: '≤ 1 s at 10,000 × 10',
    source: 'e2e module',
  },
  {
    metric: 'coldStart',
    host: true,
    variant: 'daemon CPU',
    label: 'cold start: the daemon’s CPU time until then (steadier than wall time on a busy machine)',
    source: 'e2e module',
  },
  {
    metric: 'changeE2E',
    host: true,
    variant: 'new Service',
    label: 'one change, end to end: new Service written → it answers',
    goal: '≤ 10 ms at every size',
    source: 'e2e module',
  },
  {
    metric: 'changeE2E',
    host: true,
    variant: 'endpoint move',
    label: 'one change, end to end: endpoints moved → new pod answers',
    goal: '≤ 10 ms at every size',
    source: 'e2e module',
  },
  {
    metric: 'rss',
    host: true,
    variant: 'after first sync',
    label: 'daemon RSS after the first sync',
    goal: '≤ 60 MiB idle',
    source: 'e2e module',
  },
  {
    metric: 'rss',
    host: true,
    variant: 'after churn',
    label: 'daemon RSS, steady after endpoint churn',
    goal: '≤ 160 MiB at 10,000 × 10',
    source: 'e2e module',
  },
  {
    metric: 'rss',
    host: true,
    variant: 'peak',
    label: 'daemon RSS, peak',
    goal: '≤ 256 MiB at 10,000 × 10',
    source: 'e2e module',
  },
  {
    metric: 'churnCpu',
    host: true,
    label: 'daemon CPU under endpoint churn (updates through the API)',
    goal: '≤ 5 % of a core at 100 updates/s, 10,000 × 10',
    source: 'churn module (CHURN_MODES for other modes)',
  },
  {
    metric: 'churnP99',
    host: true,
    label: 'change latency under churn, p99 (packets)',
    goal: '≤ 100 ms at 100 updates/s, 10,000 × 10',
    source: 'churn module (CHURN_MODES for other modes)',
  },
  {
    metric: 'firstPacket',
    host: true,
    variant: 'last Service',
    label: 'first packet (TCP connect) to the last Service programmed',
    modes: ['nftables', 'iptables', 'ipvs'],
    goal: 'within 10 % of the first Service',
    source: 'iptables-latency module',
  },
  {
    metric: 'fullSync',
    label: 'full sync from empty, in process (model + proxier)',
    modes: ['nftables', 'iptables', 'ipvs'],
    source: 'the mode’s own module',
  },
  {
    metric: 'oneChange',
    label: 'one endpoint added, in process (model + proxier)',
    modes: ['nftables', 'iptables', 'ipvs'],
    goal: '≤ 10 ms at every size',
    source: 'the mode’s own module',
  },
  {
    metric: 'roundTrip',
    label: 'round trip on an open connection, p50',
    modes: ['userspace'],
    source: 'userspace module',
  },
];

export function formatValue(value: number, unit: Unit): string {
  if (unit === 'ms') return formatMs(value);
  if (unit === 'MiB') return `${value.toFixed(0)} MiB`;
  return `${(value * 100).toFixed(1)} % of a core`;
}

const key = (services: number, endpoints: number, variant: string | undefined): string =>
  `${services}|${endpoints}|${variant ?? ''}`;

const rowShape = (f: { services: number; endpoints: number; variant?: string; rate?: number }): string =>
  `${shape(f.services, f.endpoints)}${f.rate !== undefined ? ` at ${f.rate.toLocaleString('en-US')} updates/s` : ''}`;

/** The figures of one row spec, grouped by shape (and variant where the spec takes every variant). */
function groups(figs: readonly Figure[], spec: RowSpec): Map<string, Figure[]> {
  const out = new Map<string, Figure[]>();
  const sorted = [...figs].sort(
    (a, b) => a.services - b.services || a.endpoints - b.endpoints || (a.rate ?? 0) - (b.rate ?? 0),
  );
  for (const f of sorted) {
    const k = key(f.services, f.endpoints, spec.variant ? undefined : f.variant);
    out.set(k, [...(out.get(k) ?? []), f]);
  }
  return out;
}

/** Numbered sources under a mode's table: "[1]" in the cell, the conditions and link below. */
class Sources {
  readonly list: Published[] = [];
  ref(p: Published): string {
    let i = this.list.indexOf(p);
    if (i < 0) i = this.list.push(p) - 1;
    return `${p.figure} [${i + 1}]`;
  }
  render(): string {
    return this.list.map((p, i) => `[${i + 1}] ${p.conditions}: ${p.link} (published, not measured here)`).join('  \n');
  }
}

/** Rows by cluster size, then endpoints: "10,000 × 2" before "10,000 × 10"; idle and unstated first. */
function shapeOrder(cell: string): number {
  const m = /^([\d,]+) × (\d+)/.exec(cell);
  return m ? Number(m[1]!.replace(/,/g, '')) * 1000 + Number(m[2]) : -1;
}

function specRows(mode: Mode, spec: RowSpec, all: readonly Figure[], sources: Sources): string[][] {
  const figs = all.filter(
    (f) => f.mode === mode && f.metric === spec.metric && (!spec.variant || f.variant === spec.variant),
  );
  const pubs = PUBLISHED.filter((p) => p.mode === mode && p.metric === spec.metric && p.variant === spec.variant);
  const rows: string[][] = [];
  const used = new Set<Published>();
  for (const fs of groups(figs, spec).values()) {
    const f0 = fs[0]!;
    const ours = fs.filter((f) => f.series === OURS);
    const peers = fs.filter((f) => f.series !== OURS);
    const pub = pubs.filter((p) => p.services === f0.services && p.endpoints === f0.endpoints);
    pub.forEach((p) => used.add(p));
    rows.push([
      spec.label,
      `${rowShape(f0)}${spec.variant ? '' : f0.variant && f0.rate === undefined ? ` (${f0.variant})` : ''}`,
      ours.length ? ours.map((f) => formatValue(f.value, f.unit) + (f.where ? ` (${f.where})` : '')).join('; ') : '—',
      peers.length ? peers.map((f) => `${f.series}: ${formatValue(f.value, f.unit)}`).join('; ') : '—',
      pub.length ? pub.map((p) => sources.ref(p)).join('; ') : '—',
      spec.goal ?? '',
    ]);
  }
  for (const p of pubs.filter((x) => !used.has(x)))
    rows.push([
      spec.label,
      p.services ? shape(p.services, p.endpoints) : 'not stated',
      'not in this run',
      '—',
      sources.ref(p),
      spec.goal ?? '',
    ]);
  if (rows.length === 0) {
    const why = mode === 'ipvs' && spec.host ? 'needs a kernel with IPVS; this run’s host had none' : spec.source;
    rows.push([spec.label, '—', `not measured in this run (${why})`, '—', '—', spec.goal ?? '']);
  }
  return rows.sort((a, b) => shapeOrder(a[1]!) - shapeOrder(b[1]!));
}

const MODE_NOTES: Record<Mode, string> = {
  nftables:
    'Upstream’s recommended mode; needs nf_tables in the kernel. The exec peer is `nft -f` loading a ruleset shaped as upstream’s nftables mode writes it.',
  iptables:
    'Upstream’s default mode, here writing iptables-nft rules over nf_tables netlink. The exec peer is `iptables-nft-restore` (and `iptables-legacy-restore`) of the same ruleset, as upstream runs it.',
  ipvs: 'Needs the kernel’s IPVS modules; this machine’s kernel has none, so its in-process figures come from Debian’s kernel under QEMU (software emulation: compare the two sides, not other modes). The exec peer is `ip`, `ipset restore`, `ipvsadm --restore` and `iptables-nft-restore` as upstream runs them.',
  userspace:
    'A proxy in the daemon’s process, for kernels without nf_tables or IPVS: every byte crosses it. Beside it, the same connection direct to the pod and through nftables mode.',
};

export function renderModeTable(mode: Mode, figs: readonly Figure[]): string {
  const sources = new Sources();
  // A measure's label and goal stand on its first row only: the rows below it are its other sizes.
  const rows = ROWS.filter((spec) => !spec.modes || spec.modes.includes(mode)).flatMap((spec) =>
    specRows(mode, spec, figs, sources).map((row, i) => (i === 0 ? row : ['', ...row.slice(1, -1), ''])),
  );
  const table = renderTable(
    [
      { title: 'measure' },
      { title: 'Services × endpoints' },
      { title: 'ours (this run)', align: 'right' },
      { title: 'exec peer or baseline (this run)', align: 'right' },
      { title: 'upstream kube-proxy (published, not measured here)', align: 'right' },
      { title: 'goal' },
    ],
    rows,
  );
  const src = sources.render();
  return [`### ${mode} mode`, MODE_NOTES[mode], table, ...(src ? [src] : [])].join('\n\n');
}

/** A mode's figures of one metric (of one reading of it, where given): ours, or the exec peers'. */
function selectFigures(
  figs: readonly Figure[],
  mode: Mode,
  metric: Metric,
  variant: string | undefined,
  who: 'ours' | 'peers',
): Figure[] {
  return figs.filter(
    (f) =>
      f.mode === mode &&
      f.metric === metric &&
      (f.series === OURS) === (who === 'ours') &&
      (variant === undefined || f.variant === variant),
  );
}

/** The sizes the at-a-glance table shows, × 10 endpoints each. */
const GLANCE_SIZES = [1_000, 10_000] as const;

/**
 * Our figure at `services` × 10 with the exec peer's at the same shape beside it. Where the mode
 * did not reach the larger size (IPVS under QEMU, userspace), the largest size it did reach above
 * the smaller one stands in, named in the cell.
 */
function cost(figs: readonly Figure[], mode: Mode, metric: Metric, services: number, variant?: string): string {
  const mine = selectFigures(figs, mode, metric, variant, 'ours').filter((f) => f.endpoints === 10);
  const below = GLANCE_SIZES.filter((s) => s < services).at(-1) ?? 0;
  const pick =
    mine.find((f) => f.services === services) ??
    (services === GLANCE_SIZES.at(-1)
      ? mine
          .filter((f) => f.services > below && f.services < services)
          .sort((a, b) => a.services - b.services)
          .at(-1)
      : undefined);
  if (!pick) return '—';
  // Every exec peer of the same shape: one may be the same work by another tool, another
  // upstream's own ruleset (nftables), or the legacy backend (iptables), and they differ widely.
  const peers = selectFigures(figs, mode, metric, pick.variant, 'peers').filter(
    (f) => f.services === pick.services && f.endpoints === pick.endpoints,
  );
  const at = pick.services === services ? '' : ` at ${shape(pick.services, pick.endpoints)}`;
  const exec = peers.map((f) => `${formatValue(f.value, f.unit)} ${f.series}`).join('; ');
  return `${formatValue(pick.value, pick.unit)}${at}${exec ? ` (exec: ${exec})` : ''}`;
}

/** Two rows per mode, 1,000 and 10,000 Services × 10 endpoints: what it costs, ours beside the exec peers. */
export function renderGlance(figs: readonly Figure[]): string {
  return renderTable(
    [
      { title: 'mode' },
      { title: 'Services × endpoints' },
      { title: 'full sync, in process (exec peers)', align: 'right' },
      { title: 'one endpoint added, in process (exec peers)', align: 'right' },
      { title: 'cold start, end to end', align: 'right' },
      { title: 'new Service, end to end', align: 'right' },
      { title: 'RSS steady / peak', align: 'right' },
      { title: 'CPU at 100 updates/s', align: 'right' },
    ],
    MODES.flatMap((m) =>
      GLANCE_SIZES.map((services, i) => [
        // IPVS figures come from Debian's kernel under software emulation: not comparable across rows.
        i > 0 ? '' : m === 'ipvs' ? 'ipvs (under QEMU: compare with its exec peer only)' : m,
        shape(services, 10),
        cost(figs, m, 'fullSync', services),
        cost(figs, m, 'oneChange', services),
        cost(figs, m, 'coldStart', services, 'last Service'),
        cost(figs, m, 'changeE2E', services, 'new Service'),
        `${cost(figs, m, 'rss', services, 'after churn')} / ${cost(figs, m, 'rss', services, 'peak')}`,
        cost(figs, m, 'churnCpu', services, '100/s'),
      ]),
    ),
  );
}

/** What a published figure measured, in the words of the first screen. */
const PUBLISHED_WHAT: Record<string, string> = {
  'coldStart|last Service': 'every Service programmed from a start (ours: cold start, end to end)',
  'changeE2E|new Service': 'one new Service programmed, end to end',
  'changeE2E|endpoint move': 'an endpoint change programmed, end to end',
  'rss|peak': 'peak RSS of the daemon',
};

/**
 * Upstream kube-proxy's published figures beside ours for the same cluster shape, for the first
 * screen: theirs linked to its source, ours from this run or said to be missing.
 */
export function renderPublishedGlance(figs: readonly Figure[]): string {
  const rows = PUBLISHED.map((p) => {
    const mine = selectFigures(figs, p.mode, p.metric, p.variant, 'ours');
    const same = mine.find((f) => f.services === p.services && f.endpoints === p.endpoints);
    // Where they did not state the shape, ours at the largest size this run measured, named.
    const largest = p.services ? undefined : mine.sort((a, b) => a.services - b.services).at(-1);
    const ours = same
      ? formatValue(same.value, same.unit)
      : largest
        ? `${formatValue(largest.value, largest.unit)} at ${shape(largest.services, largest.endpoints)}`
        : 'not in this run';
    return [
      p.mode,
      PUBLISHED_WHAT[`${p.metric}|${p.variant}`] ?? `${p.metric} (${p.variant})`,
      p.services ? shape(p.services, p.endpoints) : 'not stated',
      `[${p.figure}](${p.link})`,
      ours,
    ];
  });
  return renderTable(
    [
      { title: 'mode' },
      { title: 'measure' },
      { title: 'Services × endpoints' },
      { title: 'upstream kube-proxy (published, not measured here)', align: 'right' },
      { title: 'ours (this run)', align: 'right' },
    ],
    rows,
  );
}

/**
 * The mode whose in-process full sync was fastest at 10,000 × 10 (else 1,000 × 10) in this run,
 * among the modes measured on the host (IPVS runs under QEMU: not comparable).
 */
export function fastestFullSync(figs: readonly Figure[]): Mode | undefined {
  for (const services of [10_000, 1_000]) {
    const at = figs.filter(
      (f) =>
        f.metric === 'fullSync' &&
        f.series === OURS &&
        f.mode !== 'ipvs' &&
        f.services === services &&
        f.endpoints === 10,
    );
    if (at.length > 1) return at.reduce((a, b) => (b.value < a.value ? b : a)).mode;
  }
  return undefined;
}
