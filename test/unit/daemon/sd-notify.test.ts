// The real notifier against a real unix datagram NOTIFY_SOCKET. Node has no unix datagram
// sockets, so a small python3 child binds the socket and prints every datagram it gets
// (newlines inside a datagram shown as '|').

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import {
  RecordingNotifier,
  createNotifier,
  watchdogIntervalMs,
  type SdNotifyBinding,
} from '../../../src/daemon/sd-notify.ts';

const LISTENER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("LISTENING", flush=True)
while True:
    data = s.recv(65536)
    print(data.decode("utf-8", "replace").rstrip("\\n").replace("\\n", "|"), flush=True)
`;

interface Listener {
  child: ChildProcessWithoutNullStreams;
  path: string;
  /** Resolves with the next datagram (or rejects after a bound). */
  next(timeoutMs?: number): Promise<string>;
  /** Datagrams received so far and not yet taken. */
  pending: string[];
}

async function startListener(dir: string): Promise<Listener> {
  const path = join(dir, 'notify.sock');
  const child = spawn('python3', ['-c', LISTENER, path], { stdio: ['pipe', 'pipe', 'pipe'] });
  const pending: string[] = [];
  let waiter: ((line: string) => void) | undefined;
  let ready: (() => void) | undefined;
  const readyP = new Promise<void>((resolve, reject) => {
    ready = resolve;
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`python3 listener exited with ${code}`)));
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'LISTENING') {
      ready?.();
      return;
    }
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(line);
    } else pending.push(line);
  });
  await Promise.race([
    readyP,
    new Promise((_, reject) => setTimeout(() => reject(new Error('python3 listener did not start')), 10_000)),
  ]);
  return {
    child,
    path,
    pending,
    next(timeoutMs = 5000) {
      const queued = pending.shift();
      if (queued !== undefined) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error('no datagram within bound'));
        }, timeoutMs);
        waiter = (line) => {
          clearTimeout(timer);
          resolve(line);
        };
      });
    },
  };
}

test('watchdogIntervalMs reads WATCHDOG_USEC and honours WATCHDOG_PID', (t) => {
  t.is(watchdogIntervalMs({ WATCHDOG_USEC: '20000000' }, 42), 20_000);
  t.is(watchdogIntervalMs({ WATCHDOG_USEC: '20000000', WATCHDOG_PID: '42' }, 42), 20_000);
  t.is(watchdogIntervalMs({ WATCHDOG_USEC: '20000000', WATCHDOG_PID: '43' }, 42), undefined);
  t.is(watchdogIntervalMs({ WATCHDOG_USEC: 'x' }, 42), undefined);
  t.is(watchdogIntervalMs({}, 42), undefined);
});

test('outside systemd (no NOTIFY_SOCKET) every call is a no-op and nothing is loaded', (t) => {
  const calls: string[] = [];
  const binding: SdNotifyBinding = {
    ready: () => calls.push('ready'),
    stopping: () => calls.push('stopping'),
    watchdog: () => calls.push('watchdog'),
    sendStatus: () => calls.push('status'),
  };
  const n = createNotifier({ env: { WATCHDOG_USEC: '1000000' }, clock: new FakeClock(), binding });
  n.ready();
  n.status('x');
  n.startWatchdog(() => true);
  n.stopping();
  t.deepEqual(calls, []);
  t.is(n.watchdogUsecMs, undefined);
});

test('the watchdog pings at half WatchdogSec only while healthy (recording notifier)', (t) => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const n = new RecordingNotifier({ clock, watchdogMs: 20_000, logger });
  let healthy = true;
  n.startWatchdog(() => healthy);
  clock.advance(10_000);
  t.deepEqual(n.messages, ['WATCHDOG=1', 'WATCHDOG=1']);
  healthy = false;
  clock.advance(30_000);
  t.is(n.messages.length, 2, 'no pings while wedged');
  t.true(logger.records.some((r) => r.level === 'error' && r.msg.includes('withholding')));
  healthy = true;
  clock.advance(10_000);
  t.is(n.messages.length, 3);
  n.stopWatchdog();
  clock.advance(100_000);
  t.is(n.messages.length, 3);
  t.is(clock.pending, 0);
});

test('real sd-notify: READY, STATUS, WATCHDOG, STOPPING arrive in order on a real NOTIFY_SOCKET', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kpts-notify-'));
  const listener = await startListener(dir);
  t.teardown(() => {
    listener.child.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  // libsystemd reads the variables from the process environment at each call.
  process.env.NOTIFY_SOCKET = listener.path;
  process.env.WATCHDOG_USEC = '30000000';
  delete process.env.WATCHDOG_PID;

  const clock = new FakeClock();
  const logger = memoryLogger();
  const n = createNotifier({ clock, logger });
  t.is(n.watchdogUsecMs, 30_000);

  n.ready();
  n.status('nftables: 12 services, 30 endpoints, last sync 03:04:05');
  let healthy = true;
  n.startWatchdog(() => healthy); // pings at once
  clock.advance(15_000); // half of WatchdogSec: pings again
  healthy = false;
  clock.advance(15_000); // wedged: no ping
  n.stopWatchdog();
  n.status('stopping\nnow'); // one line on the wire
  n.stopping();

  const got: string[] = [];
  for (let i = 0; i < 6; i++) got.push(await listener.next());
  t.deepEqual(got, [
    'READY=1',
    'STATUS=nftables: 12 services, 30 endpoints, last sync 03:04:05',
    'WATCHDOG=1',
    'WATCHDOG=1',
    'STATUS=stopping now',
    'STOPPING=1',
  ]);
  t.deepEqual(
    logger.records.filter((r) => r.msg.includes('sd-notify')),
    [],
    'the package loaded',
  );
  // Datagrams on a unix socket keep their order: a sentinel next proves nothing else came.
  n.status('sentinel');
  t.is(await listener.next(), 'STATUS=sentinel');
});
