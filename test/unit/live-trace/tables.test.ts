// Who owns a trace --live table: the name records the daemon's pid and start time, and a
// table is stale once no process with both runs (a pid reused by another process has another
// start time). The kernel side (listing, deleting) is in test/kernel/fault-trace-sessions.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import {
  isTraceTable,
  ownerAlive,
  processStart,
  selfOwner,
  traceTableName,
  traceTableOwner,
} from '../../../src/live-trace/tables.ts';

test('names record the owner and parse back; the earlier shared table has none', (t) => {
  const name = traceTableName({ pid: 4242, start: 987654 }, 3);
  t.is(name, 'kube-proxy-ts-trace-4242-987654-3');
  t.deepEqual(traceTableOwner(name), { pid: 4242, start: 987654 });
  t.true(isTraceTable(name));
  t.true(isTraceTable('kube-proxy-ts-trace'));
  t.is(traceTableOwner('kube-proxy-ts-trace'), undefined);
  t.is(traceTableOwner('kube-proxy-ts-trace-x-1-1'), undefined);
  t.false(isTraceTable('kube-proxy-ts'));
  t.false(isTraceTable('kube-proxy-tsx-trace-1-1-1'));
});

test('the start time is field 22 of /proc/<pid>/stat, also with spaces and parentheses in the command', async (t) => {
  const proc = await mkdtemp(join(tmpdir(), 'kpts-proc-'));
  t.teardown(() => rm(proc, { recursive: true, force: true }));
  await mkdir(join(proc, '77'));
  const rest = 'S 1 77 77 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 123456 1000 50 18446744073709551615';
  await writeFile(join(proc, '77', 'stat'), `77 (kube (proxy) ts) ${rest}\n`);
  t.is(processStart(77, proc), 123456);
  t.is(processStart(78, proc), undefined, 'no such process');
});

test('an owner is alive only with the same pid and start time', (t) => {
  const starts = new Map([[10, 500]]);
  const startOf = (pid: number): number | undefined => starts.get(pid);
  t.true(ownerAlive({ pid: 10, start: 500 }, startOf));
  t.false(ownerAlive({ pid: 10, start: 499 }, startOf), 'the pid was reused');
  t.false(ownerAlive({ pid: 11, start: 500 }, startOf), 'gone');
  const self = selfOwner();
  t.is(self.pid, process.pid);
  t.true(ownerAlive(self), 'this process, read from the real /proc');
});
