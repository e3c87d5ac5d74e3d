// RLIMIT_NOFILE at start: the soft limit raised to the hard one (as Go's runtime does for
// upstream), a failure logged and not fatal; the real call through the addon.
import test from 'ava';
import { getrlimit, RLIMIT_NOFILE } from 'netlink-socket';
import { raiseNofileLimit } from '../../../src/daemon/nofile.ts';
import { captureLog } from '../../helpers/log-capture.ts';

test('the soft limit is raised to the hard one', async (t) => {
  const c = captureLog({});
  let limits = { soft: 1024, hard: 524_288 };
  const got = raiseNofileLimit(c.logger, {
    get: () => ({ ...limits }),
    set: (soft, hard) => (limits = { soft, hard }),
  });
  t.deepEqual(got, { soft: 524_288, hard: 524_288 });
  t.regex(await c.text(), /Raised the open file limit.*1024.*524288/s);
});

test('a failure to raise is logged and the limits in force are returned', async (t) => {
  const c = captureLog({});
  const got = raiseNofileLimit(c.logger, {
    get: () => ({ soft: 1024, hard: 4096 }),
    set: () => {
      throw Object.assign(new Error('setrlimit: EPERM'), { code: 'EPERM' });
    },
  });
  t.deepEqual(got, { soft: 1024, hard: 4096 });
  t.regex(await c.text(), /Could not raise the open file limit/);
});

test('the addon reads the real limit: soft at most hard', (t) => {
  const { soft, hard } = getrlimit(RLIMIT_NOFILE);
  t.true(soft > 0 && soft <= hard, `${soft}:${hard}`);
  t.throws(() => getrlimit(-1), { code: 'EINVAL' });
});
