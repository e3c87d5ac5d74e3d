import { spawnSync } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { detectJournal, levelForVerbosity } from '../../../src/log/logger.ts';
import { captureLog } from '../../helpers/log-capture.ts';

test('klog verbosity: 0-1 info, 2 and above debug', (t) => {
  t.is(levelForVerbosity(0), 'info');
  t.is(levelForVerbosity(1), 'info');
  t.is(levelForVerbosity(2), 'debug');
  t.is(levelForVerbosity(9), 'debug');
});

test('under journald every line carries its syslog priority', async (t) => {
  const c = captureLog({ journal: true, verbosity: 2 });
  c.logger.error('Sync failed', { op: 'add chain ip kube-proxy services', errno: 'EEXIST' });
  c.logger.warn('Skipping Service', { service: 'default/web', reason: 'invalid clusterIP' });
  c.logger.info('Synced rules');
  c.logger.debug('Transaction', { ops: 42 });
  t.deepEqual(await c.lines(), [
    '<3>Sync failed op="add chain ip kube-proxy services" errno=EEXIST',
    '<4>Skipping Service service=default/web reason="invalid clusterIP"',
    '<6>Synced rules',
    '<7>Transaction ops=42',
  ]);
});

test('debug is dropped at -v 0 and 1', async (t) => {
  const c = captureLog({ journal: true, verbosity: 1 });
  c.logger.debug('hidden');
  c.logger.info('shown');
  t.deepEqual(await c.lines(), ['<6>shown']);
});

test('a multi-line error (stack) keeps the priority on every line', async (t) => {
  const c = captureLog({ journal: true });
  const err = new Error('netlink: ENOBUFS', { cause: new Error('socket buffer full') });
  c.logger.error('Unexpected exception', { err });
  const lines = await c.lines();
  t.true(lines.length > 2);
  t.is(lines[0], '<3>Unexpected exception err="netlink: ENOBUFS: socket buffer full"');
  t.is(lines[1], '<3>Error: netlink: ENOBUFS');
  t.true(lines.every((l) => l.startsWith('<3>')));
});

test('child loggers add their fields', async (t) => {
  const c = captureLog({ journal: true, fields: { component: 'kube-proxy-ts' } });
  c.logger.child({ mode: 'nftables' }).info('Starting', { node: 'n1' });
  t.deepEqual(await c.lines(), ['<6>Starting component=kube-proxy-ts mode=nftables node=n1']);
});

test('outside journald: human-readable lines with time and level', async (t) => {
  const c = captureLog({ journal: false });
  c.logger.warn('Port taken', { port: 30_001 });
  c.logger.info('ok');
  t.deepEqual(await c.lines(), [
    '2026-11-23T03:04:05.678Z warn  Port taken port=30001',
    '2026-11-23T03:04:05.678Z info  ok',
  ]);
});

test('JSON lines', async (t) => {
  const c = captureLog({ journal: false, format: 'json', verbosity: 2 });
  c.logger.error('Sync failed', { op: 'batch', err: new Error('EPERM'), services: 3 });
  c.logger.debug('d');
  const [a, b] = (await c.lines()).map((l) => JSON.parse(l) as Record<string, unknown>);
  t.like(a, {
    ts: Date.UTC(2026, 10, 23, 3, 4, 5, 678) / 1000,
    level: 'error',
    msg: 'Sync failed',
    op: 'batch',
    services: 3,
  });
  t.is((a!.err as { message: string }).message, 'EPERM');
  t.like(b, { level: 'debug', msg: 'd' });
});

test('JSON lines under journald are prefixed too', async (t) => {
  const c = captureLog({ journal: true, format: 'json' });
  c.logger.warn('w');
  const [line] = await c.lines();
  t.true(line!.startsWith('<4>{'));
  t.like(JSON.parse(line!.slice(3)), { level: 'warn', msg: 'w' });
});

test('detectJournal: JOURNAL_STREAM must name the stderr we have', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kpts-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const fd = openSync(join(dir, 'stderr'), 'w');
  t.teardown(() => closeSync(fd));
  const st = fstatSync(fd);
  t.true(detectJournal({ JOURNAL_STREAM: `${st.dev}:${st.ino}` }, fd));
  t.false(detectJournal({ JOURNAL_STREAM: `${st.dev}:${st.ino + 1}` }, fd));
  t.false(detectJournal({ JOURNAL_STREAM: 'garbage' }, fd));
  t.false(detectJournal({}, fd));
});

test('a process started the way systemd starts it logs with priorities by default', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kpts-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'journal-stream');
  const fd = openSync(path, 'w');
  const st = fstatSync(fd);
  const moduleUrl = new URL('../../../src/log/logger.ts', import.meta.url).href;
  const script = `const { createLogger } = await import(${JSON.stringify(moduleUrl)});
const log = createLogger({ verbosity: 2 });
log.error('e'); log.warn('w'); log.info('i'); log.debug('d');
await log.close();`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, JOURNAL_STREAM: `${st.dev}:${st.ino}` },
    stdio: ['ignore', 'ignore', fd],
    timeout: 20_000,
  });
  closeSync(fd);
  t.is(r.status, 0);
  t.deepEqual(
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l !== ''),
    ['<3>e', '<4>w', '<6>i', '<7>d'],
  );
});
