// The drift watches' socket, closed while our own full syncs run (the kernel then builds no
// announcements), and the daemon's pause that follows its proxiers' full syncs.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import type { LogRecord } from '../../../../src/base/logger.ts';
import type { MulticastListener } from '../../../../src/netlink/core/index.ts';
import { FullSyncPause, PausableListener } from '../../../../src/proxier/drift/pausable.ts';

function sockets() {
  const open: string[] = [];
  let n = 0;
  const make = (): MulticastListener => {
    const name = `s${++n}`;
    open.push(name);
    return { localPort: n, close: () => open.splice(open.indexOf(name), 1) };
  };
  return { open, make };
}

test('paused: no socket; counted resumes open a new one; closed: never again', (t) => {
  const s = sockets();
  const l = new PausableListener(s.make, memoryLogger());
  t.deepEqual(s.open, ['s1']);
  l.pause();
  l.pause();
  t.deepEqual(s.open, [], 'no listener while a full sync runs');
  l.resume();
  t.deepEqual(s.open, [], 'another full sync still runs');
  l.resume();
  t.deepEqual(s.open, ['s2']);
  l.resume();
  t.deepEqual(s.open, ['s2'], 'an unmatched resume changes nothing');
  l.pause();
  l.close();
  l.resume();
  t.deepEqual(s.open, [], 'closed while paused: resume opens nothing');
});

test('a socket that cannot be opened again is logged, and the watch stays quiet', (t) => {
  const logs: LogRecord[] = [];
  let calls = 0;
  const l = new PausableListener(() => {
    if (++calls > 1) throw new Error('EMFILE');
    return { localPort: 1, close: () => {} };
  }, memoryLogger(logs));
  l.pause();
  t.notThrows(() => l.resume());
  t.true(logs.some((r) => r.level === 'warn' && /periodic sync only/.test(r.msg)));
});

test('FullSyncPause: a watch attached during a full sync starts paused; detached, it is left alone', (t) => {
  const p = new FullSyncPause();
  const calls: string[] = [];
  const w = { pause: () => calls.push('pause'), resume: () => calls.push('resume') };
  p.onFullSync(true);
  const detach = p.attach(w);
  t.deepEqual(calls, ['pause']);
  p.onFullSync(false);
  t.deepEqual(calls, ['pause', 'resume']);
  p.onFullSync(true);
  p.onFullSync(false);
  t.deepEqual(calls, ['pause', 'resume', 'pause', 'resume']);
  detach();
  p.onFullSync(true);
  t.is(calls.length, 4);
});

test('firstFullSyncOnly: each proxier pauses the watch for its first full sync, not later ones', (t) => {
  const p = new FullSyncPause();
  const calls: string[] = [];
  p.attach({ pause: () => calls.push('pause'), resume: () => calls.push('resume') });
  const v4 = p.firstFullSyncOnly();
  const v6 = p.firstFullSyncOnly();
  v4(true);
  v4(false);
  v6(true);
  t.deepEqual(calls, ['pause', 'resume', 'pause']);
  v4(true); // a repair: the watch keeps listening
  v6(false);
  v4(false);
  v6(true);
  v6(false);
  t.deepEqual(calls, ['pause', 'resume', 'pause', 'resume']);
});
