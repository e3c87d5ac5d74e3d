// --proxy-port-range allocation as upstream's rangeAllocator: random start, next free after it,
// a clear error when the range is exhausted, released ports reused; bindInRange skips ports
// some other program holds.
import test from 'ava';
import {
  bindInRange,
  PortAllocator,
  PortRangeExhaustedError,
} from '../../../../src/proxier/userspace/proxy/port-allocator.ts';

const eaddrinuse = () => Object.assign(new Error('bind EADDRINUSE'), { code: 'EADDRINUSE' });

test('ports come from the range, from a random start, each once', (t) => {
  const a = new PortAllocator({ first: 30000, last: 30004 }, () => 0.5);
  const got = Array.from({ length: 5 }, () => a.allocateNext());
  t.deepEqual(got, [30002, 30003, 30004, 30000, 30001]);
  t.is(a.allocated, 5);
});

test('an exhausted range is a clear error naming it', (t) => {
  const a = new PortAllocator({ first: 30000, last: 30001 });
  a.allocateNext();
  a.allocateNext();
  const err = t.throws(() => a.allocateNext(), { instanceOf: PortRangeExhaustedError });
  t.regex(err.message, /--proxy-port-range 30000-30001: all 2 are bound/);
});

test('a released port is handed out again; releasing a foreign port is ignored', (t) => {
  const a = new PortAllocator({ first: 30000, last: 30001 }, () => 0);
  t.is(a.allocateNext(), 30000);
  t.is(a.allocateNext(), 30001);
  a.release(30000);
  a.release(29999);
  a.release(30000);
  t.is(a.allocated, 1);
  t.is(a.allocateNext(), 30000);
});

test('a bad range is refused by name', (t) => {
  t.throws(() => new PortAllocator({ first: 3, last: 2 }), { message: /--proxy-port-range 3-2/ });
  t.throws(() => new PortAllocator({ first: 0, last: 10 }), { message: /--proxy-port-range 0-10/ });
  t.throws(() => new PortAllocator({ first: 1, last: 70000 }), { message: /1-70000/ });
});

test('bindInRange skips ports in use and releases them again; other errors are thrown', async (t) => {
  const a = new PortAllocator({ first: 30000, last: 30003 }, () => 0);
  const busy = new Set([30000, 30001]);
  const port = await bindInRange(a, async (p) => {
    if (busy.has(p)) throw eaddrinuse();
    return p;
  });
  t.is(port, 30002);
  t.is(a.allocated, 1, 'the skipped ports are free again');
  await t.throwsAsync(
    bindInRange(a, async () => {
      throw Object.assign(new Error('bind EMFILE'), { code: 'EMFILE' });
    }),
    { message: 'bind EMFILE' },
  );
  t.is(a.allocated, 1, 'the failed port is released');
  await t.throwsAsync(
    bindInRange(a, async () => {
      throw eaddrinuse();
    }),
    { instanceOf: PortRangeExhaustedError },
  );
  t.is(a.allocated, 1);
});
