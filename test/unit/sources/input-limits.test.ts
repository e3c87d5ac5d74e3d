// Inputs read within limits, on real files: a FIFO (no writer, so a blocking open or read
// would hang), a device (/dev/zero, endless), a unix socket, a directory, a file over the
// limit; YAML alias bombs and nesting deeper than the stack. Each is refused with one line
// naming what and why, for the --config file (also through the real daemon process) and for
// a manifest, whose directory keeps serving the other files.

import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryLogger } from '../../../src/base/logger.ts';
import { MAX_CONFIG_BYTES, parseCommandLine } from '../../../src/config/cli.ts';
import { ManifestDirSource, parseManifest } from '../../../src/sources/manifest-dir.ts';
import { InputFileError, readInputFile, readInputFileSync } from '../../../src/sources/read-file.ts';
import { BIN } from '../../helpers/daemon-process.ts';
import { Recorder, waitFor } from './recorder.ts';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';
/** Nine anchors, each nine of the one before, the last used nine times: 9^10 (3.5 billion) strings if expanded. */
const ALIAS_BOMB = [
  'a: &a ["x","x","x","x","x","x","x","x","x"]',
  ...'bcdefghi'.split('').map((c, i) => `${c}: &${c} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(',')}]`),
  'j: [*i,*i,*i,*i,*i,*i,*i,*i,*i]',
].join('\n');
const DEEP = `a: ${'['.repeat(200_000)}`;

async function scratch(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-inputs-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function fifo(dir: string, name: string): string {
  const path = join(dir, name);
  execFileSync('mkfifo', [path]);
  return path;
}

async function socketAt(t: ExecutionContext, path: string): Promise<void> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(path, resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
}

test('only regular files within the limit are read; a FIFO, a device, a socket, a directory are refused at once', async (t) => {
  const dir = await scratch(t);
  const ok = join(dir, 'ok.yaml');
  await writeFile(ok, 'x'.repeat(100));
  t.is(readInputFileSync(ok, 100), 'x'.repeat(100));
  t.is(await readInputFile(ok, 100), 'x'.repeat(100));
  const refused: [string, RegExp][] = [
    [fifo(dir, 'pipe.yaml'), /^is a FIFO, not a regular file$/],
    ['/dev/zero', /^is a character device, not a regular file$/],
    [dir, /^is a directory, not a regular file$/],
    [ok, /^is 100 bytes, over the limit of 99 bytes$/],
  ];
  for (const [path, why] of refused) {
    const sync = t.throws(() => readInputFileSync(path, 99), { instanceOf: InputFileError }, path);
    t.regex(sync.message, why);
    const async = await t.throwsAsync(readInputFile(path, 99), { instanceOf: InputFileError }, path);
    t.regex(async.message, why);
  }
  const sock = join(dir, 'sock.yaml');
  await socketAt(t, sock);
  t.throws(() => readInputFileSync(sock, 99), { code: 'ENXIO' });
});

/** parseCommandLine reading real files (no injected reader). */
function configExit(path: string): { code: number; stderr: string } {
  const r = parseCommandLine(['--config', path]);
  if (r.kind !== 'exit') throw new Error(`${path}: expected a refusal, got a configuration`);
  return r;
}

const oneLine = (t: ExecutionContext, text: string, what: string): void => {
  t.is(text.trimEnd().split('\n').length, 1, `${what}: one line: ${text}`);
  t.false(/\n\s+at /.test(text), `${what}: no stack trace`);
};

test('--config: a FIFO, /dev/zero, a socket and a file over 1 MiB are refused in one line, naming why', async (t) => {
  const dir = await scratch(t);
  const big = join(dir, 'big.yaml');
  await writeFile(big, HEAD + `# ${'x'.repeat(MAX_CONFIG_BYTES)}\n`);
  const sock = join(dir, 'sock.yaml');
  await socketAt(t, sock);
  const cases: [string, RegExp][] = [
    [fifo(dir, 'pipe.yaml'), /the file is a FIFO, not a regular file/],
    ['/dev/zero', /the file is a character device, not a regular file/],
    [sock, /ENXIO/],
    [big, /the file is 1048\d+ bytes, over the limit of 1048576 bytes/],
  ];
  for (const [path, why] of cases) {
    const r = configExit(path);
    t.is(r.code, 1);
    t.true(r.stderr.startsWith(`kube-proxy-ts: cannot read --config ${path}: `), r.stderr);
    t.regex(r.stderr, why);
    oneLine(t, r.stderr, path);
  }
});

test('--config: an alias bomb, nesting deeper than the stack and a syntax error are one line each, with line and column', async (t) => {
  const dir = await scratch(t);
  const cases: [string, string, RegExp][] = [
    ['bomb.yaml', HEAD + ALIAS_BOMB, /bomb\.yaml: cannot be read: Excessive alias count/],
    ['deep.yaml', HEAD + DEEP, /deep\.yaml(:\d+:\d+)?: (not valid YAML or JSON|cannot be read): Maximum call stack/],
    [
      'bad.yaml',
      `${HEAD}mode: nftables\nmode: ipvs\n`,
      /bad\.yaml:4:1: not valid YAML or JSON: Map keys must be unique/,
    ],
  ];
  for (const [name, text, why] of cases) {
    const path = join(dir, name);
    await writeFile(path, text);
    const r = configExit(path);
    t.is(r.code, 1);
    // One line: the source, then the problem.
    const lines = r.stderr.trimEnd().split('\n');
    t.is(lines.length, 1, r.stderr);
    t.regex(lines[0]!, why);
    t.false(/\n\s+at /.test(r.stderr), 'no stack trace');
  }
});

test('the real daemon refuses --config on a FIFO and on /dev/zero at once, in one line, exit 1', async (t) => {
  const dir = await scratch(t);
  for (const path of [fifo(dir, 'pipe.yaml'), '/dev/zero']) {
    // Bounded: a daemon that blocked on the FIFO or read /dev/zero forever is killed and fails here.
    const r = spawnSync(process.execPath, [BIN, '--config', path], { timeout: 20_000, encoding: 'utf8' });
    t.is(r.signal, null, `${path}: ended by itself`);
    t.is(r.status, 1, r.stderr);
    t.regex(
      r.stderr,
      /^kube-proxy-ts: cannot read --config .*: the file is a (FIFO|character device), not a regular file\n$/,
    );
  }
});

test('manifests: an alias bomb and nesting deeper than the stack are one problem each, with a line', (t) => {
  for (const text of [ALIAS_BOMB, DEEP, `{"kind":"Service","x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`]) {
    const r = parseManifest(text);
    t.truthy(r.error, text.slice(0, 40));
    t.true(r.error!.line >= 1 && r.error!.column >= 1);
    t.false(r.error!.message.includes('\n'));
    t.deepEqual(r.objects, []);
  }
});

test('a manifest directory with a FIFO, an alias bomb and a socket among its files: each reported, the rest served', async (t) => {
  const dir = await scratch(t);
  fifo(dir, 'pipe.yaml');
  await socketAt(t, join(dir, 'sock.yaml'));
  await writeFile(join(dir, 'bomb.yaml'), ALIAS_BOMB);
  await writeFile(join(dir, 'web.yaml'), 'kind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n');
  const logger = memoryLogger();
  const source = new ManifestDirSource({ dir, logger, debounceMs: 20, rescanIntervalMs: 0 });
  t.teardown(() => source.stop());
  const rec = new Recorder();
  await source.start(rec); // resolves once the first scan is through: a FIFO would hang it
  await waitFor(() => rec.services.has('default/web'), 'web served');
  const warned = (file: string): string | undefined =>
    logger.records.find((r) => r.level === 'warn' && r.fields['file'] === file)?.msg;
  t.regex(warned('pipe.yaml') ?? '', /^manifest pipe\.yaml:1:1: file is a FIFO, not a regular file;/);
  t.regex(warned('sock.yaml') ?? '', /^manifest sock\.yaml:1:1: cannot read: .*ENXIO/);
  t.regex(warned('bomb.yaml') ?? '', /^manifest bomb\.yaml:\d+:1: Excessive alias count/);
});
