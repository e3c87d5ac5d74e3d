// Writes a file as a new file: a temporary file created exclusively (never an existing file,
// never through a symlink) in the target's directory, then renamed over the target. rename()
// replaces a symlink at the target itself, so what the link pointed at is never written, and
// a reader never sees half a file.

import { fileErrorCode, fileErrorReason } from './file-errors.ts';
import { closeSync, constants, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

export function writeNewFile(path: string, content: string, mode = 0o644): void {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  let step: 'create' | 'rename' = 'create';
  try {
    // O_EXCL: fails rather than opening anything that exists, a symlink included (O_NOFOLLOW too).
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    try {
      writeSync(fd, content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    step = 'rename';
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw new Error(`cannot write ${path}: ${whyNot(e, step, dir)}`, { cause: e });
  }
}

/** The reason in terms of what the operator named: the directory, or the path itself (never the temporary file). */
function whyNot(e: unknown, step: 'create' | 'rename', dir: string): string {
  const code = fileErrorCode(e);
  if (step === 'create' && (code === 'ENOENT' || code === 'ENOTDIR'))
    return `the directory ${dir} ${code === 'ENOENT' ? 'does not exist' : 'is not a directory'} (${code})`;
  if (step === 'create' && (code === 'EACCES' || code === 'EPERM' || code === 'EROFS'))
    return `cannot create a file in ${dir}: ${fileErrorReason(e)}`;
  return fileErrorReason(e);
}
