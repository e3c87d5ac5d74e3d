// Packaging sources, checked without building: the generated man page against the flag
// table, the unit's directives, the default configuration, version agreement between
// package.json / debian/changelog / the spec, bundled licenses, and the staging rules.

import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseCommandLine } from '../../../src/config/index.ts';
import { FLAGS } from '../../../src/config/flags.ts';
import { renderManPage, roffText } from '../../../scripts/gen-manpage.ts';
import { benchmarksSummary, DOCS, keepFile, productionPackages } from '../../../scripts/package-stage.ts';
import { REPO } from './build.ts';

const read = (p: string): string => readFileSync(join(REPO, p), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  version: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
};

test('the man page documents every flag of the flag table, and nothing else', (t) => {
  const page = renderManPage(FLAGS, { version: '1.2.3', date: '2026-01-02' });
  for (const f of FLAGS) {
    const dashes = f.name.length === 1 ? '\\-' : '\\-\\-';
    t.true(page.includes(`\\fB${dashes}${roffText(f.name)}\\fR`), `--${f.name} is not in the man page`);
  }
  const documented = [...page.matchAll(/^(?:\\fB\\-v\\fR, )?\\fB\\-(?:\\-)?([a-z][a-z0-9\\-]*)\\fR/gm)].map((m) =>
    m[1]!.replaceAll('\\-', '-'),
  );
  t.deepEqual(
    documented.filter((n) => n !== 'h' && n !== 'help' && n !== 'version').sort(),
    FLAGS.map((f) => f.name).sort(),
  );
  t.regex(page, /^\.TH KUBE\\-PROXY\\-TS 8 "2026-01-02" "kube\\-proxy\\-ts 1\.2\.3"/m);
});

test('the man page renders without groff warnings', (t) => {
  if (!existsSync('/usr/bin/man')) {
    t.pass('man is not installed');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'kpts-man-'));
  try {
    const file = join(dir, 'kube-proxy-ts.8');
    writeFileSync(file, renderManPage(FLAGS, { version: pkg.version }));
    const r = spawnSync('/usr/bin/man', ['--warnings', '-E', 'UTF-8', '-l', file], {
      encoding: 'utf8',
      env: { ...process.env, MANWIDTH: '80', LC_ALL: 'C.UTF-8', MAN_KEEP_FORMATTING: '' },
    });
    t.is(r.status, 0, r.stderr);
    t.is(r.stderr, '');
    t.regex(r.stdout, /--manifest-dir/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The unit's [Service] directives (repeatable ones joined by a space). */
function unitDirectives(text: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const line of text.split('\n')) {
    const x = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (x) m.set(x[1]!, m.has(x[1]!) ? `${m.get(x[1]!)} ${x[2]}` : x[2]!);
  }
  return m;
}

test('the unit: Type=notify, watchdog, restart policy, config and environment file, hardening', (t) => {
  const u = unitDirectives(read('systemd/kube-proxy-ts.service'));
  const expect: Record<string, string> = {
    Type: 'notify',
    NotifyAccess: 'main',
    WatchdogSec: '30s',
    Restart: 'on-failure',
    RestartSec: '5s',
    Wants: 'network-online.target',
    After: 'network-online.target',
    EnvironmentFile: '-/etc/default/kube-proxy-ts',
    ExecStart: '/usr/bin/kube-proxy-ts --config /etc/kube-proxy-ts/config.yaml $KUBE_PROXY_TS_ARGS',
    CapabilityBoundingSet: 'CAP_NET_ADMIN CAP_NET_RAW',
    NoNewPrivileges: 'yes',
    ProtectSystem: 'strict',
    ReadWritePaths: '/proc/sys/net -/sys/module/nf_conntrack/parameters',
    ProtectHome: 'yes',
    PrivateTmp: 'yes',
    RestrictAddressFamilies: 'AF_NETLINK AF_INET AF_INET6 AF_UNIX',
    LockPersonality: 'yes',
    SystemCallArchitectures: 'native',
    WantedBy: 'multi-user.target',
  };
  for (const [k, v] of Object.entries(expect)) t.is(u.get(k), v, k);
  // The daemon programs the host's network namespace: never a private one.
  for (const k of [
    'PrivateNetwork',
    'PrivateUsers',
    'MemoryDenyWriteExecute',
    'ProcSubset',
    'DynamicUser',
    'ExecStop',
    'ExecStopPost',
  ])
    t.false(u.has(k), `${k} must not be set`);
});

test('the default configuration is valid, nftables mode, and the environment file is empty by default', (t) => {
  const r = parseCommandLine(['--config', join(REPO, 'packaging/config.yaml')]);
  t.is(r.kind, 'run', r.kind === 'exit' ? r.stderr : '');
  if (r.kind !== 'run') return;
  t.deepEqual(r.warnings, []);
  t.is(r.config.mode, 'nftables');
  t.is(r.config.clientConnection.kubeconfig, '/etc/kube-proxy-ts/kubeconfig');
  t.regex(read('systemd/kube-proxy-ts.default'), /^KUBE_PROXY_TS_ARGS=""$/m);
});

test('the unit starts once configured: the packaged kubeconfig or the documented manifest directory', (t) => {
  const r = parseCommandLine(['--config', join(REPO, 'packaging/config.yaml')]);
  if (r.kind !== 'run') return t.fail('packaging/config.yaml does not parse');
  const manifestDir = /^# {3}manifestDir: (\S+)$/m.exec(read('packaging/config.yaml'))?.[1];
  t.is(manifestDir, '/etc/kube-proxy-ts/manifests');
  const conditions = read('systemd/kube-proxy-ts.service')
    .split('\n')
    .filter((l) => l.startsWith('Condition'));
  t.deepEqual(conditions, [
    `ConditionPathExists=|${r.config.clientConnection.kubeconfig}`,
    `ConditionPathExists=|${manifestDir}`,
  ]);
});

test('package.json, debian/changelog and the spec agree on the version; npm run package exists', (t) => {
  const changelog = /^kube-proxy-ts \(([^)]+)\)/.exec(read('debian/changelog'))?.[1];
  t.is(changelog, pkg.version);
  t.is(/^Version:\s+(\S+)$/m.exec(read('packaging/kube-proxy-ts.spec'))?.[1], pkg.version);
  t.is(pkg.scripts.package, 'bash scripts/package.sh');
  t.is(pkg.bin['kube-proxy-ts'], 'bin/kube-proxy-ts.js');
  t.regex(read('debian/control'), /^Build-Depends: debhelper-compat \(= 13\)$/m);
});

test('debian/copyright and the spec cover every license of the bundled modules', (t) => {
  const lock = JSON.parse(read('package-lock.json')) as {
    packages: Record<string, { license?: string; dev?: boolean; link?: boolean; resolved?: string }>;
  };
  // A `file:` dependency's license is on the entry its node_modules/ link resolves to.
  const entry = (p: string) => {
    const e = lock.packages[p];
    return e?.link && e.resolved !== undefined ? lock.packages[e.resolved] : e;
  };
  const licenses = new Set(productionPackages(lock).map((p) => entry(p)?.license ?? 'UNKNOWN'));
  const declared = ['MIT', 'ISC', 'Apache-2.0', 'PSF-2.0', 'Unlicense'];
  t.deepEqual(
    [...licenses].filter((l) => !declared.includes(l)),
    [],
    'a new license among the production dependencies: add it to debian/copyright and the spec',
  );
  const copyright = read('debian/copyright');
  const specLicense = /^License:\s+(.*)$/m.exec(read('packaging/kube-proxy-ts.spec'))?.[1] ?? '';
  for (const l of declared) {
    t.true(copyright.includes(l), `${l} not in debian/copyright`);
    t.true(specLicense.includes(l), `${l} not in the spec's License`);
  }
});

test("staging keeps production packages only, this platform's addons only, no build debris", (t) => {
  const lock = {
    packages: {
      '': {},
      'node_modules/a': {},
      'node_modules/ava': { dev: true },
      'node_modules/b/node_modules/c': {},
      'node_modules/x': { devOptional: true },
      'native/netlink-socket': {},
      'node_modules/netlink-socket': { link: true, resolved: 'native/netlink-socket' },
    },
  };
  t.deepEqual(productionPackages(lock), [
    'node_modules/a',
    'node_modules/b/node_modules/c',
    'node_modules/netlink-socket',
  ]);
  t.true(keepFile('node_modules/netlink-socket', 'build/Release/netlink_socket.node', 'x64', true));
  t.false(keepFile('node_modules/netlink-socket', 'src/netlink_socket.c', 'x64', true));
  t.true(keepFile('node_modules/netlink', 'prebuilds/linux-x64/node.napi.node', 'x64'));
  t.false(keepFile('node_modules/netlink', 'prebuilds/linux-arm64/node.napi.node', 'x64'));
  t.false(keepFile('node_modules/bare-fs', 'prebuilds/darwin-arm64/bare-fs.bare', 'x64'));
  t.true(keepFile('node_modules/sd-notify', 'build/Release/notify.node', 'x64', true));
  t.false(keepFile('node_modules/sd-notify', 'build/Release/obj.target/notify.node', 'x64', true));
  t.false(keepFile('node_modules/sd-notify', 'build/Makefile', 'x64', true));
  // build/ of a package that is not node-gyp's is code (openid-client ships build/index.js).
  t.true(keepFile('node_modules/openid-client', 'build/index.js', 'x64', false));
  t.false(keepFile('node_modules/fecha', 'src/fecha.ts'));
  t.true(keepFile('node_modules/node', 'bin/node'));
  t.false(keepFile('node_modules/node', 'installArchSpecificPackage.js'));
  t.false(keepFile('node_modules/a', 'index.d.ts'));
  t.false(keepFile('node_modules/a', 'README.md'));
  t.true(keepFile('node_modules/a', 'LICENSE.md'));
  t.false(keepFile('node_modules/a', '.eslintrc'));
  t.false(keepFile('node_modules/a', 'test/x.js'));
  t.true(keepFile('node_modules/a', 'lib/test.js'));
});

test("the shipped docs exist, and the benchmarks summary is BENCHMARKS.md's introduction, summary, machine and goals", (t) => {
  for (const [to, from] of Object.entries(DOCS)) t.true(existsSync(join(REPO, from)), `${from} (shipped as ${to})`);
  const summary = benchmarksSummary(read('BENCHMARKS.md'));
  t.regex(summary, /^# Benchmarks\n/);
  t.regex(summary, /^## Machine and run$/m);
  t.regex(summary, /^## (Goals|Targets)$/m);
  t.false(/^## (?!Summary|Machine and run|Goals|Targets)/m.test(summary), 'no per-module section');
  t.throws(() => benchmarksSummary('# Benchmarks\n\n## Goals\n'), { message: /Machine and run/ });
  // The page as `npm run bench` writes it: the summary kept without its charts' links.
  const page =
    '# Benchmarks\n\n## Summary\n\nOne run.\n\nCharts (from the same figures): [x](docs/bench/x.svg).\n\n### nftables mode\n\n| a |\n\n' +
    '## Goals\n\ng\n\n## Machine and run\n\nm\n\n## nftables proxier: full sync\n\nd\n';
  const shipped = benchmarksSummary(page);
  t.regex(shipped, /^### nftables mode$/m);
  t.false(shipped.includes('docs/bench/x.svg'));
  t.false(shipped.includes('## nftables proxier'));
});
