// A recurring condition (EMFILE, every endpoint refusing) is logged once per interval per key,
// with the count suppressed in between.
import test from 'ava';
import { FakeClock } from '../../../../src/base/clock.ts';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { RateLimitedLog } from '../../../../src/proxier/userspace/proxy/counters.ts';

test('once per interval per key, then with the number suppressed', (t) => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const log = new RateLimitedLog(logger, clock, 10_000);
  for (let i = 0; i < 100; i++) log.warn('web/accept/EMFILE', 'out of descriptors', { service: 'web' });
  log.warn('db/accept/EMFILE', 'out of descriptors', { service: 'db' });
  t.is(logger.records.length, 2);
  clock.advance(10_000);
  log.warn('web/accept/EMFILE', 'out of descriptors', { service: 'web' });
  t.deepEqual(logger.records[2]!.fields, { service: 'web', suppressed: 99 });
  log.forgetPrefix('web/');
  log.warn('web/accept/EMFILE', 'out of descriptors', { service: 'web' });
  t.is(logger.records.length, 4, 'a forgotten key logs at once');
});
