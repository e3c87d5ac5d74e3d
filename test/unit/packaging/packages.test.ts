// The .deb and the .rpm as built by `npm run package` (scripts/package.sh; built once per
// run and reused by the VM test): contents, metadata, maintainer scripts, the unit as
// packaged (systemd-analyze verify + security), lintian, and the packaged tree actually
// running on its bundled Node. Needs root (dpkg-buildpackage) and scripts/package-deps.sh.

import test from 'ava';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePackages, missingTools, REPO, tool, toolAsync, type Packages } from './build.ts';
import { DAEMON_V8_OPTIONS } from '../../../src/daemon/v8-options.ts';
import { LAUNCHER_ARGV } from '../../../scripts/launcher-args.ts';
import { DOCDIR, DOCS } from '../../../scripts/package-stage.ts';

const LIB = 'usr/lib/kube-proxy-ts';
const missing = missingTools();
let pkgs: Packages | undefined;
let buildError: Error | undefined;
let debRoot = '';
let rpmRoot = '';
const scratch = mkdtempSync(join(tmpdir(), 'kpts-packaging-'));

test.before(async (t) => {
  if (missing.length > 0) return;
  t.timeout(1_500_000);
  try {
    pkgs = await ensurePackages();
    t.log(pkgs.log.trim());
    debRoot = join(scratch, 'deb');
    rpmRoot = join(scratch, 'rpm');
    tool('/usr/bin/dpkg-deb', ['-x', pkgs.deb, debRoot]);
    tool('/bin/mkdir', ['-p', rpmRoot]);
    tool('/bin/sh', ['-c', `cd "${rpmRoot}" && /usr/bin/rpm2cpio "${pkgs.rpm}" | /usr/bin/cpio -idm --quiet`]);
  } catch (e) {
    buildError = e as Error;
  }
});

test.after.always(() => {
  rmSync(scratch, { recursive: true, force: true });
});

function built(t: { fail(m: string): void }): Packages | undefined {
  if (missing.length > 0) t.fail(`missing tools: ${missing.join(', ')}: run scripts/package-deps.sh`);
  else if (buildError) t.fail(buildError.message);
  return pkgs;
}

/** `dpkg-deb -c` -> path (without "./") -> mode string. */
function debListing(deb: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of tool('/usr/bin/dpkg-deb', ['-c', deb]).stdout.split('\n')) {
    const m = /^(\S+)\s+(\S+)\s+\d+\s+\S+\s+\S+\s+\.\/(.*?)(?: -> .*)?$/.exec(line);
    if (m && m[3] !== '') out.set(m[3]!.replace(/\/$/, ''), `${m[1]} ${m[2]}`);
  }
  return out;
}

const EXPECTED = [
  'usr/bin/kube-proxy-ts',
  `${LIB}/package.json`,
  `${LIB}/bin/kube-proxy-ts.js`,
  `${LIB}/src/daemon/main.ts`,
  `${LIB}/src/config/flags.ts`,
  `${LIB}/node_modules/node/bin/node`,
  `${LIB}/node_modules/node/LICENSE`,
  `${LIB}/node_modules/sd-notify/build/Release/notify.node`,
  `${LIB}/node_modules/netlink-socket/build/Release/netlink_socket.node`,
  `${LIB}/node_modules/@kubernetes/client-node/package.json`,
  `${LIB}/node_modules/winston/package.json`,
  'etc/kube-proxy-ts/config.yaml',
  'usr/share/man/man8/kube-proxy-ts.8.gz',
  'usr/share/bash-completion/completions/kube-proxy-ts',
  ...[...Object.keys(DOCS), 'benchmarks.md'].map((d) => `${DOCDIR}/${d}`),
];

test('the .deb holds the program, its runtime and production modules, unit, config and man page', (t) => {
  const p = built(t);
  if (!p) return;
  const files = debListing(p.deb);
  for (const f of [
    ...EXPECTED,
    'lib/systemd/system/kube-proxy-ts.service',
    'etc/default/kube-proxy-ts',
    'usr/share/doc/kube-proxy-ts/copyright',
  ]) {
    t.true(files.has(f), `${f} missing from the .deb`);
  }
  t.is(files.get(`${LIB}/node_modules/node/bin/node`), '-rwxr-xr-x root/root');
  t.is(files.get('usr/bin/kube-proxy-ts'), '-rwxr-xr-x root/root');
  t.is(files.get('etc/kube-proxy-ts'), 'drwxr-x--- root/root', 'the kubeconfig directory is root-only');
  const paths = [...files.keys()];
  // No development tooling, no other platforms' binaries, no sources under node_modules.
  for (const dev of ['ava', 'typescript', 'eslint', 'fast-check', '.bin']) {
    t.false(
      paths.some((f) => f.startsWith(`${LIB}/node_modules/${dev}/`) || f === `${LIB}/node_modules/${dev}`),
      `${dev} is in the package`,
    );
  }
  t.deepEqual(
    paths.filter((f) => /\/prebuilds\/(?!linux-x64)/.test(f) && f.split('/').length > 6),
    [],
  );
  t.deepEqual(
    paths.filter((f) => f.startsWith(`${LIB}/node_modules/`) && f.endsWith('.ts') && !f.endsWith('.d.ts')),
    [],
  );
  t.deepEqual(
    paths.filter((f) => f.includes('/obj.target/')),
    [],
  );
});

test('.deb metadata: version, architecture, dependencies, conffiles, maintainer scripts', (t) => {
  const p = built(t);
  if (!p) return;
  const field = (f: string): string => tool('/usr/bin/dpkg-deb', ['-f', p.deb, f]).stdout.trim();
  t.is(field('Package'), 'kube-proxy-ts');
  t.is(field('Version'), p.version);
  t.is(field('Architecture'), 'amd64');
  const depends = field('Depends');
  for (const d of ['libc6', 'libstdc++6', 'libsystemd0'])
    t.regex(depends, new RegExp(`\\b${d.replace('+', '\\+')}\\b`), depends);
  t.notRegex(depends, /nodejs|npm/);
  const ctl = join(scratch, 'control');
  tool('/usr/bin/dpkg-deb', ['-e', p.deb, ctl]);
  const read = (f: string): string => readFileSync(join(ctl, f), 'utf8');
  t.deepEqual(read('conffiles').trim().split('\n').sort(), [
    '/etc/default/kube-proxy-ts',
    '/etc/kube-proxy-ts/config.yaml',
  ]);
  const postinst = read('postinst');
  t.regex(postinst, /deb-systemd-helper enable 'kube-proxy-ts\.service'/, 'enable on install');
  t.regex(postinst, /_dh_action=restart/, 'restart on upgrade');
  t.regex(postinst, /_dh_action=start/, 'start on install');
  const prerm = read('prerm');
  t.regex(prerm, /"\$1" = remove[\s\S]*deb-systemd-invoke stop 'kube-proxy-ts\.service'/, 'stop on remove only');
  t.notRegex(prerm, /upgrade/);
  t.regex(read('postrm'), /deb-systemd-helper purge 'kube-proxy-ts\.service'/);
  for (const s of ['postinst', 'prerm', 'postrm'])
    t.notRegex(read(s), /--cleanup/, `${s} must never remove the programmed rules`);
});

test('the .rpm has the same layout, %config(noreplace) files, systemd scriptlets and sane requires', (t) => {
  const p = built(t);
  if (!p) return;
  const q = (...args: string[]): string => tool('/usr/bin/rpm', ['-qp', ...args, p.rpm]).stdout;
  t.is(q('--qf', '%{NAME} %{VERSION} %{ARCH}'), `kube-proxy-ts ${p.version} x86_64`);
  const files = new Set(q('-l').trim().split('\n'));
  for (const f of [...EXPECTED, 'usr/lib/systemd/system/kube-proxy-ts.service', 'etc/sysconfig/kube-proxy-ts'])
    t.true(files.has(`/${f}`), `/${f} missing from the .rpm`);
  t.deepEqual(q('-c').trim().split('\n').sort(), ['/etc/kube-proxy-ts/config.yaml', '/etc/sysconfig/kube-proxy-ts']);
  t.regex(q('-lv'), /^drwxr-x--- .* root +root .* \/etc\/kube-proxy-ts$/m, 'the kubeconfig directory is root-only');
  // noreplace: rpm --dump's flags column; %config = 1, noreplace = 16.
  for (const line of q('--dump')
    .split('\n')
    .filter((l) => l.startsWith('/etc/'))) {
    const cols = line.split(' ');
    if (cols[8] === '1') t.true((Number.parseInt(cols[7] ?? '0', 10) & 16) !== 0, `${cols[0]} is not noreplace`);
  }
  const scripts = q('--scripts');
  t.regex(scripts, /postinstall scriptlet[\s\S]*systemctl --no-reload preset kube-proxy-ts\.service/);
  t.regex(scripts, /preuninstall scriptlet[\s\S]*if \[ \$1 -eq 0 \][\s\S]*disable --now kube-proxy-ts\.service/);
  t.regex(scripts, /postuninstall scriptlet[\s\S]*if \[ \$1 -ge 1 \][\s\S]*try-restart kube-proxy-ts\.service/);
  t.notRegex(scripts, /--cleanup/);
  const requires = q('-R');
  t.notRegex(requires, /python|perl|\/usr\/bin\/node\b|nodejs/, requires);
  t.regex(requires, /libsystemd\.so\.0/);
  const provides = q('--provides');
  t.notRegex(provides, /\.node|\.bare|napi/, 'the bundled addons must not be advertised as provides');
  // The same files under /usr/lib/kube-proxy-ts in both packages.
  const debLib = [...debListing(p.deb).keys()].filter((f) => f.startsWith(`${LIB}/`)).sort();
  const rpmLib = [...files]
    .map((f) => f.slice(1))
    .filter((f) => f.startsWith(`${LIB}/`))
    .sort();
  t.deepEqual(rpmLib, debLib);
  const unit = readFileSync(join(rpmRoot, 'usr/lib/systemd/system/kube-proxy-ts.service'), 'utf8');
  t.regex(unit, /^EnvironmentFile=-\/etc\/sysconfig\/kube-proxy-ts$/m);
  t.notRegex(unit, /\/etc\/default\//);
});

/** systemd-analyze verify of a packaged unit, with ExecStart pointed into the unpacked tree. */
function verifyUnit(root: string, unitPath: string): { status: number | null; output: string } {
  const text = readFileSync(join(root, unitPath), 'utf8').replace(
    /^ExecStart=\/usr\/bin\/kube-proxy-ts /m,
    `ExecStart=${root}/usr/bin/kube-proxy-ts `,
  );
  const dir = mkdtempSync(join(scratch, 'unit-'));
  writeFileSync(join(dir, 'kube-proxy-ts.service'), text);
  const r = tool('/usr/bin/systemd-analyze', ['verify', join(dir, 'kube-proxy-ts.service')], {
    allowFail: true,
    env: { ...process.env, MANPATH: join(root, 'usr/share/man'), SYSTEMD_LOG_COLOR: '0' },
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

test('systemd-analyze verify passes for the unit as both packages ship it (man page found)', (t) => {
  if (!built(t)) return;
  for (const [root, unit] of [
    [debRoot, 'lib/systemd/system/kube-proxy-ts.service'],
    [rpmRoot, 'usr/lib/systemd/system/kube-proxy-ts.service'],
  ] as const) {
    const r = verifyUnit(root, unit);
    t.is(r.status, 0, r.output);
    t.is(r.output.trim(), '', r.output);
  }
});

test('systemd-analyze security rates the packaged unit OK (exposure below 2.5)', (t) => {
  if (!built(t)) return;
  const r = tool(
    '/usr/bin/systemd-analyze',
    ['security', '--offline=true', '--no-pager', join(debRoot, 'lib/systemd/system/kube-proxy-ts.service')],
    { allowFail: true },
  );
  const m = /Overall exposure level for kube-proxy-ts\.service: (\d+\.\d+)/.exec(r.stdout);
  t.truthy(m, r.stdout + r.stderr);
  const exposure = Number(m?.[1]);
  t.log(`exposure ${exposure}`);
  t.true(exposure < 2.5, r.stdout);
});

test('lintian: no errors or warnings beyond the justified overrides', async (t) => {
  const p = built(t);
  if (!p) return;
  t.timeout(600_000);
  // (--show-overrides would make lintian 2.116 exit 2 even when clean.)
  const r = await toolAsync('/usr/bin/lintian', ['--fail-on', 'error,warning', '--tag-display-limit', '0', p.deb], {
    allowFail: true,
    timeoutMs: 600_000,
  });
  const lines = r.stdout.split('\n').filter((l) => /^[EW]: /.test(l));
  t.deepEqual(lines, [], r.stdout + r.stderr);
  t.is(r.status, 0, r.stdout + r.stderr);
  const overrides = readFileSync(join(REPO, 'debian/kube-proxy-ts.lintian-overrides'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('kube-proxy-ts: ')).length;
  t.log(`lintian: clean, with ${overrides} justified override lines (debian/kube-proxy-ts.lintian-overrides)`);
});

test('the unpacked package runs on its bundled Node: entry point, native addons, dependencies', (t) => {
  const p = built(t);
  if (!p) return;
  const node = join(debRoot, LIB, 'node_modules/node/bin/node');
  t.is(
    tool(node, ['--version']).stdout.trim(),
    `v${(JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { dependencies: { node: string } }).dependencies.node}`,
  );
  // /usr/bin/kube-proxy-ts is the native launcher (ELF, no interpreter line) holding its
  // exec() arguments; they are run here from the unpacked tree (they are absolute paths).
  const launcher = readFileSync(join(debRoot, 'usr/bin/kube-proxy-ts'));
  t.is(launcher.subarray(0, 4).toString('latin1'), '\x7fELF');
  for (const a of LAUNCHER_ARGV) t.true(launcher.includes(`${a}\0`), `the launcher holds ${a}`);
  const rpmLauncher = readFileSync(join(rpmRoot, 'usr/bin/kube-proxy-ts'));
  for (const a of LAUNCHER_ARGV) t.true(rpmLauncher.includes(`${a}\0`), `the .rpm's launcher holds ${a}`);
  const v = tool(node, [...DAEMON_V8_OPTIONS, join(debRoot, LIB, 'bin/kube-proxy-ts.js'), '--version'], {
    allowFail: true,
  });
  t.is(v.status, 0, v.stderr);
  t.regex(v.stdout, new RegExp(`^kube-proxy-ts v${p.version.replaceAll('.', '\\.')}`));
  t.is(v.stderr, '', 'no warnings (type stripping is quiet on Node 24)');
  // Every production dependency and both native addons load from the packaged tree alone.
  const deps = Object.keys(
    (JSON.parse(readFileSync(join(debRoot, LIB, 'package.json'), 'utf8')) as { dependencies: Record<string, string> })
      .dependencies,
  ).filter((d) => d !== 'node');
  const script = `const { createRequire } = require('node:module');
const r = createRequire(${JSON.stringify(join(debRoot, LIB, 'package.json'))});
(async () => {
  for (const d of ${JSON.stringify(deps)}) await import(r.resolve(d));
  const n = r('netlink-socket'); const s = r('sd-notify');
  if (typeof s.ready !== 'function' || typeof n.NetlinkSocket !== 'function') throw new Error('addons');
  console.log('ok');
})().catch((e) => { console.error(e); process.exit(1); });`;
  const r = tool(node, ['-e', script], { allowFail: true, env: { PATH: '/usr/bin:/bin' } });
  t.is(r.status, 0, r.stderr);
  t.is(r.stdout.trim(), 'ok');
});
