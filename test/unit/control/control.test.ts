// The control socket and the CLI over it, on a socket in a temporary directory: 0600, JSON
// per line, errors as answers, a live daemon's socket never taken over, a dead one's
// replaced; the CLI's exit codes with and without a daemon.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { runCli } from '../../../src/cli/main.ts';
import { askDaemon, ControlError, NoDaemonError } from '../../../src/control/client.ts';
import { startControlServer } from '../../../src/control/server.ts';
import type { ExplainAnswer } from '../../../src/explain/format.ts';

async function dir(t: { teardown(f: () => Promise<void>): void }): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'kpts-control-'));
  t.teardown(() => rm(d, { recursive: true, force: true }));
  return d;
}

const ANSWER: ExplainAnswer = {
  sync: { mode: 'nftables', lastSync: { IPv4: '2026-01-01T00:00:00.000Z' }, lastChange: {}, pending: false },
  ports: [],
};

test('a query and its answer; a refused query; the socket is 0600', async (t) => {
  const path = join(await dir(t), 'sub', 'control.sock');
  const server = await startControlServer({
    path,
    logger: memoryLogger(),
    handler: async (r) => {
      if (r['op'] === 'explain') return ANSWER;
      throw new Error(`unknown query ${String(r['op'])}`);
    },
  });
  t.teardown(() => server.close());
  t.is((await stat(path)).mode & 0o777, 0o600);
  t.deepEqual(await askDaemon(path, { op: 'explain' }), ANSWER);
  const e = await t.throwsAsync(askDaemon(path, { op: 'nope' }));
  t.true(e instanceof ControlError);
  t.regex(e!.message, /unknown query nope/);

  const lines: string[] = [];
  t.is(
    await runCli(['explain', '--control-socket', path], { stdout: (s) => lines.push(s), stderr: (s) => lines.push(s) }),
    0,
  );
  t.regex(lines.join(''), /SERVICE PORT .* KERNEL/);
  t.regex(lines.join(''), /last sync: IPv4 2026-01-01/);
  const json: string[] = [];
  t.is(await runCli(['explain', '-o', 'json', '--control-socket', path], { stdout: (s) => json.push(s) }), 0);
  t.deepEqual(JSON.parse(json.join('')), ANSWER);
  const err: string[] = [];
  t.is(
    await runCli(['trace', '--from', '10.0.0.1', '--to', '10.96.0.10:80/tcp', '--control-socket', path], {
      stderr: (s) => err.push(s),
    }),
    1,
  );
  t.regex(err.join(''), /unknown query trace/);
});

test('no daemon: a clear message and exit 3; bad usage: exit 2', async (t) => {
  const path = join(await dir(t), 'control.sock');
  await t.throwsAsync(askDaemon(path, { op: 'ping' }), { instanceOf: NoDaemonError, message: /is the daemon running/ });
  const err: string[] = [];
  t.is(await runCli(['explain', '--control-socket', path], { stderr: (s) => err.push(s) }), 3);
  t.regex(err.join(''), /cannot reach the kube-proxy-ts daemon on .*control\.sock: no such socket/);
  for (const argv of [
    ['trace', '--to', '10.0.0.1:80'],
    ['trace', '--from', '10.0.0.1', '--to', '10.0.0.1'],
    ['trace', '--from', 'x', '--to', '10.0.0.1:80'],
    ['trace', '--from', '10.0.0.1', '--to', '10.0.0.1:80/icmp'],
    ['explain', '--output', 'yaml'],
    ['explain', 'a', 'b'],
    ['explain', '--bogus'],
  ]) {
    t.is(await runCli([...argv, '--control-socket', path], { stderr: () => undefined }), 2, argv.join(' '));
  }
});

test("a stale socket file is replaced; a live daemon's is not", async (t) => {
  const d = await dir(t);
  const stale = join(d, 'stale.sock');
  // A socket file nobody listens on any more: its process killed (a clean close would unlink it).
  const child = spawn(
    process.execPath,
    ['-e', `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => console.log('up'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  child.kill('SIGKILL');
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.true((await stat(stale)).isSocket(), 'the dead daemon left its socket file');
  const s = await startControlServer({ path: stale, logger: memoryLogger(), handler: async () => 'pong' });
  t.is(await askDaemon(stale, {}), 'pong');
  await t.throwsAsync(startControlServer({ path: stale, logger: memoryLogger(), handler: async () => 'other' }), {
    message: /another kube-proxy-ts answers/,
  });
  t.is(await askDaemon(stale, {}), 'pong', 'the first daemon still answers');
  await s.close();
  await t.throwsAsync(stat(stale), undefined, 'the socket file is removed on close');
});

test('bad requests are answered with an error, never a crash', async (t) => {
  const path = join(await dir(t), 'c.sock');
  const s = await startControlServer({ path, logger: memoryLogger(), handler: async () => 'ok' });
  t.teardown(() => s.close());
  const { createConnection } = await import('node:net');
  const raw = (text: string) =>
    new Promise<string>((resolve) => {
      let buf = '';
      const c = createConnection(path, () => c.write(text));
      c.on('data', (d) => (buf += d.toString()));
      c.on('end', () => resolve(buf));
    });
  t.regex(await raw('not json\n'), /"ok":false,"error":"not JSON/);
  t.regex(await raw('[1]\n'), /a request is a JSON object/);
});

test('who answered: the first line names the daemon; --node/--hostname-override refuse another node (exit 4)', async (t) => {
  const path = join(await dir(t), 'control.sock');
  const daemon = { nodeName: 'node-b', mode: 'iptables', pid: 4242, socket: path };
  const asked: unknown[] = [];
  const server = await startControlServer({
    path,
    logger: memoryLogger(),
    handler: async (r) => {
      asked.push(r['op']);
      if (r['op'] === 'ping') return { daemon, mode: 'iptables', families: ['IPv4'] };
      return { ...ANSWER, daemon };
    },
  });
  t.teardown(() => server.close());
  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli([...argv, '--control-socket', path], {
      stdout: (s) => out.push(s),
      stderr: (s) => err.push(s),
    });
    return { code, out: out.join(''), err: err.join('') };
  };
  const table = await run('explain');
  t.is(table.code, 0);
  t.is(table.out.split('\n')[0], `daemon: node node-b, mode iptables, pid 4242, socket ${path}`);
  t.deepEqual(JSON.parse((await run('explain', '-o', 'json')).out).daemon, daemon);
  t.is((await run('explain', '--node', 'Node-B')).code, 0, 'names compare as the daemon makes them (lower case)');
  t.is((await run('explain', '--hostname-override', 'node-b')).code, 0);
  asked.length = 0;
  for (const argv of [
    ['explain', '--node', 'node-a'],
    ['trace', '--from', '10.0.0.1', '--to', '10.96.0.10:80', '--hostname-override', 'node-a', '--live'],
  ]) {
    const r = await run(...argv);
    t.is(r.code, 4, argv.join(' '));
    t.is(r.out, '');
    t.is(
      r.err,
      `kube-proxy-ts ${argv[0]}: the daemon on ${path} serves node node-b (mode iptables, pid 4242), not node-a: is this the right --control-socket?\n`,
    );
  }
  t.deepEqual(asked, ['ping', 'ping'], 'the query itself (and a live trace) never reached the wrong daemon');
  t.is((await run('explain', '--node', 'a', '--hostname-override', 'b')).code, 2);
});

test('an older daemon that does not say who it is: named so; the --node guard refuses it', async (t) => {
  const path = join(await dir(t), 'control.sock');
  const server = await startControlServer({
    path,
    logger: memoryLogger(),
    handler: async (r) => (r['op'] === 'ping' ? { mode: 'nftables', families: ['IPv4'] } : ANSWER),
  });
  t.teardown(() => server.close());
  const out: string[] = [];
  t.is(await runCli(['explain', '--control-socket', path], { stdout: (s) => out.push(s) }), 0);
  t.regex(out.join(''), /^daemon: \(it did not say which node it serves/);
  const err: string[] = [];
  t.is(await runCli(['explain', '--node', 'x', '--control-socket', path], { stderr: (s) => err.push(s) }), 4);
  t.regex(err.join(''), /does not say which node it serves/);
});
