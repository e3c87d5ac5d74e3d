// 410 storms (issue 18): the API server answers every watch "too old resource version" — as an
// ERROR event in the stream or as the watch request's HTTP status, at once, after a bookmark or
// after a while — as after an etcd compaction or from a confused server or proxy. The
// reflector relists (the first time at once), backs off between the relists that follow
// (bounded and jittered, growing whatever each watch looked like before its 410), keeps what
// it holds, picks up changes made meanwhile at the next relist, logs one line per retry, and
// opens no more connections than it needs.

import test from 'ava';
import type { ExecutionContext } from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { ClientNodeApi, loadKubeConfig } from '../../../src/sources/kube-api.ts';
import { KubernetesSource } from '../../../src/sources/kubernetes.ts';
import type { GoneStorm } from '../../helpers/fake-apiserver.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { Recorder, waitFor } from './recorder.ts';
import { svc } from './objects.ts';

const BACKOFF = { initialMs: 40, maxMs: 320, factor: 2, jitter: 0.5 };
/** Relists to watch during the storm. */
const RELISTS = 7;

async function storm(t: ExecutionContext, kind: GoneStorm, minHealthyWatchMs = 1000): Promise<void> {
  const server = await FakeApiServer.start();
  t.teardown(() => server.close());
  server.create(svc('default', 'kept'));
  const logger = memoryLogger();
  const source = new KubernetesSource({
    api: new ClientNodeApi(loadKubeConfig({ master: server.url })),
    nodeName: 'n',
    logger,
    backoff: BACKOFF,
    minHealthyWatchMs,
    watchServiceCIDRs: false,
  });
  const rec = new Recorder();
  t.teardown(() => source.stop());
  await source.start(rec);
  await source.waitForSync(AbortSignal.timeout(10_000));
  await waitFor(() => server.watchCount('Service') === 1, 'watch open');

  const lists = () =>
    server.requests.filter((r) => r.path === '/api/v1/services' && !r.watch && r.query['continue'] === undefined);
  const before = lists().length;
  const stormLog = () => logger.records.filter((r) => r.level !== 'debug').length;
  const logBefore = stormLog();
  server.goneStorm(kind);
  await waitFor(() => lists().length >= before + 2, 'the first relists');
  server.create(svc('default', 'during'));
  await waitFor(() => lists().length >= before + RELISTS, `${RELISTS} relists`, 30_000);
  await waitFor(() => rec.services.has('default/during'), 'the change made during the storm, at a relist');
  const at = lists()
    .slice(before)
    .map((r) => r.at);
  const gaps = at.slice(1).map((a, i) => a - at[i]!);
  t.log(
    `${kind.as}${kind.bookmarkFirst ? ' after a bookmark' : ''}${kind.delayMs ? ` after ${kind.delayMs} ms` : ''}:`,
  );
  t.log(`gaps between relists (ms): ${gaps.join(', ')}; 410s sent: ${server.goneSent}`);
  // The first 410 relists at once (the first list counted); each later one waits at least its
  // back-off step (jitter only lengthens it). Lower bounds only: load can lengthen a gap, never
  // shorten it.
  for (let i = 0; i < gaps.length; i++) {
    const floor = Math.min(BACKOFF.initialMs * BACKOFF.factor ** i, BACKOFF.maxMs);
    t.true(gaps[i]! >= floor, `gap ${i}: ${gaps[i]} ms, the back-off step is ${floor} ms`);
  }
  t.true(rec.services.has('default/kept'), 'what was held is kept through the storm');
  t.is(rec.count('Service', 'delete'), 0);
  t.deepEqual(rec.violations, []);
  // One log line per 410 at most (for every kind stormed), not a line per attempt of a hot loop.
  const lines = stormLog() - logBefore;
  t.true(lines <= server.goneSent + 4, `${lines} log lines for ${server.goneSent} 410s`);
  t.true(server.openConnections <= 12, `${server.openConnections} connections open`);

  // The storm passes: the next relist succeeds and the watch stays; changes come by watch again.
  server.goneStorm(undefined);
  await waitFor(() => server.watchCount('Service') === 1, 'a watch that holds', 30_000);
  const listsAfter = lists().length;
  server.create(svc('default', 'after'));
  await waitFor(() => rec.services.has('default/after'), 'a change after the storm');
  t.is(lists().length, listsAfter, 'delivered by the watch, no relist');
}

test('410 storm as ERROR events: relists back off', (t) => storm(t, { as: 'event' }));

test('410 storm as HTTP 410 answers to the watch: relists back off', (t) => storm(t, { as: 'http' }));

test('410 storm after a bookmark on every watch (each looks healthy): relists still back off', (t) =>
  storm(t, { as: 'event', bookmarkFirst: true }));

test('410 storm that comes after each watch has run a while: relists still back off', (t) =>
  storm(t, { as: 'http', delayMs: 60 }, 50));
