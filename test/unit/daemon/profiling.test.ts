// --profiling end to end without a kernel: `kube-proxy-ts profile` (the CLI) asks a real control
// socket, the daemon's handler takes a real V8 CPU profile and heap snapshot of this process and
// writes them where the CLI said; refused without --profiling, for an existing file, a relative
// path, and while another profile runs. And the IPVS deprecation line and Event.

import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { runProfile } from '../../../src/cli/profile.ts';
import { startControlServer } from '../../../src/control/server.ts';
import { controlHandler, type ControlParts } from '../../../src/daemon/control.ts';
import { announceDeprecations } from '../../../src/daemon/deprecations.ts';
import { IPVS_DEPRECATION } from '../../../src/daemon/modes/ipvs.ts';
import { Profiler } from '../../../src/daemon/profiling.ts';

async function daemonSocket(t: ExecutionContext, profiler?: Profiler) {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-profile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'control.sock');
  const parts = { ...(profiler ? { profiler } : {}) } as unknown as ControlParts;
  const server = await startControlServer({ path, handler: controlHandler(parts), logger: memoryLogger() });
  t.teardown(() => server.close());
  const cli = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const code = await runProfile([...argv, '--control-socket', path], {
      stdout: (s) => (out += s),
      stderr: (s) => (err += s),
    });
    return { code, out, err };
  };
  return { dir, cli };
}

test('profile cpu and heap: the daemon writes a V8 .cpuprofile and .heapsnapshot, 0600, where the CLI said', async (t) => {
  const { dir, cli } = await daemonSocket(t, new Profiler());
  const cpuFile = join(dir, 'daemon.cpuprofile');
  const cpu = await cli('cpu', '--seconds', '1', '--output', cpuFile);
  t.is(cpu.code, 0, cpu.err);
  t.regex(cpu.out, new RegExp(`^wrote ${cpuFile} \\(\\d+ bytes\\)\\n$`));
  const profile = JSON.parse(await readFile(cpuFile, 'utf8')) as {
    nodes: unknown[];
    startTime: number;
    endTime: number;
  };
  t.true(profile.nodes.length > 0);
  t.true(profile.endTime - profile.startTime >= 900_000, 'sampled about a second (microseconds)');
  t.is((await stat(cpuFile)).mode & 0o777, 0o600);

  const heapFile = join(dir, 'daemon.heapsnapshot');
  const heap = await cli('heap', '-o', heapFile);
  t.is(heap.code, 0, heap.err);
  const snapshot = JSON.parse(await readFile(heapFile, 'utf8')) as { snapshot: { node_count: number } };
  t.true(snapshot.snapshot.node_count > 1000);
  t.is((await stat(heapFile)).mode & 0o777, 0o600);

  const again = await cli('heap', '-o', heapFile);
  t.is(again.code, 1);
  t.regex(again.err, /exists; name a new file/);
});

test('without --profiling the daemon refuses, saying how to turn it on; usage errors exit 2', async (t) => {
  const { dir, cli } = await daemonSocket(t);
  const r = await cli('cpu', '--seconds', '1', '-o', join(dir, 'x.cpuprofile'));
  t.is(r.code, 1);
  t.regex(r.err, /^kube-proxy-ts profile: profiling is off: start the daemon with --profiling/);
  t.is((await cli('gpu')).code, 2);
  t.is((await cli('cpu', '--seconds', '0')).code, 2);
  t.is(await runProfile(['heap', '--control-socket', join(dir, 'none.sock')], { stderr: () => {} }), 3);
});

test('one profile at a time; paths must be absolute', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-profile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const p = new Profiler();
  const abort = new AbortController();
  const first = p.cpu(join(dir, 'a.cpuprofile'), 60, abort.signal);
  await t.throwsAsync(p.heap(join(dir, 'b.heapsnapshot')), { message: /another profile is being taken/ });
  abort.abort(); // the client went away: the profile ends early and is still written
  t.is((await first).kind, 'cpu');
  t.throws(() => p.heap('relative.heapsnapshot'), { message: /absolute/ });
  await writeFile(join(dir, 'taken'), '');
  await t.throwsAsync(p.cpu(join(dir, 'taken'), 1, new AbortController().signal), { message: /exists/ });
});

test('ipvs mode: upstream v1.37 deprecation as an error line and a Warning Event IPVSDeprecation', (t) => {
  const log = memoryLogger();
  const events: unknown[][] = [];
  const sink = { eventf: (...a: unknown[]) => void events.push(a) } as never;
  announceDeprecations('nftables', log, sink, 'node-a');
  t.deepEqual(log.records, []);
  announceDeprecations('ipvs', log, sink, 'node-a');
  t.deepEqual(log.records, [{ level: 'error', msg: IPVS_DEPRECATION, fields: {} }]);
  t.is(events.length, 1);
  t.like(events[0], { 1: 'Warning', 2: 'IPVSDeprecation', 3: 'StartKubeProxy', 4: IPVS_DEPRECATION });
  t.regex(IPVS_DEPRECATION, /disabled by default in Kubernetes 1\.40 and removed in Kubernetes 1\.43/);
});
