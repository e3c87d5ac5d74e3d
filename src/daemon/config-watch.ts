// The --config file is watched, as upstream's Options.initWatcher does: when it changes on
// disk (its content, a rename over it, its removal) kube-proxy-ts logs why and exits 1, so
// that systemd (Restart=on-failure) or the DaemonSet restarts it with the new file. The
// directory is watched, not the file: editors and ConfigMap updates replace the file (or a
// symlink to it) rather than write into it. An event whose content is unchanged (a touch)
// is ignored.

import { watch as fsWatch } from 'node:fs';
import { readConfigText } from '../config/cli.ts';
import { dirname } from 'node:path';
import type { Logger } from '../base/logger.ts';

export interface Watcher {
  close(): void;
}

/** Calls onEvent for every change in the file's directory (and on a watch error). */
export type WatchFn = (path: string, onEvent: () => void) => Watcher;

export const watchDirectory: WatchFn = (path, onEvent) => {
  const w = fsWatch(dirname(path), { persistent: false }, () => onEvent());
  // The directory itself removed (or the watch broken): re-reading the file decides.
  w.on('error', () => onEvent());
  return { close: () => w.close() };
};

export interface ConfigWatchOptions {
  path: string;
  /** The text the daemon was started with. */
  initialText: string;
  logger: Logger;
  /** Called once, with the reason, when the file changed. */
  onChanged: (reason: string) => void;
  watch?: WatchFn;
  /** Reads the file; undefined when it is gone (or refused: too large, not a regular file). Default readConfigText. */
  readFile?: (path: string) => string | undefined;
}

const readOrUndefined = (path: string): string | undefined => {
  try {
    return readConfigText(path);
  } catch {
    return undefined;
  }
};

export function watchConfigFile(opts: ConfigWatchOptions): Watcher {
  const read = opts.readFile ?? readOrUndefined;
  let done = false;
  const w: Watcher = (opts.watch ?? watchDirectory)(opts.path, () => {
    if (done) return;
    const text = read(opts.path);
    if (text === opts.initialText) return;
    done = true;
    const reason = text === undefined ? 'the file was removed' : 'its content was updated';
    opts.logger.error('The configuration file changed; exiting so that kube-proxy-ts restarts with it', {
      path: opts.path,
      reason,
    });
    w.close();
    opts.onChanged(reason);
  });
  return w;
}
