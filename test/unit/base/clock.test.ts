import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';

test('a fake clock fires due timers in order and moves only when advanced', (t) => {
  const c = new FakeClock(1000);
  const fired: string[] = [];
  c.setTimer(30, () => fired.push('b'));
  c.setTimer(10, () => {
    fired.push('a');
    c.setTimer(5, () => fired.push('a+5'));
  });
  const cancelled = c.setTimer(20, () => fired.push('never'));
  cancelled.cancel();
  c.advance(15);
  t.deepEqual(fired, ['a', 'a+5']);
  t.is(c.now(), 1015);
  c.advance(100);
  t.deepEqual(fired, ['a', 'a+5', 'b']);
  t.is(c.pending, 0);
});
