// Framing and error payloads, checked against bytes captured from nft and genl.
import test from 'ava';
import {
  AttrSet,
  encodeMessage,
  genlMessage,
  GENL_ID_CTRL,
  NetlinkDecodeError,
  nfMessage,
  NfnlSubsys,
  NLM_F_ACK,
  NLM_F_ACK_TLVS,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  parseErrorPayload,
  parseFamily,
  parseMessages,
  splitNfPayload,
  AF_INET,
} from '../../../../src/netlink/core/index.ts';
import { fixture, hexdiff, maskSeqPid } from '../../../helpers/fixtures.ts';

test('an nf_tables message built by the core matches what nft sends for "add table ip kpts"', (t) => {
  const captured = parseMessages(fixture('core/nft-add-table-batch.hex'));
  t.is(captured.length, 3, 'batch begin, new table, batch end');
  const newTable = captured[1]!;
  // nft 1.0.6 sends NEWTABLE with NLM_F_REQUEST alone (no NLM_F_CREATE).
  const ours = nfMessage(NfnlSubsys.NFTABLES, 0, AF_INET, 0, 'add table ip kpts', (w) =>
    w.str(1, 'kpts').u32(2, 0, 'net'),
  );
  const a = maskSeqPid(encodeMessage({ ...ours, flags: ours.flags | NLM_F_REQUEST }, 0));
  const e = maskSeqPid(
    encodeMessage({ type: newTable.type, flags: newTable.flags, payload: newTable.payload, label: '' }, 0),
  );
  t.deepEqual(a, e, hexdiff(a, e));
});

test('a genl controller request matches what `genl ctrl get name nlctrl` sends', (t) => {
  const ours = genlMessage(GENL_ID_CTRL, 3, 0, NLM_F_REQUEST | NLM_F_ACK, 'get family', (w) => w.str(2, 'nlctrl'));
  const a = maskSeqPid(encodeMessage(ours, 0));
  const e = maskSeqPid(fixture('core/genl-getfamily-nlctrl.hex'));
  t.deepEqual(a, e, hexdiff(a, e));
});

test('the kernel reply describing nlctrl decodes into a family with its id', (t) => {
  const [reply] = parseMessages(fixture('core/genl-getfamily-nlctrl.recv.hex'));
  const fam = parseFamily(reply!);
  t.is(fam.name, 'nlctrl');
  t.is(fam.id, GENL_ID_CTRL);
  t.true(fam.groups.has('notify'));
});

test('a real EEXIST reply decodes: errno, the echoed request and the extended ACK offset', (t) => {
  const [m] = parseMessages(fixture('core/nft-create-table-eexist.recv.hex'));
  t.is(m!.type, NLMSG_ERROR);
  t.truthy(m!.flags & NLM_F_ACK_TLVS);
  const e = parseErrorPayload(m!);
  t.is(e.errno, 17);
  t.is(e.request.type, (NfnlSubsys.NFTABLES << 8) | 0);
  t.is(typeof e.extack?.offset, 'number', 'nft enables NETLINK_EXT_ACK, and the kernel points at the name');
});

test('a real dump reply splits into table messages and NLMSG_DONE', (t) => {
  const all = [fixture('core/nft-list-tables.recv.hex')].flatMap((b) => parseMessages(b));
  const names = all
    .filter((m) => m.type !== NLMSG_DONE)
    .map((m) => new AttrSet(splitNfPayload(m.payload)!.attrs, 'table').str(1));
  t.true(names.includes('kpts'), `names: ${names.join(',')}`);
});

test('framing rejects truncated and lying headers with NetlinkDecodeError', (t) => {
  const good = fixture('core/nft-add-table-batch.hex');
  t.throws(() => parseMessages(good.subarray(0, 10)), {
    instanceOf: NetlinkDecodeError,
    message: /too short for a message header/,
  });
  t.throws(() => parseMessages(good.subarray(0, good.length - 4)), {
    instanceOf: NetlinkDecodeError,
    message: /claims \d+ bytes/,
  });
  const zero = Uint8Array.from(good);
  zero[0] = 3;
  t.throws(() => parseMessages(zero), { instanceOf: NetlinkDecodeError, message: /below the header size/ });
  t.throws(() => parseErrorPayload({ type: NLMSG_ERROR, flags: 0, seq: 0, pid: 0, payload: new Uint8Array(8) }), {
    instanceOf: NetlinkDecodeError,
  });
});
