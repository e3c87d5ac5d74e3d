// ipset requests against the bytes the ipset tool (v7.17) sends, captured with strace in a
// throwaway namespace (test/fixtures/netlink/capture-ipset-route.sh, CAPTURE.md).
import test from 'ava';
import {
  adtBulkMessages,
  adtMessage,
  createMessage,
  destroyMessage,
  flushMessage,
  listMessage,
  protocolMessage,
  renameMessage,
  swapMessage,
  typeMessage,
} from '../../../../src/netlink/ipset/index.ts';
import { NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST } from '../../../../src/netlink/core/index.ts';
import { fixtureLines, sameAsFixture } from './fixture-lines.ts';

const CIP = 'KUBE-CLUSTER-IP';
const f = (name: string): string => `ipset/${name}.hex`;

test("protocol and type queries equal the tool's (which sends them without NLM_F_ACK)", (t) => {
  sameAsFixture(t, protocolMessage(), f('create-hash-ip-port'), 1, { maskFlags: true });
  sameAsFixture(t, typeMessage('hash:ip,port', 'inet'), f('create-hash-ip-port'), 2, { maskFlags: true });
  // The tool asks for the type's revisions with family inet even for an inet6 set; we ask with
  // the set's family (the kernel registers hash types for both, so the answer is the same).
  sameAsFixture(t, typeMessage('hash:ip', 'inet'), f('create-hash-ip-inet6'), 2, { maskFlags: true });
  t.is(typeMessage('hash:ip', 'inet6').payload.at(-4), 10);
  sameAsFixture(t, typeMessage('bitmap:port', undefined), f('create-bitmap-port'), 2, { maskFlags: true });
  const lines = fixtureLines(f('create-hash-ip-port'));
  t.is(lines[0]![6]! | (lines[0]![7]! << 8), NLM_F_REQUEST, 'the tool sends PROTOCOL as a bare request');
});

test('create: every set type kube-proxy uses, byte for byte', (t) => {
  sameAsFixture(
    t,
    createMessage(CIP, 'hash:ip,port', 7, { family: 'inet', hashSize: 1024, maxElem: 65536, comment: true }),
    f('create-hash-ip-port'),
    3,
  );
  sameAsFixture(
    t,
    createMessage('KUBE-LOOP-BACK6', 'hash:ip', 6, { family: 'inet6', hashSize: 4096, maxElem: 131072 }),
    f('create-hash-ip-inet6'),
    3,
  );
  sameAsFixture(
    t,
    createMessage('KUBE-LOOP-BACK', 'hash:ip,port,ip', 6, { hashSize: 1024, maxElem: 65536, comment: true }),
    f('create-hash-ip-port-ip'),
    3,
  );
  sameAsFixture(
    t,
    createMessage('KUBE-LOAD-BALANCER-SOURCE-CIDR', 'hash:ip,port,net', 8, {
      hashSize: 1024,
      maxElem: 65536,
      comment: true,
    }),
    f('create-hash-ip-port-net'),
    3,
  );
  sameAsFixture(t, createMessage('KUBE-SOURCE-RANGES', 'hash:net', 7, { comment: true }), f('create-hash-net'), 3);
  sameAsFixture(
    t,
    createMessage('KUBE-NODE-PORT-TCP', 'bitmap:port', 3, { comment: true }),
    f('create-bitmap-port'),
    3,
  );
  sameAsFixture(t, createMessage('KPTS-TIMEOUT', 'hash:ip', 6, { timeout: 600 }), f('create-timeout'), 3);
});

test('add, del and test of one entry, with comment and with -exist', (t) => {
  sameAsFixture(
    t,
    adtMessage('add', CIP, { ip: '10.96.0.1', proto: 'tcp', port: 443, comment: 'default/kubernetes:https' }),
    f('add-comment'),
    3,
  );
  sameAsFixture(t, adtMessage('add', CIP, { ip: '10.96.0.10', proto: 'udp', port: 53 }, true), f('add-exist'), 3);
  sameAsFixture(t, adtMessage('del', CIP, { ip: '10.96.0.1', proto: 'tcp', port: 443 }), f('del'), 3);
  sameAsFixture(t, adtMessage('test', CIP, { ip: '10.96.0.1', proto: 'tcp', port: 443 }), f('test'), 3);
});

test('entries of every type', (t) => {
  sameAsFixture(
    t,
    adtMessage('add', 'KUBE-LOOP-BACK', { ip: '10.244.1.5', proto: 'tcp', port: 8080, ip2: '10.244.1.5' }),
    f('add-ip-port-ip'),
    3,
  );
  sameAsFixture(
    t,
    adtMessage('add', 'KUBE-LOAD-BALANCER-SOURCE-CIDR', {
      ip: '203.0.113.7',
      proto: 'tcp',
      port: 80,
      ip2: '192.168.0.0',
      cidr2: 16,
    }),
    f('add-ip-port-net'),
    3,
  );
  sameAsFixture(t, adtMessage('add', 'KUBE-SOURCE-RANGES', { ip: '10.0.0.0', cidr: 8 }), f('add-net'), 3);
  sameAsFixture(t, adtMessage('add', 'KUBE-NODE-PORT-TCP', { port: 30080 }), f('add-bitmap-port'), 3);
  sameAsFixture(t, adtMessage('add', 'KUBE-CLUSTER-IP6', { ip: 'fd00::1', proto: 'sctp', port: 9 }), f('add-inet6'), 3);
});

test('destroy, flush, rename, swap', (t) => {
  sameAsFixture(t, destroyMessage(CIP), f('destroy'), 2);
  sameAsFixture(t, flushMessage(CIP), f('flush'), 2);
  sameAsFixture(t, renameMessage(CIP, 'KUBE-CLUSTER-IP-NEW'), f('rename'), 2);
  sameAsFixture(t, swapMessage(CIP, 'KUBE-CLUSTER-IP-TMP'), f('swap'), 2);
});

test('list is a dump (the tool also sets NLM_F_ACK on it)', (t) => {
  const line = fixtureLines(f('list'))[1]!;
  t.is(line[6]! | (line[7]! << 8), NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP);
  sameAsFixture(t, listMessage(CIP), f('list'), 2, { dump: true, maskFlags: true });
});

test('bulk add equals what `ipset restore` sends: an ADT list with line numbers', (t) => {
  const entries = [
    { ip: '10.96.0.1', proto: 'tcp' as const, port: 443, comment: 'a' },
    { ip: '10.96.0.10', proto: 'udp' as const, port: 53, comment: 'b' },
    { ip: '10.96.0.10', proto: 'tcp' as const, port: 53, comment: 'c' },
  ];
  const { msgs, starts } = adtBulkMessages('add', CIP, entries);
  t.is(msgs.length, 1);
  t.deepEqual(starts, [0]);
  // One deliberate difference: the top-level LINENO (after PROTOCOL and SETNAME, at payload
  // offset 4 + 8 + 20 + 4) is 0 in ours, 1 (its first line) in the tool's. The kernel only ever
  // writes the failing line there; 0 lets us tell "no entry to blame" from "entry 1".
  const payload = Uint8Array.from(msgs[0]!.payload);
  const at = 4 + 8 + 20 + 4;
  t.deepEqual([...payload.subarray(at - 4, at + 4)], [8, 0, 9, 0x40, 0, 0, 0, 0]);
  payload[at + 3] = 1;
  sameAsFixture(t, { ...msgs[0]!, payload }, f('restore'), 5);
  t.is(msgs[0]!.label, 'add 3 entries (10.96.0.1,tcp:443 ...) to ipset KUBE-CLUSTER-IP');
});

test('labels name the operation and the object', (t) => {
  t.is(
    adtMessage('add', CIP, { ip: '10.0.0.1', proto: 'tcp', port: 80 }).label,
    'add 10.0.0.1,tcp:80 to ipset KUBE-CLUSTER-IP',
  );
  t.is(
    adtMessage('del', CIP, { ip: '10.0.0.1', proto: 'udp', port: 53 }).label,
    'del 10.0.0.1,udp:53 from ipset KUBE-CLUSTER-IP',
  );
  t.is(createMessage('X', 'hash:net', 7, { family: 'inet6' }).label, 'create ipset X hash:net family inet6');
  t.is(swapMessage('A', 'B').label, 'swap ipsets A and B');
  t.throws(() => destroyMessage(''), { instanceOf: TypeError });
  t.throws(() => destroyMessage('A'.repeat(32)), { instanceOf: TypeError });
});
