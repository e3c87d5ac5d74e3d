// deploy/monitoring/: the alerting rules pass Prometheus' own rule checker (promtool, Debian's
// prometheus package), every dashboard expression parses (Prometheus' PromQL grammar, and
// promtool again on recording rules made from them), every alert has its runbook line and its
// README section, and every metric either file reads is one the code registers, in the modes
// the README says. That the running daemon serves them: test/kernel/monitoring-metrics.test.ts.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parse as parseYAML, stringify } from 'yaml';
import {
  allExpressions,
  allPanels,
  familiesNamed,
  grafanaToPromQL,
  loadAlerts,
  loadDashboard,
  MODES,
  ONLY_IN,
  parsePromQL,
  README_FILE,
  registeredFamilies,
  RULES_FILE,
  RULES_TEST_FILE,
} from '../../helpers/monitoring.ts';

const PROMTOOL = '/usr/bin/promtool';

function promtool(args: string[]): { code: number | null; out: string } {
  const r = spawnSync(PROMTOOL, args, { encoding: 'utf8', timeout: 30_000 });
  if (r.error)
    throw new Error(`${PROMTOOL} (Debian's prometheus package; scripts/setup.sh installs it): ${r.error.message}`);
  return { code: r.status, out: r.stdout + r.stderr };
}

test('promtool accepts the alerting rules', (t) => {
  const r = promtool(['check', 'rules', RULES_FILE]);
  t.is(r.code, 0, r.out);
  t.regex(r.out, new RegExp(`SUCCESS: ${loadAlerts().length} rules found`));
});

interface RuleTests {
  rule_files: string[];
  tests: {
    alert_rule_test: { alertname: string; exp_alerts: { exp_annotations?: Record<string, string> }[] }[];
  }[];
}

test('promtool test rules: every alert fires on its series after its for, with its labels and annotations', (t) => {
  const spec = parseYAML(readFileSync(RULES_TEST_FILE, 'utf8')) as RuleTests;
  const alerts = new Map(loadAlerts().map((a) => [a.alert, a]));
  const tested = new Set<string>();
  for (const test of spec.tests)
    for (const case_ of test.alert_rule_test) {
      const rule = alerts.get(case_.alertname);
      if (rule === undefined) return t.fail(`${case_.alertname} is not an alert of ${RULES_FILE}`);
      if (case_.exp_alerts.length > 0) tested.add(case_.alertname);
      // promtool compares every annotation: the fixed ones come from the rules, one truth.
      for (const exp of case_.exp_alerts)
        exp.exp_annotations = {
          summary: rule.annotations!['summary']!,
          runbook: rule.annotations!['runbook']!,
          ...exp.exp_annotations,
        };
    }
  t.deepEqual(
    [...alerts.keys()].filter((a) => !tested.has(a)),
    [],
    'every alert is seen firing',
  );
  const dir = mkdtempSync(join(tmpdir(), 'kpts-rule-tests-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'rules.test.yaml');
  writeFileSync(file, stringify({ ...spec, rule_files: [RULES_FILE] }));
  const r = promtool(['test', 'rules', file]);
  t.is(r.code, 0, r.out);
});

test('every alert has a severity, a summary, a description and a runbook line, and a README section', (t) => {
  const readme = readFileSync(README_FILE, 'utf8');
  const sections = [...readme.matchAll(/^### (\S+)$/gm)].map((m) => m[1]);
  const alerts = loadAlerts();
  for (const a of alerts) {
    t.regex(a.labels?.['severity'] ?? '', /^(critical|warning|info)$/, a.alert);
    for (const k of ['summary', 'description', 'runbook'])
      t.true((a.annotations?.[k] ?? '').trim().length > 10, `${a.alert} has annotations.${k}`);
  }
  t.deepEqual(
    sections,
    alerts.map((a) => a.alert),
    'README.md has one "### Alert" section per alert, in order',
  );
});

test('every PromQL expression parses (Prometheus grammar), with no unknown Grafana variable left', (t) => {
  const exprs = allExpressions();
  t.true(exprs.length > 40);
  for (const { where, expr } of exprs) {
    const promql = grafanaToPromQL(expr);
    t.deepEqual(parsePromQL(promql).errors, [], `${where}: ${expr}`);
    // Outside strings, no $variable may remain: Prometheus would refuse it.
    t.notRegex(promql.replace(/"[^"]*"/g, '""'), /\$/, `${where}: a Grafana variable outside a string`);
  }
});

test('promtool accepts every dashboard expression (as recording rules)', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kpts-dashboard-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const rules = allExpressions()
    .filter((e) => e.where.startsWith('panel'))
    .map((e, i) => ({ record: `dashboard:expr_${i}`, expr: grafanaToPromQL(e.expr) }));
  const file = join(dir, 'dashboard.rules.yaml');
  writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
  const r = promtool(['check', 'rules', file]);
  t.is(r.code, 0, r.out);
});

test('the dashboard: unique panel ids, a data source variable on every query, variables defined, grid inside 24 columns', (t) => {
  const d = loadDashboard();
  const panels = allPanels(d);
  t.is(new Set(panels.map((p) => p.id)).size, panels.length, 'panel ids are unique');
  const vars = new Set(d.templating.list.map((v) => v.name));
  t.deepEqual([...vars].sort(), ['datasource', 'instance', 'job']);
  for (const p of panels) {
    t.truthy(p.gridPos, p.title);
    t.true(p.gridPos!.x + p.gridPos!.w <= 24, `${p.title} fits 24 columns`);
    if (p.type === 'row') continue;
    t.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, p.title);
    t.true((p.targets ?? []).length > 0, `${p.title} has a query`);
    t.true((p.description ?? '').length > 0, `${p.title} says what it shows`);
    for (const target of p.targets ?? [])
      for (const m of (target.expr ?? '').matchAll(/\$\{?(\w+)/g))
        t.true(vars.has(m[1]!) || m[1]!.startsWith('__'), `${p.title}: $${m[1]} is a dashboard variable`);
  }
});

test('every metric the files read is registered by the code, in the modes the README table says', async (t) => {
  const byMode = new Map(await Promise.all(MODES.map(async (m) => [m, await registeredFamilies(m)] as const)));
  const union = new Set([...byMode.values()].flatMap((s) => [...s]));
  const named = familiesNamed(union);
  t.true(named.size > 30, `${named.size} metrics named`);
  for (const [family, where] of named) {
    t.true(union.has(family), `${family} (read by ${where.join(', ')}) is registered in no mode`);
    const expected = ONLY_IN[family] ?? MODES;
    for (const mode of MODES)
      t.is(byMode.get(mode)!.has(family), expected.includes(mode), `${family} in ${mode} mode (ONLY_IN)`);
  }
  // The README's table of mode-specific metrics is ONLY_IN.
  const readme = readFileSync(README_FILE, 'utf8');
  const rows = [...readme.matchAll(/^\| `(\w+)` \| ([a-z, ]+) \|$/gm)].map((m) => [m[1]!, m[2]!.split(', ')]);
  t.deepEqual(Object.fromEntries(rows), ONLY_IN, 'README.md "Mode-specific metrics" table');
});
