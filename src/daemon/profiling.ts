// --profiling: a CPU profile or a heap snapshot of the running daemon on demand, asked over the
// control socket (root only) by `kube-proxy-ts profile`, where upstream serves Go's pprof on the
// metrics port. The CPU profile comes from V8's sampling profiler over node:inspector (a
// .cpuprofile, which Chrome DevTools and speedscope open); the heap snapshot from
// v8.writeHeapSnapshot (a .heapsnapshot for DevTools' Memory panel), which stops the event loop
// while it is written: seconds for a large heap. One profile at a time; the file must not exist
// yet and is created 0600 (a snapshot holds every string in the heap, credentials included).

import { open, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { isAbsolute } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';

export const MAX_CPU_SECONDS = 300;

export interface ProfileResult {
  kind: 'cpu' | 'heap';
  path: string;
  bytes: number;
}

function checkPath(path: unknown): string {
  if (typeof path !== 'string' || !isAbsolute(path)) throw new Error('profile: path must be an absolute file name');
  return path;
}

/** Claims the file (it must not exist), 0600. */
async function claim(path: string): Promise<void> {
  try {
    await (await open(path, 'wx', 0o600)).close();
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new Error(
      code === 'EEXIST' ? `profile: ${path} exists; name a new file` : `profile: cannot create ${path}: ${code}`,
      { cause: e },
    );
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

export class Profiler {
  private busy = false;

  private async once<T>(f: () => Promise<T>): Promise<T> {
    if (this.busy) throw new Error('profile: another profile is being taken; try again when it is done');
    this.busy = true;
    try {
      return await f();
    } finally {
      this.busy = false;
    }
  }

  /** Samples for `seconds` (a client that goes away ends it early), then writes the profile to `path`. */
  cpu(pathIn: unknown, seconds: unknown, signal: AbortSignal): Promise<ProfileResult> {
    const path = checkPath(pathIn);
    if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 1 || seconds > MAX_CPU_SECONDS)
      throw new Error(`profile: seconds must be 1-${MAX_CPU_SECONDS}`);
    return this.once(async () => {
      await claim(path);
      const session = new Session();
      session.connect();
      try {
        await session.post('Profiler.enable');
        await session.post('Profiler.start');
        await sleep(seconds * 1000, signal);
        const { profile } = await session.post('Profiler.stop');
        const text = JSON.stringify(profile);
        await writeFile(path, text);
        return { kind: 'cpu', path, bytes: Buffer.byteLength(text) };
      } finally {
        session.disconnect();
      }
    });
  }

  heap(pathIn: unknown): Promise<ProfileResult> {
    const path = checkPath(pathIn);
    return this.once(async () => {
      await claim(path);
      writeHeapSnapshot(path);
      const fh = await open(path, 'r');
      try {
        return { kind: 'heap', path, bytes: (await fh.stat()).size };
      } finally {
        await fh.close();
      }
    });
  }
}
