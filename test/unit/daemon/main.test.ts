// main(): the command line to an action and an exit code, with the outside world injected.
import { EventEmitter } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { main } from '../../../src/daemon/main.ts';
import type { MainDeps } from '../../../src/daemon/main.ts';
import { createLogger } from '../../../src/log/index.ts';

function harness(extra: Partial<MainDeps> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const log = new PassThrough();
  let logText = '';
  log.on('data', (d: Buffer) => (logText += d.toString()));
  const proc = new EventEmitter();
  const exits: number[] = [];
  const deps: MainDeps = {
    stdout: (s) => out.push(s),
    stderr: (s) => err.push(s),
    proc,
    exit: (c) => exits.push(c),
    logger: () => createLogger({ stream: log, journal: false }),
    ...extra,
  };
  return { deps, out, err, proc, exits, log: () => logText };
}

class FakeDaemon {
  started = false;
  stopped = false;
  failStart: Error | undefined;
  start(): Promise<void> {
    this.started = true;
    return this.failStart ? Promise.reject(this.failStart) : Promise.resolve();
  }
  stop(): Promise<void> {
    this.stopped = true;
    return Promise.resolve();
  }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

test('--version and usage errors exit without starting anything', async (t) => {
  const h = harness();
  t.is(await main(['--version'], h.deps), 0);
  t.regex(h.out.join(''), /v\d+\.\d+\.\d+/);
  t.is(await main(['--no-such-flag'], h.deps), 2);
  t.regex(h.err.join(''), /no-such-flag/);
});

test('--write-config-to writes the effective configuration and exits 0', async (t: ExecutionContext) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-main-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const h = harness();
  const path = join(dir, 'config.yaml');
  t.is(
    await main(['--write-config-to', path, '--proxy-mode', 'nftables', '--cluster-cidr', '10.244.0.0/16'], h.deps),
    0,
  );
  const text = await readFile(path, 'utf8');
  t.regex(text, /kind: KubeProxyConfiguration/);
  t.regex(text, /10\.244\.0\.0\/16/);
  t.is(await main(['--write-config-to', join(dir, 'missing', 'x.yaml')], h.deps), 1, 'an unwritable path is exit 1');
});

test('--cleanup runs the cleanup and returns its code', async (t) => {
  let calls = 0;
  const h = harness({ cleanup: () => Promise.resolve(++calls === 1 ? 0 : 1) });
  t.is(await main(['--cleanup'], h.deps), 0);
  t.is(await main(['--cleanup'], h.deps), 1);
  const thrower = harness({ cleanup: () => Promise.reject(new Error('boom')) });
  t.is(await main(['--cleanup'], thrower.deps), 1);
  t.regex(thrower.log(), /Cleanup failed.*boom/);
});

test('serve: SIGTERM stops the daemon and exits 0', async (t) => {
  const d = new FakeDaemon();
  const h = harness({ buildDaemon: () => d });
  const run = main(['--hostname-override', 'node-a'], h.deps);
  await tick();
  t.true(d.started);
  h.proc.emit('SIGTERM', 'SIGTERM');
  t.is(await run, 0);
  t.true(d.stopped);
  t.deepEqual(h.exits, [0]);
  t.is(h.proc.listenerCount('SIGTERM'), 0, 'handlers removed');
});

test('serve: an uncaught exception exits 1; a failed start exits 1', async (t) => {
  const d = new FakeDaemon();
  const h = harness({ buildDaemon: () => d });
  const run = main([], h.deps);
  await tick();
  h.proc.emit('uncaughtException', new Error('kaboom'));
  t.is(await run, 1);
  t.regex(h.log(), /Unexpected exception.*kaboom/);

  const d2 = new FakeDaemon();
  d2.failStart = new Error('IPVS mode is unavailable: ENOENT');
  const h2 = harness({ buildDaemon: () => d2 });
  t.is(await main([], h2.deps), 1);
  t.regex(h2.log(), /Cannot start: IPVS mode is unavailable/);
  t.deepEqual(h2.exits, [1]);
});

test('--init-only runs the one-time set-up and exits with its code, never building the daemon', async (t) => {
  let built = 0;
  let inits = 0;
  const h = harness({ buildDaemon: () => (built++, new FakeDaemon()), initOnly: () => Promise.resolve((inits++, 0)) });
  t.is(await main(['--init-only', '--vmodule=x=2'], h.deps), 0);
  t.is(inits, 1);
  t.is(built, 0);
  t.regex(h.log(), /--vmodule is accepted for compatibility and has no effect/);
  const failing = harness({ initOnly: () => Promise.reject(new Error('no ip_vs')) });
  t.is(await main(['--init-only'], failing.deps), 1);
  t.regex(failing.log(), /Initialization failed: no ip_vs/);
});
