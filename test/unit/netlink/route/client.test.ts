// RouteClient over the fake kernel: name resolution, ensure semantics, error names.
import test from 'ava';
import { AttrSet, ByteWriter, NetlinkConnection, NetlinkError } from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import { ackReply, doneReply, errorReply } from '../../../../src/netlink/core/fake/index.ts';
import {
  Ifa,
  Ifla,
  RouteClient,
  RTM_DELADDR,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_NEWADDR,
  RTM_NEWLINK,
  isNoSuchLink,
} from '../../../../src/netlink/route/index.ts';

const ENODEV = 19;
const EEXIST = 17;

/** A one-link, address-keeping fake: enough rtnetlink to exercise the client. */
function fakeRoute(): { kernel: FakeKernel; addrs: Set<string> } {
  const addrs = new Set<string>();
  const linkReply = (): Uint8Array => {
    const w = new ByteWriter();
    w.u8(0).u8(0).u16le(1).u32le(5).u32le(1).u32le(0);
    w.u16le(15).u16le(Ifla.IFNAME).bytes(Buffer.from('kube-ipvs0\0')).align4();
    return w.toBytes();
  };
  const kernel = new FakeKernel(([req]) => {
    const r = req!;
    if (r.type === RTM_GETLINK) {
      const name = new AttrSet(r.payload.subarray(16), 'req').str(Ifla.IFNAME);
      if (name !== undefined && name !== 'kube-ipvs0') return [errorReply(r, ENODEV)];
      return [{ type: RTM_NEWLINK, payload: linkReply() }, ackReply(r)];
    }
    if (r.type === RTM_NEWADDR || r.type === RTM_DELADDR) {
      const a = new AttrSet(r.payload.subarray(8), 'req');
      const key = Buffer.from(a.bytes(Ifa.LOCAL)!).toString('hex');
      const index = new DataView(r.payload.buffer, r.payload.byteOffset).getUint32(4, true);
      if (index !== 5) return [errorReply(r, ENODEV)];
      if (r.type === RTM_NEWADDR) {
        if (addrs.has(key)) return [errorReply(r, EEXIST)];
        addrs.add(key);
      } else addrs.delete(key);
      return [ackReply(r)];
    }
    if (r.type === RTM_GETADDR) {
      const parts = [...addrs].map((hex) => {
        const b = Buffer.from(hex, 'hex');
        const w = new ByteWriter();
        w.u8(b.length === 4 ? 2 : 10)
          .u8(b.length * 8)
          .u8(0x80)
          .u8(0)
          .u32le(5);
        w.u16le(4 + b.length)
          .u16le(Ifa.LOCAL)
          .bytes(b)
          .align4();
        return { type: RTM_NEWADDR, flags: 2, payload: w.toBytes() };
      });
      return [...parts, doneReply(r)];
    }
    return [ackReply(r)];
  });
  return { kernel, addrs };
}

test('names resolve to indexes; ensureAddress reports an address already bound', async (t) => {
  const { kernel } = fakeRoute();
  const c = new RouteClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  t.like(await c.getLink('kube-ipvs0'), { index: 5, name: 'kube-ipvs0', up: true });
  t.is(await c.getLink('eth9'), undefined);
  t.false(await c.ensureAddress('kube-ipvs0', '10.96.0.1'));
  t.true(await c.ensureAddress('kube-ipvs0', '10.96.0.1'));
  await c.addAddress(5, 'fd00::1');
  t.deepEqual(
    (await c.listAddresses({ link: 'kube-ipvs0' })).map((a) => `${a.address}/${a.prefixLen}`),
    ['10.96.0.1/32', 'fd00::1/128'],
  );
  t.deepEqual(
    (await c.listAddresses({ family: 'IPv6' })).map((a) => a.address),
    ['fd00::1'],
  );
  await c.deleteAddress('kube-ipvs0', '10.96.0.1');
  t.deepEqual(await c.nodeAddresses('IPv4'), []);
  t.deepEqual(await c.nodeAddresses('IPv6'), ['fd00::1']);
  t.deepEqual(await c.nodeAddresses('IPv6', { exceptLink: 'kube-ipvs0' }), []);
});

test('a missing link is ENODEV naming the operation', async (t) => {
  const { kernel } = fakeRoute();
  const c = new RouteClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  const e = await t.throwsAsync(c.addAddress('eth9', '10.0.0.1'));
  t.true(e instanceof NetlinkError && isNoSuchLink(e));
  t.is(e!.message, 'add address 10.0.0.1 to eth9: ENODEV');
  const d = await t.throwsAsync(c.deleteLink('eth9'));
  t.is(d!.message, 'delete link eth9: ENODEV');
});

test('every request goes out with the expected message types', async (t) => {
  const { kernel } = fakeRoute();
  const c = new RouteClient(new NetlinkConnection(kernel, { timeoutMs: 1000 }));
  await c.setLinkUp('kube-ipvs0');
  const types = kernel.sent.map((b) => new DataView(b.buffer, b.byteOffset).getUint16(4, true));
  t.deepEqual(types, [RTM_GETLINK, RTM_NEWLINK]);
});
