// A 410 storm (issue 18): the API server answers every watch "too old resource version" (here
// after a bookmark, so that each watch looks healthy, the case that once relisted in a hot
// loop). The real daemon (nftables mode) relists, the first time at once and then with a
// growing back-off; what it programmed keeps answering; a Service created during the storm
// lands at the next relist; after the storm the watch holds again. The relist gaps, the log
// lines and the daemon's open files are logged.
import { readdirSync, readFileSync } from 'node:fs';
import test from 'ava';
import { pollUntil } from '../helpers/daemon-process.ts';
import type { LoggedRequest } from '../helpers/fake-apiserver.ts';
import { API, daemonOnTestApi, serviceObjects, WEB_VIP } from './api-fault-setup.ts';

/** The daemon's back-off (client-go's reflector defaults): 800 ms doubling up to 30 s, jitter on top. */
const BACKOFF = { initialMs: 800, maxMs: 30_000, factor: 2 };
/** Relists to see during the storm (the last gaps are 3.2 s and 6.4 s at least). */
const RELISTS = 5;

test.serial('a 410 storm: relists back off, rules keep answering, a change made meanwhile lands', async (t) => {
  t.timeout(300_000);
  const { c, d, answers, failWithLog } = await daemonOnTestApi(t, 'api410');
  const openFiles = () => readdirSync(`/proc/${d.pid}/fd`).length;
  const rssMiB = () =>
    Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${d.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
  const fdsBefore = openFiles();
  const rssBefore = rssMiB();

  const serviceLists = async () =>
    (await c.nodeAgent.call<LoggedRequest[]>(API, 'apiRequests')).filter(
      (r) => r.path === '/api/v1/services' && !r.watch && r.query['continue'] === undefined,
    );
  const before = (await serviceLists()).length;
  const logBefore = d.log().split('\n').length;
  await c.nodeAgent.call(API, 'apiGoneStorm', { as: 'event', bookmarkFirst: true });
  const relisted = (n: number) => async () => ((await serviceLists()).length >= before + n ? true : undefined);
  await pollUntil('the first relists of the storm', relisted(2), 60_000).catch(failWithLog);
  // Written during the storm: only a relist can bring it.
  for (const o of serviceObjects('late', '10.96.0.11')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await pollUntil('the change made during the storm to land', answers('10.96.0.11'), 60_000, 50).catch(failWithLog);
  t.truthy(await answers(WEB_VIP)(), 'the programmed rules keep answering during the storm');
  await pollUntil(`${RELISTS} relists`, relisted(RELISTS), 120_000).catch(failWithLog);
  t.truthy(await answers(WEB_VIP)(), 'and still, later in the storm');
  const at = (await serviceLists()).slice(before).map((r) => r.at);
  const gaps = at.slice(1).map((a, i) => a - at[i]!);
  const sent = await c.nodeAgent.call<number>(API, 'apiGoneSent');
  const fdsDuring = openFiles();
  const rssDuring = rssMiB();
  const lines = d.log().split('\n').slice(logBefore);
  const retries = lines.filter((l) => /list\/watch failed; retrying|too old, relisting/.test(l));

  // The first 410 relists at once, each later one waits at least its back-off step: lower
  // bounds, which load cannot break.
  for (let i = 0; i < gaps.length; i++) {
    const floor = Math.min(BACKOFF.initialMs * BACKOFF.factor ** i, BACKOFF.maxMs);
    t.true(gaps[i]! >= floor, `gap ${i}: ${gaps[i]} ms, the back-off step is ${floor} ms`);
  }
  t.true(retries.length <= sent + 4, `${retries.length} log lines for ${sent} 410s`);
  t.regex(retries.join('\n'), /410 Expired: too old resource version/);

  const atEnd = (await serviceLists()).length;
  await c.nodeAgent.call(API, 'apiGoneStorm', null);
  await pollUntil('a relist after the storm', relisted(atEnd - before + 1), 120_000).catch(failWithLog);
  // The watch holds again: a change comes by it, not by a relist.
  await new Promise((r) => setTimeout(r, 1500));
  const listsAfter = (await serviceLists()).length;
  for (const o of serviceObjects('after', '10.96.0.12')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await pollUntil('a change after the storm to land', answers('10.96.0.12'), 60_000, 50).catch(failWithLog);
  t.is((await serviceLists()).length, listsAfter, 'delivered by the watch, no relist');
  t.log(
    `gaps between relists (ms): ${gaps.join(', ')}; ${sent} 410s (every kind), ${retries.length} log lines; ` +
      `daemon fds: ${fdsBefore} before, ${fdsDuring} during the storm, ${openFiles()} after; ` +
      `RSS ${rssBefore}, ${rssDuring}, ${rssMiB()} MiB`,
  );
  t.log(retries.slice(0, 2).join('\n'));
});
