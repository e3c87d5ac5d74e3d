// --write-config-to writes a new file: a symlink at the path is replaced, never followed, so
// the file it pointed at is untouched; a reader never sees half a file; nothing is left behind.
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parseCommandLine, writeConfigFile } from '../../../src/config/index.ts';

function config() {
  const r = parseCommandLine(['--hostname-override=node-a']);
  if (r.kind !== 'run') throw new Error(`bad test flags: ${r.stderr}`);
  return r.config;
}

function tempDir(t: { teardown: (f: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-write-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a symlink at the path is replaced by the file; its target is untouched', (t) => {
  const dir = tempDir(t);
  const victim = join(dir, 'elsewhere', 'passwd');
  mkdirSync(join(dir, 'elsewhere'));
  writeFileSync(victim, 'root:x:0:0\n');
  const path = join(dir, 'config.yaml');
  symlinkSync(victim, path);
  writeConfigFile(path, config());
  t.is(readFileSync(victim, 'utf8'), 'root:x:0:0\n');
  t.false(lstatSync(path).isSymbolicLink());
  t.regex(readFileSync(path, 'utf8'), /kind: KubeProxyConfiguration/);
  t.is(statSync(path).mode & 0o777, 0o644);
  t.deepEqual(readdirSync(dir).sort(), ['config.yaml', 'elsewhere'], 'no temporary file left');
});

test('a dangling symlink is replaced, not followed into creating its target', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'config.yaml');
  symlinkSync(join(dir, 'created-through-link'), path);
  writeConfigFile(path, config());
  t.false(readdirSync(dir).includes('created-through-link'));
  t.false(lstatSync(path).isSymbolicLink());
});

test('an existing file is replaced whole', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'config.yaml');
  writeFileSync(path, 'x'.repeat(100_000));
  writeConfigFile(path, config());
  t.notRegex(readFileSync(path, 'utf8'), /xxx/);
});

test('a directory that does not exist is named in the error, and nothing is left behind', (t) => {
  const dir = tempDir(t);
  t.throws(() => writeConfigFile(join(dir, 'missing', 'config.yaml'), config()), {
    message: /cannot write .*missing\/config\.yaml/,
  });
  t.deepEqual(readdirSync(dir), []);
});
