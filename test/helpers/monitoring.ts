// deploy/monitoring/ as data for the tests: the alerting rules and the Grafana dashboard, every
// PromQL expression in them with where it is, the metric names each one reads (found by
// Prometheus' own PromQL grammar, @prometheus-io/lezer-promql), and which metrics the code
// registers in which proxy mode (read from the code's own registries, not from a list here).

import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { Registry } from 'prom-client';
import { parse as parseYAML } from 'yaml';
import { createMetrics, registerUserspaceMetrics, USERSPACE_METRICS } from '../../src/metrics/index.ts';
import { registerServiceTraffic } from '../../src/metrics/service-traffic.ts';
import { MODES as MODE_DEFINITIONS } from '../../src/daemon/modes/index.ts';

export const MONITORING_DIR = resolve(import.meta.dirname, '../../deploy/monitoring');
export const RULES_FILE = join(MONITORING_DIR, 'kube-proxy-ts.rules.yaml');
export const RULES_TEST_FILE = join(MONITORING_DIR, 'kube-proxy-ts.rules.test.yaml');
export const DASHBOARD_FILE = join(MONITORING_DIR, 'kube-proxy-ts.dashboard.json');
export const README_FILE = join(MONITORING_DIR, 'README.md');

export const MODES = ['nftables', 'iptables', 'ipvs', 'userspace'] as const;
export type Mode = (typeof MODES)[number];

/** Series Prometheus makes itself for each target; no exporter serves them. */
export const PROMETHEUS_MADE: ReadonlySet<string> = new Set(['up']);

/**
 * The metrics the files name that are not on /metrics in every mode, and the modes that have
 * them. deploy/monitoring/README.md carries the same table (the unit test compares them), and
 * both tests hold it to what the code registers.
 */
export const ONLY_IN: Readonly<Record<string, readonly Mode[]>> = {
  kubeproxy_sync_proxy_rules_iptables_total: ['iptables'],
  kubeproxy_sync_proxy_rules_iptables_restore_failures_total: ['iptables', 'ipvs'],
  kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total: ['iptables'],
  kubeproxy_sync_proxy_rules_nftables_sync_failures_total: ['nftables'],
  kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total: ['nftables'],
  kubeproxyts_service_packets_total: ['nftables', 'iptables', 'ipvs'],
  kubeproxyts_service_bytes_total: ['nftables', 'iptables', 'ipvs'],
  kubeproxyts_service_connections_total: ['nftables', 'iptables', 'ipvs'],
  ...Object.fromEntries(USERSPACE_METRICS.map((m) => [m, ['userspace'] as const])),
};

export interface Alert {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  gridPos?: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { expr?: string; refId?: string; legendFormat?: string }[];
  panels?: Panel[];
}

export interface Dashboard {
  title: string;
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string }[] };
}

export function loadAlerts(): Alert[] {
  const doc = parseYAML(readFileSync(RULES_FILE, 'utf8')) as { groups: { rules: Alert[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

export function loadDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

/** Every panel, those inside collapsed rows too. */
export function allPanels(d: Dashboard): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every expression of both files, named by where it is. */
export function allExpressions(): { where: string; expr: string }[] {
  const out = loadAlerts().map((a) => ({ where: `alert ${a.alert}`, expr: a.expr }));
  for (const p of allPanels(loadDashboard()))
    for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}" ${t.refId ?? ''}`, expr: t.expr ?? '' });
  return out;
}

/**
 * Grafana's variables made PromQL: interval variables stand where a duration goes; the others
 * ($job, $instance) only appear inside label matcher strings, where any text parses.
 */
export function grafanaToPromQL(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m');
}

/** Parses with Prometheus' PromQL grammar; the syntax errors' offsets, and the metric names read. */
export function parsePromQL(expr: string): { errors: number[]; metrics: string[] } {
  const tree = parser.parse(expr);
  const errors: number[] = [];
  const metrics = new Set<string>();
  const cursor = tree.cursor();
  do {
    if (cursor.type.isError) errors.push(cursor.from);
    if (cursor.name === 'VectorSelector') {
      const name = cursor.node.getChild('Identifier');
      if (name) metrics.add(expr.slice(name.from, name.to));
    }
  } while (cursor.next());
  return { errors, metrics: [...metrics] };
}

/** A histogram's series (_bucket, _sum, _count) are the histogram's name on /metrics' TYPE line. */
export function familyOf(series: string, families: ReadonlySet<string>): string {
  const m = /^(.*)_(bucket|sum|count)$/.exec(series);
  return m && families.has(m[1]!) && !families.has(series) ? m[1]! : series;
}

/** The metric families a scrape shows, from its `# TYPE` lines. */
export function familiesOnPage(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

/**
 * What the daemon registers in `mode`, as src/daemon/build.ts does: createMetrics for the
 * mode, the userspace mode's own metrics, and the per-Service traffic metrics in the modes whose
 * proxiers count traffic (every one but userspace).
 */
export async function registeredFamilies(mode: Mode): Promise<Set<string>> {
  const registry = new Registry();
  createMetrics({ registry, mode, groups: MODE_DEFINITIONS[mode].metrics.groups });
  if (mode === 'userspace') registerUserspaceMetrics(registry, () => []);
  else registerServiceTraffic(registry, () => Promise.resolve([]));
  return familiesOnPage(await registry.metrics());
}

/** The families the files read: every metric name, histogram series folded to their family. */
export function familiesNamed(families: ReadonlySet<string>): Map<string, string[]> {
  const named = new Map<string, string[]>();
  for (const { where, expr } of allExpressions())
    for (const series of parsePromQL(grafanaToPromQL(expr)).metrics) {
      if (PROMETHEUS_MADE.has(series)) continue;
      const family = familyOf(series, families);
      named.set(family, [...(named.get(family) ?? []), where]);
    }
  return named;
}
