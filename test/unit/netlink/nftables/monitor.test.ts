// nf_tables announcements, decoded from what the kernel multicast when nft changed a table
// (fixtures/netlink/nftables/monitor-announcements.jsonl, see CAPTURE.md).
import { readFileSync } from 'node:fs';
import test from 'ava';
import { listenMulticast, NetlinkDecodeError } from '../../../../src/netlink/core/index.ts';
import type { InMessage, RawSocket } from '../../../../src/netlink/core/index.ts';
import { decodeNftChange } from '../../../../src/netlink/nftables/index.ts';

const FIXTURE = new URL('../../../fixtures/netlink/nftables/monitor-announcements.jsonl', import.meta.url);
const messages: InMessage[] = readFileSync(FIXTURE, 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as { type: number; flags: number; seq: number; pid: number; payload: string })
  .map((m) => ({ ...m, payload: Buffer.from(m.payload, 'hex') }));

test('each announcement names its kind, family, table, object and the port that made it', (t) => {
  const seen = messages.map((m) => {
    const c = decodeNftChange(m)!;
    return `${c.added ? '+' : '-'}${c.kind} ${c.family ?? '-'} ${c.table ?? '-'} ${c.object ?? '-'}`;
  });
  t.deepEqual(seen, [
    '+table ip kube-proxy-ts -',
    '+generation - - -',
    '+set ip kube-proxy-ts cluster-ips',
    '+generation - - -',
    '+element ip kube-proxy-ts cluster-ips',
    '+generation - - -',
    '-element ip kube-proxy-ts cluster-ips',
    '+generation - - -',
    '-set ip kube-proxy-ts cluster-ips',
    '-table ip kube-proxy-ts -',
    '+generation - - -',
  ]);
  t.is(decodeNftChange(messages[0]!)!.portId, messages[0]!.pid);
});

test('announcements of other subsystems are not ours to decode; bad attributes fail with a named error', (t) => {
  t.is(decodeNftChange({ ...messages[0]!, type: (1 << 8) | 0 }), undefined);
  const cut = { ...messages[0]!, payload: messages[0]!.payload.subarray(0, 10) };
  t.throws(() => decodeNftChange(cut), { instanceOf: NetlinkDecodeError });
});

test('listenMulticast joins the groups and hands over each message; ENOBUFS is an overflow', (t) => {
  const joined: number[] = [];
  let deliver!: (buf: Uint8Array) => void;
  let fail!: (e: { errno: number; code: string }) => void;
  const sock: RawSocket = {
    localPort: 4242,
    send: () => Promise.resolve(),
    listen(onDatagram, onError) {
      deliver = onDatagram;
      fail = onError;
    },
    maxSendBytes: () => 65536,
    joinGroup: (g) => void joined.push(g),
    close: () => {},
  };
  const got: number[] = [];
  let overflows = 0;
  const errors: string[] = [];
  const l = listenMulticast(
    12,
    [7],
    { onMessage: (m) => got.push(m.type), onOverflow: () => overflows++, onError: (e) => errors.push(e.message) },
    { open: () => sock },
  );
  t.deepEqual(joined, [7]);
  t.is(l.localPort, 4242);
  const frame = (m: InMessage): Buffer => {
    const b = Buffer.alloc(16 + m.payload.length);
    b.writeUInt32LE(b.length, 0);
    b.writeUInt16LE(m.type, 4);
    b.writeUInt16LE(m.flags, 6);
    b.writeUInt32LE(m.seq, 8);
    b.writeUInt32LE(m.pid, 12);
    Buffer.from(m.payload).copy(b, 16);
    return b;
  };
  deliver(Buffer.concat([frame(messages[0]!), frame(messages[1]!)]));
  t.deepEqual(got, [messages[0]!.type, messages[1]!.type]);
  deliver(Buffer.from([1, 2, 3]));
  t.is(errors.length, 1, 'a datagram that does not parse is an error, not a crash');
  fail({ errno: 105, code: 'ENOBUFS' });
  t.is(overflows, 1);
  l.close();
  deliver(frame(messages[0]!));
  t.is(got.length, 2, 'nothing after close');
});

test('a socket that cannot join groups is refused clearly', (t) => {
  const sock = {
    localPort: 1,
    send: () => Promise.resolve(),
    listen: () => {},
    maxSendBytes: () => 0,
    close: () => {},
  };
  t.throws(
    () =>
      listenMulticast(12, [7], { onMessage: () => {}, onOverflow: () => {}, onError: () => {} }, { open: () => sock }),
    { message: /cannot join multicast groups/ },
  );
});
