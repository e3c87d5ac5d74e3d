// Decoding what the kernel sent the ipset tool: LIST dumps, type replies, errors.
import test from 'ava';
import { parseErrorPayload } from '../../../../src/netlink/core/index.ts';
import { decodeList, ipsetErrorName } from '../../../../src/netlink/ipset/index.ts';
import { echoedLineno, parseTypeReply } from '../../../../src/netlink/ipset/codec.ts';
import { parseMessages } from '../../../../src/netlink/core/index.ts';
import { fixtureLines, fixtureMessage } from './fixture-lines.ts';

test('a LIST reply gives the header and the members, comments included', (t) => {
  const [set, ...rest] = decodeList([fixtureMessage('ipset/list.recv.hex', 2)]);
  t.is(rest.length, 0);
  const { entries, ...header } = set!;
  t.like(header, {
    name: 'KUBE-CLUSTER-IP',
    type: 'hash:ip,port',
    family: 'inet',
    revision: 7,
    index: 0,
    hashSize: 1024,
    maxElem: 65536,
    comment: true,
    references: 0,
    elements: 2,
    bucketSize: 12,
  });
  t.deepEqual(
    entries.sort((a, b) => String(a.ip).localeCompare(String(b.ip))),
    [
      { ip: '10.96.0.1', proto: 'tcp', port: 443, comment: 'default/kubernetes:https' },
      { ip: '10.96.0.10', proto: 'udp', port: 53 },
    ],
  );
});

test('a LIST of all sets: every type decodes, IPv6 included', (t) => {
  const msgs = fixtureLines('ipset/list-all.recv.hex')
    .flatMap((l) => parseMessages(l))
    .filter((m) => m.type === ((6 << 8) | 7));
  const sets = decodeList(msgs);
  t.deepEqual(
    sets.map((s) => [s.name, s.type, s.family, s.entries]),
    [
      ['KUBE-CLUSTER-IP', 'hash:ip,port', 'inet', [{ ip: '10.96.0.1', proto: 'tcp', port: 443 }]],
      ['KUBE-NODE-PORT-TCP', 'bitmap:port', 'unspec', [{ port: 30080 }]],
      ['KUBE-LOOP-BACK6', 'hash:ip,port,ip', 'inet6', [{ ip: 'fd00::5', proto: 'tcp', port: 80, ip2: 'fd00::5' }]],
      ['N', 'hash:ip,port,net', 'inet', [{ ip: '1.2.3.4', proto: 'udp', port: 53, ip2: '10.0.0.0', cidr2: 8 }]],
    ],
  );
  t.deepEqual(sets[1]!.portRange, { from: 0, to: 65535 });
});

test('the revision in a kernel reply (a HEADER reply: same attributes as TYPE)', (t) => {
  t.is(parseTypeReply(fixtureMessage('ipset/add-eexist.recv.hex', 2)).revision, 7);
});

test('an add of an existing entry: errno 4103 is IPSET_ERR_EXIST', (t) => {
  const e = parseErrorPayload(fixtureMessage('ipset/add-eexist.recv.hex', 3));
  t.is(e.errno, 4103);
  t.is(ipsetErrorName(e.errno), 'IPSET_ERR_EXIST');
  t.truthy(e.echo, 'the kernel echoes the refused request');
});

test('a refused restore batch: the echoed request carries the failing line number', (t) => {
  const e = parseErrorPayload(fixtureMessage('ipset/restore-error.recv.hex', 5));
  t.is(ipsetErrorName(e.errno), 'IPSET_ERR_EXIST');
  t.is(echoedLineno(e.echo!), 2);
});

test('error names: system, generic ipset, and type-specific by set type', (t) => {
  t.is(ipsetErrorName(2), 'ENOENT');
  t.is(ipsetErrorName(4097), 'IPSET_ERR_PROTOCOL');
  t.is(ipsetErrorName(4098), 'IPSET_ERR_FIND_TYPE');
  t.is(ipsetErrorName(4101), 'IPSET_ERR_EXIST_SETNAME2');
  t.is(ipsetErrorName(4108), 'IPSET_ERR_REFERENCED');
  t.is(ipsetErrorName(4352, 'hash:ip'), 'IPSET_ERR_HASH_FULL');
  t.is(ipsetErrorName(4352, 'bitmap:port'), 'IPSET_ERR_BITMAP_RANGE');
  t.is(ipsetErrorName(4352), 'IPSET_ERR_TYPE_SPECIFIC+0');
  t.is(ipsetErrorName(4200), 'IPSET_ERR 4200');
});
