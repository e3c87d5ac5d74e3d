// Reading an input file (a manifest, the --config file) within limits: a regular file only,
// and no more than a stated number of bytes.
//
// The file is opened with O_NONBLOCK and judged by fstat of what was opened, not by a stat
// of the path before: a FIFO opens at once (no writer needed) and is refused instead of
// blocking the start until someone writes to it; a device (/dev/zero, /dev/urandom) is
// refused instead of read forever; a socket fails to open (ENXIO); a path swapped between a
// stat and the read cannot slip through. The read stops one byte past the limit, so a file
// that grows while it is read is refused too, and the memory held is the limit at most.

import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';

/**
 * How many aliases (`*name`) a YAML input may resolve (the yaml library's maxAliasCount).
 * A few anchors nested in each other ("billion laughs") expand to more objects than memory
 * holds; 100 is far more than a manifest or a KubeProxyConfiguration uses.
 */
export const MAX_YAML_ALIASES = 100;

/** The largest manifest file read (8 MiB); a larger one is refused, naming the limit. */
export const MAX_MANIFEST_BYTES = 8 << 20;

/** Why an input file was refused; the message is one line, without the path (the caller names it). */
export class InputFileError extends Error {
  override readonly name = 'InputFileError';
}

const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * A buffer for the whole file as fstat sizes it, plus one byte: filling that byte means the
 * file grew while it was read.
 */
function bufferFor(st: Stats, maxBytes: number): Buffer {
  if (!st.isFile()) throw new InputFileError(`is ${kindOf(st)}, not a regular file`);
  if (st.size > maxBytes) throw new InputFileError(`is ${st.size} bytes, over the limit of ${maxBytes} bytes`);
  return Buffer.allocUnsafe(st.size + 1);
}

function text(buf: Buffer, total: number, maxBytes: number): string {
  if (total === buf.length) throw new InputFileError(`grew while it was read (the limit is ${maxBytes} bytes)`);
  return buf.toString('utf8', 0, total);
}

/** Reads a regular file of at most maxBytes as UTF-8; throws InputFileError (or the open's error). */
export function readInputFileSync(path: string, maxBytes: number): string {
  const fd = openSync(path, FLAGS);
  try {
    const buf = bufferFor(fstatSync(fd), maxBytes);
    let total = 0;
    for (let n = -1; n !== 0 && total < buf.length; total += n) n = readSync(fd, buf, total, buf.length - total, null);
    return text(buf, total, maxBytes);
  } finally {
    closeSync(fd);
  }
}

/** readInputFileSync without blocking the event loop. */
export async function readInputFile(path: string, maxBytes: number): Promise<string> {
  const fh = await open(path, FLAGS);
  try {
    const buf = bufferFor(await fh.stat(), maxBytes);
    let total = 0;
    for (let n = -1; n !== 0 && total < buf.length; total += n) {
      n = (await fh.read(buf, total, buf.length - total, null)).bytesRead;
    }
    return text(buf, total, maxBytes);
  } finally {
    await fh.close();
  }
}
