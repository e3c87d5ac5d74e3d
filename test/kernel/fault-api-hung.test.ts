// A hung API server (issue 18): it accepts connections and never answers, for longer than any
// time-out, then recovers. The real daemon keeps the programmed rules meanwhile (traffic
// flows), and a change made while it hung lands after the recovery; the time from recovery to
// the change answering is logged (the daemon's request deadlines bound it, not Node's 300 s).
import test from 'ava';
import { pollUntil } from '../helpers/daemon-process.ts';
import { API, daemonOnTestApi, serviceObjects, WEB_VIP } from './api-fault-setup.ts';

const HUNG_MS = 20_000;

test.serial('a hung API server: rules stay, a change made meanwhile lands soon after it recovers', async (t) => {
  t.timeout(300_000);
  const { c, d, answers, failWithLog } = await daemonOnTestApi(t, 'apihung');

  await c.nodeAgent.call(API, 'apiHung', true);
  // Written to the server's store while it hangs: nobody can read it until it recovers.
  for (const o of serviceObjects('late', '10.96.0.11')) await c.nodeAgent.call(API, 'apiUpsert', o);
  await new Promise((r) => setTimeout(r, HUNG_MS));
  t.truthy(await answers(WEB_VIP)(), 'the programmed rules stay while the server hangs');
  t.regex(d.log(), /no response within/, 'the hung requests hit their deadline');
  const recovered = Date.now();
  await c.nodeAgent.call(API, 'apiHung', false);
  await pollUntil('the change to land after the recovery', answers('10.96.0.11'), 60_000, 50).catch(failWithLog);
  t.log(`hung for ${HUNG_MS} ms; after the recovery, the change answered in ${Date.now() - recovered} ms`);
});
