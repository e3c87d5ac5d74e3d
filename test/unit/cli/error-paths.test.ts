// The error paths of the real command line, run as an operator runs it (bin/kube-proxy-ts.js
// in a child process): a bad flag value, an unknown flag or command, a missing, unreadable or
// directory --config, broken YAML, a --write-config-to that cannot be written, and the
// subcommands' usage errors. Each fails with a status of 1 or 2, its first line names the
// value and why, and no stack frame ("    at ...") reaches the operator.
//
// Safety: every daemon case also carries --write-config-to into a temporary directory, so a
// case that wrongly got past its error would write a file and exit, never program a kernel.
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const launcher = new URL('../../../bin/kube-proxy-ts.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'kpts-cli-errors-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, text: string): string => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const out = join(dir, 'never-written.yaml');
const good = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';
const loop = join(dir, 'loop.yaml');
symlinkSync(loop, loop); // ELOOP: a --config that cannot be read, whoever runs the test
mkdirSync(join(dir, 'a-directory'));

function run(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [launcher, ...args],
      { timeout: 30_000, env: { ...process.env, NO_COLOR: '1' } },
      (e, stdout, stderr) => resolve({ code: typeof e?.code === 'number' ? e.code : 0, stdout, stderr }),
    );
  });
}

/** [what, argv, the first line of stderr must match, exit status] */
const CASES: [string, string[], RegExp, number][] = [
  [
    'a float flag given a word',
    ['--kube-api-qps', 'abc'],
    /--kube-api-qps.*'abc' is invalid\. "abc" is not a number/,
    2,
  ],
  ['-v given a word', ['--v=abc'], /-v, --v.*'abc' is invalid/, 2],
  ['a duration without a unit', ['--iptables-sync-period', '5x'], /'5x' is invalid\. "5x" is not a duration/, 2],
  [
    'an unknown mode',
    ['--proxy-mode', 'fast'],
    /invalid configuration from the command line: mode \(from --proxy-mode\): "fast" must be one of/,
    2,
  ],
  ['an unknown flag', ['--proxy-mod=nftables'], /unknown option '--proxy-mod=nftables'/, 2],
  ['an unknown command', ['foo'], /unknown command "foo": the commands are explain, trace, completion and profile/, 2],
  [
    'a missing --config',
    ['--config', join(dir, 'missing.yaml')],
    /cannot read --config .*missing\.yaml: does not exist \(ENOENT\)/,
    1,
  ],
  [
    'a directory as --config',
    ['--config', join(dir, 'a-directory')],
    /cannot read --config .*a-directory: the file is a directory/,
    1,
  ],
  [
    'an unreadable --config',
    ['--config', loop],
    /cannot read --config .*loop\.yaml: too many levels of symbolic links \(ELOOP\)/,
    1,
  ],
  [
    'a --config under a file',
    ['--config', join(file('plain.txt', 'x'), 'c.yaml')],
    /cannot read --config .*plain\.txt\/c\.yaml: .*\(ENOTDIR\)/,
    1,
  ],
  [
    'broken YAML',
    ['--config', file('broken.yaml', `${good}mode: [nftables\n`)],
    /invalid configuration from --config .*broken\.yaml: .*broken\.yaml:4:1: not valid YAML or JSON: Flow sequence/,
    1,
  ],
  [
    'a --write-config-to in a missing directory',
    ['--write-config-to', join(dir, 'nope', 'x.yaml')],
    /cannot write .*nope\/x\.yaml: the directory .*nope does not exist \(ENOENT\)/,
    1,
  ],
  [
    'a directory as --write-config-to',
    ['--write-config-to', join(dir, 'a-directory')],
    /cannot write .*a-directory: is a directory \(EISDIR\)/,
    1,
  ],
  [
    'explain with two targets',
    ['explain', 'a/b', 'c/d'],
    /^kube-proxy-ts explain: explain takes one NAMESPACE\/NAME\[:PORT\], not a\/b c\/d$/,
    2,
  ],
  ['trace with an unknown flag', ['trace', '--bogus'], /^kube-proxy-ts trace: unknown flag --bogus$/, 2],
  ['trace without --to', ['trace', '--from', '10.0.0.1'], /^kube-proxy-ts trace: trace needs --from/, 2],
  [
    'trace with a bad address',
    ['trace', '--from', '10.0.0.300', '--to', '10.96.0.1:80'],
    /^kube-proxy-ts trace: .*10\.0\.0\.300/,
    2,
  ],
  [
    'completion for an unknown shell',
    ['completion', 'fish'],
    /^kube-proxy-ts completion: needs bash or zsh, not "fish"$/,
    2,
  ],
];

const DAEMON_SAFETY = (argv: string[]): string[] =>
  ['explain', 'trace', 'completion'].includes(argv[0]!) || argv.includes('--write-config-to')
    ? argv
    : [...argv, '--write-config-to', out];

for (const [what, argv, first, status] of CASES) {
  test(`${what}: one line naming it, exit ${status}, no stack`, async (t) => {
    const r = await run(DAEMON_SAFETY(argv));
    const lines = r.stderr.split('\n');
    t.is(r.code, status, r.stderr);
    t.regex(lines[0]!, first, r.stderr);
    t.notRegex(r.stderr, /^\s+at /m, 'a stack frame reached the operator');
    t.is(r.stdout, '');
  });
}

test('a usage error of a subcommand prints that command usage, not another one', async (t) => {
  const r = await run(['explain', 'a/b', 'c/d']);
  t.regex(r.stderr, /Usage: kube-proxy-ts explain/);
  t.notRegex(r.stderr, /Usage: kube-proxy-ts trace/);
});

test('broken YAML is located by line and column', async (t) => {
  const r = await run(['--config', file('broken2.yaml', `${good}mode: [nftables\n`), '--write-config-to', out]);
  t.regex(r.stderr, /broken2\.yaml:4:1: not valid YAML or JSON: Flow sequence/);
});

test('--help fits 80 columns when not a terminal, lists the commands and shows defaults', async (t) => {
  const r = await run(['--help']);
  t.is(r.code, 0);
  const wide = r.stdout.split('\n').filter((l) => l.length > 80);
  t.deepEqual(wide, [], 'lines over 80 columns');
  for (const c of ['explain', 'trace', 'completion']) t.regex(r.stdout, new RegExp(`^  kube-proxy-ts ${c} `, 'm'));
  t.regex(r.stdout, /--kube-api-qps <number>\n\s+QPS to use .*\(default 5\)/);
  t.regex(r.stdout, /--iptables-sync-period <duration>\n(?: {8}.*\n)*? {8}.*\(default 30s\)/);
  for (const c of ['explain', 'trace', 'completion']) {
    const sub = await run([c, '--help']);
    t.is(sub.code, 0, c);
    t.deepEqual(
      sub.stdout.split('\n').filter((l) => l.length > 80),
      [],
      `${c} --help lines over 80 columns`,
    );
  }
});

test('under another Node the launcher says in one line which Node it needs and where setup put it', async (t) => {
  // The distribution's Node (18, 20) cannot load .ts files: the launcher must speak first.
  const older =
    'data:text/javascript,Object.defineProperty(process,"versions",{value:{...process.versions,node:"20.20.2"}})';
  const r = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, ['--import', older, launcher, '--help'], { timeout: 30_000 }, (e, _out, stderr) =>
      resolve({ code: typeof e?.code === 'number' ? e.code : 0, stderr }),
    );
  });
  t.is(r.code, 1);
  t.is(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
  t.regex(
    r.stderr,
    /^kube-proxy-ts: needs Node 24\.12 or a later 24\.x, not v20\.20\.2 .*node_modules\/node\/bin\/node/,
  );
  t.regex(r.stderr, /npx kube-proxy-ts/);
});
