// Every duration of the configuration, from a flag and from the file, swept with 0, 1ns and
// values either side of Node's timer limit (2^31-1 ms = 596h31m23.647s): none reaches the
// config out of range (597h and 600h are clamped, with one warning naming the field), a
// zero where --help says "greater than 0" is refused naming the flag, and 1ns is 1 ms,
// never silently the default.
import test, { type ExecutionContext } from 'ava';
import { FakeClock, MAX_TIMER_MS, timerDelay } from '../../../src/base/clock.ts';
import { parseCommandLine, type CommandLineResult } from '../../../src/config/cli.ts';
import { FLAGS } from '../../../src/config/flags.ts';
import { FIELDS } from '../../../src/config/schema.ts';
import type { ProxyConfig } from '../../../src/config/types.ts';
import type { ProxyMode } from '../../../src/proxier/types.ts';

const VALUES = ['0', '1ns', '596h', '597h', '600h'] as const;
const H596 = 596 * 3_600_000;

/** Where each duration field of the file lands in the effective config (in the mode that reads it). */
const GET: Readonly<Record<string, (c: ProxyConfig) => number>> = {
  'iptables.syncPeriod': (c) => c.syncPeriodMs,
  'iptables.minSyncPeriod': (c) => c.minSyncPeriodMs,
  'ipvs.syncPeriod': (c) => c.syncPeriodMs,
  'ipvs.minSyncPeriod': (c) => c.minSyncPeriodMs,
  'nftables.syncPeriod': (c) => c.syncPeriodMs,
  'nftables.minSyncPeriod': (c) => c.minSyncPeriodMs,
  'ipvs.tcpTimeout': (c) => c.ipvs.tcpTimeoutMs,
  'ipvs.tcpFinTimeout': (c) => c.ipvs.tcpFinTimeoutMs,
  'ipvs.udpTimeout': (c) => c.ipvs.udpTimeoutMs,
  'conntrack.tcpEstablishedTimeout': (c) => c.conntrack.tcpEstablishedTimeoutMs,
  'conntrack.tcpCloseWaitTimeout': (c) => c.conntrack.tcpCloseWaitTimeoutMs,
  'conntrack.udpTimeout': (c) => c.conntrack.udpTimeoutMs,
  'conntrack.udpStreamTimeout': (c) => c.conntrack.udpStreamTimeoutMs,
  configSyncPeriod: (c) => c.configSyncPeriodMs,
  udpIdleTimeout: (c) => c.udpIdleTimeoutMs,
};
/** Fields that must be greater than 0 (upstream's validation); the rest take 0 ("leave as is", "at once"). */
const POSITIVE = /(^|\.)syncPeriod$|^configSyncPeriod$|^udpIdleTimeout$/;
const isMinSync = (field: string): boolean => field.endsWith('minSyncPeriod');

function modeFor(field: string): ProxyMode {
  if (field === 'udpIdleTimeout') return 'userspace';
  const section = field.split('.')[0];
  return section === 'ipvs' || section === 'nftables' ? section : 'iptables';
}

function run(argv: string[], file?: string): CommandLineResult {
  return parseCommandLine(argv, { readFile: () => file ?? '' });
}

/** Every number in the config whose name ends in "Ms", with its path. */
function durations(c: unknown, path = ''): [string, number][] {
  if (typeof c !== 'object' || c === null) return [];
  return Object.entries(c).flatMap(([k, v]): [string, number][] =>
    typeof v === 'number' && k.endsWith('Ms') ? [[`${path}${k}`, v]] : durations(v, `${path}${k}.`),
  );
}

interface Case {
  /** What the test names: the flag or the file field. */
  name: string;
  field: string;
  result: CommandLineResult;
  fromFlag: boolean;
}

function checkCase(t: ExecutionContext, v: (typeof VALUES)[number], k: Case): void {
  const { result: r, field } = k;
  const get = GET[field];
  if (get === undefined) return void t.fail(`${field}: not in this test's table (a new duration field?)`);
  if (r.kind === 'exit') {
    t.is(r.stdout, '');
    t.true(r.stderr.includes(field), r.stderr);
    t.false(/\n\s+at /.test(r.stderr), 'no stack trace');
    const zeroRefused = v === '0' && k.fromFlag && POSITIVE.test(field);
    // syncPeriod >= minSyncPeriod: 1ns (1 ms) is below the default minimum of 1s, a long
    // minimum above the default 30s period; upstream refuses both as well.
    const belowMin = v === '1ns' && POSITIVE.test(field) && field.endsWith('syncPeriod');
    const aboveSync = isMinSync(field) && v !== '0' && v !== '1ns';
    t.true(zeroRefused || belowMin || aboveSync, `${k.name}=${v} refused: ${r.stderr}`);
    if (zeroRefused) t.regex(r.stderr, /must be greater than 0/);
    return;
  }
  t.false(v === '0' && k.fromFlag && POSITIVE.test(field), `${k.name}=0 must be refused`);
  for (const [path, ms] of durations(r.config)) t.true(ms >= 0 && ms <= MAX_TIMER_MS, `${path} = ${ms}`);
  const got = get(r.config);
  const clampWarning = r.warnings.find((w) => w.startsWith(field) && w.includes('longer than the longest timer'));
  if (v === '596h') t.is(got, H596);
  if (v === '597h' || v === '600h') {
    t.is(got, MAX_TIMER_MS);
    t.truthy(clampWarning, r.warnings.join('\n'));
    t.false(clampWarning!.includes('\n'), 'one line');
  } else t.is(clampWarning, undefined);
  if (v === '1ns') t.is(got, 1, '1ns is 1 ms, not the default');
  if (v === '0' && k.fromFlag) t.is(got, 0, 'a flag set 0: kept, not the default');
}

for (const f of FLAGS.filter((f) => f.kind === 'duration')) {
  test(`--${f.name}: 0, 1ns, 596h, 597h, 600h`, (t) => {
    if (f.noEffect) {
      for (const v of VALUES) t.is(run([`--${f.name}=${v}`]).kind, 'run');
      return;
    }
    const mode: ProxyMode = f.name.startsWith('ipvs-') ? 'ipvs' : f.name === 'udp-timeout' ? 'userspace' : 'iptables';
    const section = mode === 'ipvs' ? 'ipvs' : 'iptables';
    const field =
      f.target === '@syncPeriod'
        ? `${section}.syncPeriod`
        : f.target === '@minSyncPeriod'
          ? `${section}.minSyncPeriod`
          : f.target!;
    t.is(
      POSITIVE.test(field),
      /[Mm]ust be greater than 0/.test(f.help),
      `--${f.name}'s help says whether 0 is allowed`,
    );
    for (const v of VALUES) {
      const result = run(['--proxy-mode', mode, `--${f.name}=${v}`]);
      checkCase(t, v, { name: `--${f.name}`, field, result, fromFlag: true });
    }
  });
}

for (const [field] of [...FIELDS].filter(([, kind]) => kind === 'duration')) {
  test(`config file ${field}: 0, 1ns, 596h, 597h, 600h`, (t) => {
    for (const v of VALUES) {
      const parts = field.split('.');
      const yaml = [
        'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
        'kind: KubeProxyConfiguration',
        `mode: ${modeFor(field)}`,
        parts.length === 1 ? `${field}: "${v}"` : `${parts[0]}:\n  ${parts[1]}: "${v}"`,
      ].join('\n');
      const result = run(['--config', '/etc/kp.yaml'], yaml);
      checkCase(t, v, { name: field, field, result, fromFlag: false });
    }
  });
}

test('the one place timers are armed holds every delay to [0, 2^31-1] ms', (t) => {
  t.is(timerDelay(600 * 3_600_000), MAX_TIMER_MS);
  t.is(timerDelay(Infinity), MAX_TIMER_MS);
  t.is(timerDelay(H596), H596);
  t.is(timerDelay(-5), 0);
  t.is(timerDelay(Number.NaN), 0);
  const clock = new FakeClock(0);
  let fired = 0;
  clock.setTimer(600 * 3_600_000, () => fired++);
  clock.advance(MAX_TIMER_MS - 1);
  t.is(fired, 0, 'not at once (Node would fire an overflowing timer after 1 ms)');
  clock.advance(1);
  t.is(fired, 1, 'after the longest delay a timer can wait');
});
