// Why a file could not be read or written, in words an operator acts on, with the errno for
// searching: "does not exist (ENOENT)". Node's own messages name the syscall and, for
// --write-config-to, the temporary file, which the operator never asked for.

import { errorMessage } from '../base/errors.ts';

const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'does not exist',
  EISDIR: 'is a directory',
  ENOTDIR: 'a component of the path is not a directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'the name is too long',
  EEXIST: 'already exists',
};

/** "does not exist (ENOENT)", or the error's message when it carries no known errno. */
export function fileErrorReason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const reason = code !== undefined ? REASONS[code] : undefined;
  return reason !== undefined ? `${reason} (${code})` : errorMessage(e);
}

/** The errno of a file error, if any. */
export const fileErrorCode = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code;
