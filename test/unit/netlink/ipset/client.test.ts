// IpsetClient over the fake kernel: request shapes, bulk splitting, errors named by entry.
import test from 'ava';
import {
  ByteWriter,
  NetlinkConnection,
  NetlinkError,
  NLM_F_EXCL,
  NLMSG_ERROR,
} from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply } from '../../../../src/netlink/core/fake/index.ts';
import type { FakeReply } from '../../../../src/netlink/core/fake/index.ts';
import {
  decodeEntry,
  IpsetAttr,
  IpsetClient,
  IpsetCmd,
  isEntryExists,
  isSetNotFound,
} from '../../../../src/netlink/ipset/index.ts';
import type { IpsetEntry } from '../../../../src/netlink/ipset/index.ts';
import { ipsetAttrs } from '../../../../src/netlink/ipset/codec.ts';
import { AttrSet } from '../../../../src/netlink/core/index.ts';

/** An NLMSG_ERROR echoing the whole request, LINENO patched as ipset's call_ad() does. */
function ipsetError(req: InMessage, errno: number, lineno?: number): FakeReply {
  const echo = Uint8Array.from(req.payload);
  if (lineno !== undefined) {
    const a = ipsetAttrs({ payload: echo }, 'echo').get(IpsetAttr.LINENO)!;
    new DataView(echo.buffer).setUint32(a.offset + 4, lineno, false);
  }
  const w = new ByteWriter();
  w.u32le(-errno >>> 0)
    .u32le(16 + req.payload.length)
    .u16le(req.type)
    .u16le(req.flags)
    .u32le(req.seq)
    .u32le(req.pid)
    .bytes(echo);
  return { type: NLMSG_ERROR, payload: w.toBytes(), seq: req.seq };
}

const cmdOf = (m: InMessage): number => m.type & 0xff;
const entriesOf = (m: InMessage): IpsetEntry[] => {
  const a = ipsetAttrs(m, 'req');
  const adt = a.nested(IpsetAttr.ADT);
  if (!adt) return [decodeEntry(a.nested(IpsetAttr.DATA)!)];
  return adt.all.map((d) => decodeEntry(new AttrSet(d.data, 'data')));
};

const many = (n: number): IpsetEntry[] =>
  Array.from({ length: n }, (_, i) => ({
    ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    proto: 'tcp' as const,
    port: 1 + (i % 65000),
    comment: `ns${i % 7}/svc${i}:p`,
  }));

test('create asks the kernel for the type revision once, then creates with it', async (t) => {
  const seen: number[] = [];
  const kernel = new FakeKernel(([req]) => {
    seen.push(cmdOf(req!));
    if (cmdOf(req!) === IpsetCmd.TYPE) {
      const w = new ByteWriter();
      w.u8(2)
        .u8(0)
        .u16be(0)
        .u16le(5)
        .u16le(IpsetAttr.PROTOCOL)
        .u8(7)
        .align4()
        .u16le(5)
        .u16le(IpsetAttr.REVISION)
        .u8(7)
        .align4();
      return [{ type: req!.type, payload: w.toBytes() }, ackReply(req!)];
    }
    if (cmdOf(req!) === IpsetCmd.CREATE) t.is(ipsetAttrs(req!, 'create').u8(IpsetAttr.REVISION), 7);
    return [ackReply(req!)];
  });
  const c = new IpsetClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  await c.create('A', 'hash:ip,port', { comment: true });
  await c.create('B', 'hash:ip,port');
  t.deepEqual(seen, [IpsetCmd.TYPE, IpsetCmd.CREATE, IpsetCmd.CREATE]);
});

test('addMany splits 20,000 entries into ADT lists under 64 KiB that carry every entry in order', async (t) => {
  const sent: InMessage[] = [];
  const kernel = new FakeKernel(([req]) => {
    sent.push({ ...req!, payload: Uint8Array.from(req!.payload) });
    return [ackReply(req!)];
  });
  const c = new IpsetClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  const entries = many(20_000);
  await c.addMany('KUBE-CLUSTER-IP', entries, { exist: true });
  t.true(sent.length > 1 && sent.length < 40, `${sent.length} messages`);
  for (const m of sent) {
    t.true(m.payload.length < 0x10000);
    t.is(cmdOf(m), IpsetCmd.ADD);
    t.is(m.flags & NLM_F_EXCL, 0, 'exist: no NLM_F_EXCL');
  }
  t.deepEqual(sent.flatMap(entriesOf), entries);
});

test('a refused entry in a bulk add is named, with its position; entries before it count as added', async (t) => {
  const entries = many(5000);
  const kernel = new FakeKernel(([req]) => {
    const a = ipsetAttrs(req!, 'r');
    t.is(a.u32(IpsetAttr.LINENO, 'net'), 0);
    const data = a.nested(IpsetAttr.ADT)!.all;
    const first = new AttrSet(data[0]!.data, 'd').u32(IpsetAttr.LINENO, 'net')!;
    const n = data.length;
    // Entry 4321 (1-based) already exists.
    return 4321 >= first && 4321 < first + n ? [ipsetError(req!, 4103, 4321)] : [ackReply(req!)];
  });
  const c = new IpsetClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  const err = await t.throwsAsync(c.addMany('KUBE-CLUSTER-IP', entries));
  t.true(err instanceof NetlinkError);
  t.true(isEntryExists(err));
  t.is(
    err!.message,
    `add ${entries[4320]!.ip},tcp:${entries[4320]!.port} to ipset KUBE-CLUSTER-IP (entry 4321 of 5000): IPSET_ERR_EXIST`,
  );
});

test('an error the kernel blames on no entry (the set is missing) names the bulk, not an entry', async (t) => {
  const kernel = new FakeKernel(([req]) => [ipsetError(req!, 2)]);
  const c = new IpsetClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  const err = await t.throwsAsync(c.addMany('KUBE-NOPE', many(3)));
  t.is(err!.message, `add 3 entries (${many(1)[0]!.ip},tcp:1 ...) to ipset KUBE-NOPE: ENOENT`);
});

test('single operations: errors carry ipset names; test() answers false for IPSET_ERR_EXIST', async (t) => {
  const kernel = new FakeKernel(([req]) => {
    const name = ipsetAttrs(req!, 'r').str(IpsetAttr.SETNAME);
    if (name === 'MISSING') return [ipsetError(req!, 2)];
    if (cmdOf(req!) === IpsetCmd.TEST) return [ipsetError(req!, 4103)];
    if (cmdOf(req!) === IpsetCmd.ADD) return [ipsetError(req!, 4352)];
    return [ackReply(req!)];
  });
  const c = new IpsetClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  t.false(await c.test('S', { ip: '10.0.0.1' }));
  const full = await t.throwsAsync(c.add('S', { ip: '10.0.0.1' }, { type: 'hash:ip' }));
  t.is(full!.message, 'add 10.0.0.1 to ipset S: IPSET_ERR_HASH_FULL');
  const missing = await t.throwsAsync(c.flush('MISSING'));
  t.true(isSetNotFound(missing));
  t.is(missing!.message, 'flush ipset MISSING: ENOENT');
});
