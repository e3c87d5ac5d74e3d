// The userspace proxy's descriptor budget: its size under a limit, one holder's share, the
// whole budget, listeners past it, releases.
import test from 'ava';
import { budgetSize, DescriptorBudget } from '../../../src/base/descriptor-budget.ts';

test('the budget is the limit less the reserve; at least half of the limit when the reserve does not fit', (t) => {
  t.deepEqual(budgetSize(1_048_576, 5120), { limit: 1_043_456, reserved: 5120, tight: false });
  t.deepEqual(budgetSize(10_240, 5120), { limit: 5120, reserved: 5120, tight: false });
  t.deepEqual(budgetSize(6400, 5120), { limit: 3200, reserved: 3200, tight: true });
  t.deepEqual(budgetSize(1024, 5120), { limit: 512, reserved: 512, tight: true });
  t.is(budgetSize(Number.POSITIVE_INFINITY, 5120).limit, (1 << 20) - 5120, 'unlimited is taken as 2^20');
});

test('one holder takes at most half; all holders at most the budget; refusals are counted', (t) => {
  const b = new DescriptorBudget(10);
  let mine = 0;
  while (b.tryAcquire(2, mine)) mine += 2;
  t.is(mine, 4, 'half of 10, two at a time');
  let theirs = 0;
  while (b.tryAcquire(2, theirs)) theirs += 2;
  t.is(theirs, 4);
  t.is(b.inUse, 8);
  t.false(b.tryAcquire(3, 0), 'a third holder: past the budget');
  t.true(b.tryAcquire(2, 0), 'what is left still fits');
  t.false(b.tryAcquire(1, 0), 'the budget is spent');
  t.is(b.refused, 4);
  b.release(2);
  t.true(b.tryAcquire(2, 0), 'a release makes room');
});

test('listeners are granted past the budget, and connections then wait for releases', (t) => {
  const b = new DescriptorBudget(4);
  t.true(b.tryAcquire(2, 0));
  b.force(3);
  t.is(b.inUse, 5);
  t.false(b.tryAcquire(1, 0));
  b.release(3);
  b.release(2);
  t.is(b.inUse, 0);
  b.release(1);
  t.is(b.inUse, 0, 'never below zero');
});
