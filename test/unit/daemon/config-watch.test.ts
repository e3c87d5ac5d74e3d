// A changed --config file makes the daemon exit 1 (systemd restarts it with the new file),
// as upstream's config watcher: content changes, replacement and removal count; a touch
// with the same content does not.
import { EventEmitter } from 'node:events';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { watchConfigFile } from '../../../src/daemon/config-watch.ts';
import type { WatchFn } from '../../../src/daemon/config-watch.ts';
import { main } from '../../../src/daemon/main.ts';
import { createLogger } from '../../../src/log/index.ts';

/** A watcher the test fires by hand. */
function manualWatch(): { watch: WatchFn; fire: () => void; closed: () => boolean; watching: Promise<void> } {
  let cb: (() => void) | undefined;
  let closed = false;
  let watching!: () => void;
  const started = new Promise<void>((resolve) => (watching = resolve));
  return {
    watching: started,
    watch: (_path, onEvent) => {
      cb = onEvent;
      watching();
      return { close: () => void (closed = true) };
    },
    fire: () => cb?.(),
    closed: () => closed,
  };
}

test('injected watcher: same content is ignored; new content, then nothing more; removal has its own reason', (t) => {
  const w = manualWatch();
  let disk: string | undefined = 'a: 1\n';
  const reasons: string[] = [];
  const logger = memoryLogger();
  watchConfigFile({
    path: '/etc/kp/config.yaml',
    initialText: 'a: 1\n',
    logger,
    watch: w.watch,
    readFile: () => disk,
    onChanged: (r) => reasons.push(r),
  });
  w.fire();
  t.deepEqual(reasons, [], 'a touch');
  disk = 'a: 2\n';
  w.fire();
  w.fire();
  t.deepEqual(reasons, ['its content was updated'], 'once');
  t.true(w.closed());
  t.true(logger.records.some((r) => r.level === 'error' && r.msg.startsWith('The configuration file changed')));

  const w2 = manualWatch();
  const gone: string[] = [];
  watchConfigFile({
    path: '/x',
    initialText: 'a',
    logger,
    watch: w2.watch,
    readFile: () => undefined,
    onChanged: (r) => gone.push(r),
  });
  w2.fire();
  t.deepEqual(gone, ['the file was removed']);
});

test('a real file: rewriting it is noticed; so is removing it (fs.watch on its directory)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-cfgwatch-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'config.yaml');
  await writeFile(path, 'mode: nftables\n');
  const changed = new Promise<string>((resolve) => {
    const w = watchConfigFile({ path, initialText: 'mode: nftables\n', logger: memoryLogger(), onChanged: resolve });
    t.teardown(() => w.close());
  });
  // Replaced the way editors and ConfigMaps do it: a new file renamed over the old one.
  await writeFile(join(dir, 'config.yaml.new'), 'mode: ipvs\n');
  await rename(join(dir, 'config.yaml.new'), path);
  t.is(await changed, 'its content was updated');

  await writeFile(path, 'x\n');
  const removed = new Promise<string>((resolve) => {
    const w = watchConfigFile({ path, initialText: 'x\n', logger: memoryLogger(), onChanged: resolve });
    t.teardown(() => w.close());
  });
  await rm(path);
  t.is(await removed, 'the file was removed');
});

test('main: a changed --config stops the daemon and exits 1', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-cfgmain-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'config.yaml');
  await writeFile(path, 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n');
  const w = manualWatch();
  let stopped = false;
  const exits: number[] = [];
  const log = new PassThrough();
  let text = '';
  log.on('data', (d: Buffer) => (text += d.toString()));
  const run = main(['--config', path], {
    stdout: () => {},
    stderr: () => {},
    proc: new EventEmitter(),
    exit: (c) => exits.push(c),
    logger: () => createLogger({ stream: log, journal: false }),
    watchConfig: w.watch,
    buildDaemon: () => ({ start: () => Promise.resolve(), stop: () => Promise.resolve(void (stopped = true)) }),
  });
  await w.watching;
  await writeFile(path, 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n');
  w.fire();
  t.is(await run, 1);
  t.deepEqual(exits, [1]);
  t.true(stopped);
  t.regex(text, /The configuration file changed/);
});
