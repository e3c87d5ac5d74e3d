// The strace hexdump parser behind test/vm/capture-ipvs-fixtures.ts, on real strace 6.1 output.
import test from 'ava';
import { ipvsMessages, parseStrace } from '../../../vm/capture-ipvs-fixtures.ts';

const STRACE = `sendmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=32, nlmsg_type=nlctrl, nlmsg_flags=NLM_F_REQUEST|NLM_F_ACK, nlmsg_seq=1795405860, nlmsg_pid=-482344839}, "\\x03\\x01"], iov_len=32}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 32
 * 32 bytes in buffer 0
 | 00000  20 00 00 00 10 00 05 00  24 b8 03 6b 79 00 40 e3   .......$..ky.@. |
 | 00010  03 01 00 00 09 00 02 00  49 50 56 53 00 00 00 00  ........IPVS.... |
sendmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=20, nlmsg_type=IPVS, nlmsg_flags=NLM_F_REQUEST|NLM_F_ACK, nlmsg_seq=1795405862, nlmsg_pid=-33554311}, "\\x0f\\x01\\x00\\x00"], iov_len=20}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 20
 * 20 bytes in buffer 0
 | 00000  14 00 00 00 20 00 05 00  26 b8 03 6b 79 00 00 fe  .... ...&..ky... |
 | 00010  0f 01 00 00                                       ....             |
recvmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=36, nlmsg_type=IPVS, nlmsg_flags=0, nlmsg_seq=1795405862, nlmsg_pid=-33554311}, "..."], iov_len=16384}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, MSG_PEEK|MSG_TRUNC) = 36
 * 36 bytes in buffer 0
 | 00000  24 00 00 00 20 00 00 00  26 b8 03 6b 79 00 00 fe  $... ...&..ky... |
 | 00010  0e 01 00 00 08 00 01 00  01 02 01 00 08 00 02 00  ................ |
 | 00020  00 10 00 00                                       ....             |
recvmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=36, nlmsg_type=IPVS, nlmsg_flags=0, nlmsg_seq=1795405862, nlmsg_pid=-33554311}, "..."], iov_len=16384}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 36
 * 36 bytes in buffer 0
 | 00000  24 00 00 00 20 00 00 00  26 b8 03 6b 79 00 00 fe  $... ...&..ky... |
 | 00010  0e 01 00 00 08 00 01 00  01 02 01 00 08 00 02 00  ................ |
 | 00020  00 10 00 00                                       ....             |
`;

test('hexdump blocks become syscalls; MSG_PEEK reads are skipped; nlctrl is dropped; seq/pid zeroed', (t) => {
  const calls = parseStrace(STRACE);
  t.deepEqual(
    calls.map((c) => [c.dir, c.bytes.length]),
    [
      ['send', 32],
      ['send', 20],
      ['recv', 36],
    ],
  );
  t.deepEqual(ipvsMessages(calls), [
    { dir: 'send', hex: '14000000200005000000000000000000' + '0f010000' },
    { dir: 'recv', hex: '24000000200000000000000000000000' + '0e01000008000100010201000800020000100000' },
  ]);
});
