// The addon's (native/netlink-socket) argument checks and life cycle, on an unprivileged
// NETLINK_ROUTE socket: bad input is a thrown error naming what is wrong, never a crash.
import test from 'ava';
import { NetlinkSocket } from 'netlink-socket';

const NETLINK_ROUTE = 0;
const SOL_SOCKET = 1;
const SO_RCVBUF = 8;

const open = (): NetlinkSocket => new NetlinkSocket(NETLINK_ROUTE);

test('the kernel assigns a port id; close() is idempotent and later calls fail with EBADF', (t) => {
  const s = open();
  t.true(s.port > 0);
  t.false(s.closed);
  s.close();
  s.close();
  t.true(s.closed);
  t.like(
    t.throws(() => s.send([new Uint8Array(16)])),
    { code: 'EBADF', errno: 9 },
  );
  t.like(
    t.throws(() => s.getsockopt(SOL_SOCKET, SO_RCVBUF)),
    { code: 'EBADF' },
  );
  s.unref();
  s.ref();
});

test('bad arguments are TypeErrors naming the call', (t) => {
  const s = open();
  try {
    t.throws(() => new NetlinkSocket(-1), { instanceOf: TypeError, message: /protocol/ });
    t.throws(() => s.send('x' as never), { instanceOf: TypeError, message: /chunks/ });
    t.throws(() => s.send([new Uint16Array(8) as never]), { instanceOf: TypeError, message: /Uint8Array/ });
    t.throws(() => s.setsockopt(1, 'a' as never, 1), { instanceOf: TypeError, message: /setsockopt/ });
    t.throws(() => s.listen(() => {}, 1 as never, 0), { instanceOf: TypeError, message: /listen/ });
    t.throws(
      () =>
        s.listen(
          () => {},
          () => {},
          8,
        ),
      { instanceOf: TypeError, message: /16 bytes/ },
    );
    t.throws(() => s.send(Array.from({ length: 1025 }, () => new Uint8Array(0))), { message: /1024 chunks/ });
  } finally {
    s.close();
  }
});

test('a protocol the kernel does not know is refused with its errno', (t) => {
  t.like(
    t.throws(() => new NetlinkSocket(4242)),
    { code: 'EPROTONOSUPPORT', syscall: 'socket' },
  );
});

test('setsockopt errors carry errno and code; getsockopt reads what the kernel set', (t) => {
  const s = open();
  try {
    s.setsockopt(SOL_SOCKET, SO_RCVBUF, 65536);
    t.is(s.getsockopt(SOL_SOCKET, SO_RCVBUF), 131072, 'the kernel doubles it');
    t.like(
      t.throws(() => s.setsockopt(SOL_SOCKET, 9999, 1)),
      { code: 'ENOPROTOOPT', syscall: 'setsockopt' },
    );
  } finally {
    s.close();
  }
});

test('listen twice on one socket is refused with EBUSY', (t) => {
  const s = open();
  s.listen(
    () => {},
    () => {},
    0,
  );
  t.like(
    t.throws(() =>
      s.listen(
        () => {},
        () => {},
        0,
      ),
    ),
    { code: 'EBUSY' },
  );
  s.close();
});
