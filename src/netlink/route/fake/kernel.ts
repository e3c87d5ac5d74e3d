// FakeRouteKernel: the part of rtnetlink the RouteClient uses (links, their up flag, their
// addresses), in memory, at the message boundary: it answers over a core FakeKernel with the
// errnos the kernel returns. test/kernel/route-contract.test.ts holds it to the real kernel.
//
// Known simplifications: no IPv6 link-local addresses appear when a link goes up (the kernel
// adds fe80::/64 ones), no routes, no carrier or queueing details, random MACs.

import {
  AF_INET,
  AF_INET6,
  AttrSet,
  AttrWriter,
  ByteWriter,
  ERRNO,
  NetlinkConnection,
  NetlinkDecodeError,
  NLM_F_CREATE,
  NLM_F_EXCL,
  NLM_F_MULTI,
  NLMSG_DONE,
} from '../../core/index.ts';
import type { InMessage } from '../../core/index.ts';
import type { FakeReply } from '../../core/fake/index.ts';
import { errorReply, extAckErrorReply, FakeKernel } from '../../core/fake/index.ts';
import { ipFromBytes, parseIP } from '../../../base/ip.ts';
import { RouteClient } from '../client.ts';
import { parseIfInfo } from '../codec.ts';
import {
  IFA_F_NOPREFIXROUTE,
  IFA_F_PERMANENT,
  IFADDRMSG_LEN,
  IFF_BROADCAST,
  IFF_LOOPBACK,
  IFF_LOWER_UP,
  IFF_NOARP,
  IFF_RUNNING,
  IFF_UP,
  IFLA_INFO_KIND,
  Ifa,
  Ifla,
  RtScope,
  RTM_DELADDR,
  RTM_DELLINK,
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_NEWADDR,
  RTM_NEWLINK,
} from '../constants.ts';

const { ENODEV, EEXIST, EINVAL, EOPNOTSUPP, EADDRNOTAVAIL } = ERRNO;
const ARPHRD_ETHER = 1;
const ARPHRD_LOOPBACK = 772;
const IF_OPER_UNKNOWN = 0;
const IF_OPER_DOWN = 2;

interface FakeLink {
  index: number;
  name: string;
  kind: string | undefined;
  /** Flags while down; up adds IFF_UP|IFF_RUNNING|IFF_LOWER_UP. */
  baseFlags: number;
  up: boolean;
  type: number;
  mac: Uint8Array;
}

interface FakeAddr {
  index: number;
  family: number;
  bytes: Uint8Array;
  prefixLen: number;
  scope: number;
  flags: number;
}

class Refusal extends Error {
  readonly errno: number;
  /** The extended-ACK text the kernel sends with this refusal, if any. */
  readonly extAck: string | undefined;
  constructor(errno: number, extAck?: string) {
    super(`errno ${errno}`);
    this.errno = errno;
    this.extAck = extAck;
  }
}

export interface FakeRouteOptions {
  /** Link kinds the "kernel" can create; default dummy, ifb, bridge. */
  kinds?: readonly string[];
  /** lo starts up, with 127.0.0.1/8 and ::1/128 (as test namespaces have it). Default true. */
  loopbackUp?: boolean;
}

export class FakeRouteKernel {
  readonly links = new Map<number, FakeLink>();
  readonly addrs: FakeAddr[] = [];
  readonly kinds: ReadonlySet<string>;
  private nextIndex = 1;

  constructor(opts: FakeRouteOptions = {}) {
    this.kinds = new Set(opts.kinds ?? ['dummy', 'ifb', 'bridge']);
    const lo = this.addLink('lo', undefined, IFF_LOOPBACK, ARPHRD_LOOPBACK);
    if (opts.loopbackUp ?? true) {
      lo.up = true;
      this.addrs.push({
        index: lo.index,
        family: AF_INET,
        bytes: Uint8Array.of(127, 0, 0, 1),
        prefixLen: 8,
        scope: RtScope.HOST,
        flags: IFA_F_PERMANENT,
      });
      this.addrs.push({
        index: lo.index,
        family: AF_INET6,
        bytes: Uint8Array.of(...new Array<number>(15).fill(0), 1),
        prefixLen: 128,
        scope: RtScope.HOST,
        flags: IFA_F_PERMANENT,
      });
    }
  }

  /** Adds a link directly (a node's eth0, say) and returns it. */
  addLink(
    name: string,
    kind: string | undefined,
    baseFlags = IFF_BROADCAST | IFF_NOARP,
    type = ARPHRD_ETHER,
  ): FakeLink {
    const mac =
      type === ARPHRD_LOOPBACK
        ? new Uint8Array(6)
        : Uint8Array.from({ length: 6 }, (_, i) => (i === 0 ? 0x02 : Math.floor(Math.random() * 256)));
    const link: FakeLink = { index: this.nextIndex++, name, kind, baseFlags, up: false, type, mac };
    this.links.set(link.index, link);
    return link;
  }

  /** Adds an address directly (for node-address tests). */
  addAddr(linkName: string, address: string, prefixLen: number, scope: number = RtScope.UNIVERSE): void {
    const link = [...this.links.values()].find((l) => l.name === linkName);
    if (!link) throw new Error(`no link ${linkName}`);
    const ip = parseIP(address);
    if (!ip) throw new Error(`"${address}" is not an IP address`);
    this.addrs.push({
      index: link.index,
      family: ip.family === 'IPv4' ? AF_INET : AF_INET6,
      bytes: ip.bytes,
      prefixLen,
      scope,
      flags: IFA_F_PERMANENT,
    });
  }

  readonly handler = (requests: InMessage[]): FakeReply[] => requests.flatMap((r) => this.handle(r));

  handle(req: InMessage): FakeReply[] {
    try {
      switch (req.type) {
        case RTM_NEWLINK:
          return this.newLink(req);
        case RTM_DELLINK: {
          const link = this.linkOf(req);
          if (link.type === ARPHRD_LOOPBACK) throw new Refusal(EOPNOTSUPP);
          this.links.delete(link.index);
          for (let i = this.addrs.length - 1; i >= 0; i--)
            if (this.addrs[i]!.index === link.index) this.addrs.splice(i, 1);
          return [errorReply(req, 0)];
        }
        case RTM_GETLINK: {
          if (req.flags & 0x300)
            return [
              ...[...this.links.values()].map((l) => ({ ...this.linkReply(req, l), flags: NLM_F_MULTI })),
              done(req),
            ];
          return [this.linkReply(req, this.linkOf(req)), errorReply(req, 0)];
        }
        case RTM_NEWADDR:
        case RTM_DELADDR:
          return this.addr(req);
        case RTM_GETADDR: {
          const fam = req.payload[0] ?? 0;
          const list = this.addrs.filter((a) => fam === 0 || a.family === fam);
          // The kernel dumps IPv4 before IPv6.
          list.sort((a, b) => a.family - b.family);
          return [...list.map((a) => ({ ...this.addrReply(req, a), flags: NLM_F_MULTI })), done(req)];
        }
        default:
          throw new Refusal(EOPNOTSUPP);
      }
    } catch (e) {
      if (e instanceof Refusal)
        return [e.extAck === undefined ? errorReply(req, e.errno) : extAckErrorReply(req, e.errno, e.extAck)];
      if (e instanceof NetlinkDecodeError) return [errorReply(req, EINVAL)];
      throw e;
    }
  }

  private linkOf(req: InMessage): FakeLink {
    const { hdr, attrs } = parseIfInfo(req);
    const name = attrs.str(Ifla.IFNAME);
    const link = hdr.index > 0 ? this.links.get(hdr.index) : [...this.links.values()].find((l) => l.name === name);
    if (!link) throw new Refusal(ENODEV);
    return link;
  }

  private newLink(req: InMessage): FakeReply[] {
    const { hdr, attrs } = parseIfInfo(req);
    if (req.flags & NLM_F_CREATE && hdr.index === 0) {
      const name = attrs.str(Ifla.IFNAME);
      if (name === undefined) throw new Refusal(EINVAL);
      if ([...this.links.values()].some((l) => l.name === name)) {
        if (req.flags & NLM_F_EXCL) throw new Refusal(EEXIST);
        return [errorReply(req, 0)];
      }
      const info = attrs.nested(Ifla.LINKINFO);
      const kind = info?.str(IFLA_INFO_KIND);
      // rtnl_newlink's words for a kind the kernel has no driver for.
      if (kind === undefined || !this.kinds.has(kind)) throw new Refusal(EOPNOTSUPP, 'Unknown device type');
      this.addLink(name, kind);
      return [errorReply(req, 0)];
    }
    const link = this.linkOf(req);
    if (hdr.change & IFF_UP) link.up = (hdr.flags & IFF_UP) !== 0;
    return [errorReply(req, 0)];
  }

  private addr(req: InMessage): FakeReply[] {
    const p = req.payload;
    if (p.length < IFADDRMSG_LEN) throw new Refusal(EINVAL);
    const family = p[0]!;
    const prefixLen = p[1]!;
    const index = new DataView(p.buffer, p.byteOffset, p.byteLength).getUint32(4, true);
    const attrs = new AttrSet(p.subarray(IFADDRMSG_LEN), 'fake address');
    const bytes = attrs.bytes(Ifa.LOCAL) ?? attrs.bytes(Ifa.ADDRESS);
    const want = family === AF_INET ? 4 : family === AF_INET6 ? 16 : -1;
    if (!bytes || bytes.length !== want || prefixLen > want * 8) throw new Refusal(EINVAL);
    if (!this.links.has(index)) throw new Refusal(ENODEV);
    const same = (a: FakeAddr): boolean =>
      a.index === index &&
      a.family === family &&
      Buffer.from(a.bytes).equals(Buffer.from(bytes)) &&
      (family === AF_INET6 || a.prefixLen === prefixLen);
    const at = this.addrs.findIndex(same);
    if (req.type === RTM_DELADDR) {
      if (at < 0) throw new Refusal(EADDRNOTAVAIL, family === AF_INET ? 'ipv4: Address not found' : undefined);
      this.addrs.splice(at, 1);
      return [errorReply(req, 0)];
    }
    // The kernel's words (__inet_insert_ifa, ipv6_add_addr); route-contract.test.ts holds the fake to them.
    if (at >= 0)
      throw new Refusal(
        EEXIST,
        family === AF_INET ? 'ipv4: Address already assigned' : 'ipv6: address already assigned',
      );
    const flags = IFA_F_PERMANENT | ((attrs.u32(Ifa.FLAGS) ?? p[2]!) & IFA_F_NOPREFIXROUTE);
    this.addrs.push({ index, family, bytes: Uint8Array.from(bytes), prefixLen, scope: p[3]!, flags });
    return [errorReply(req, 0)];
  }

  private linkReply(req: InMessage, l: FakeLink): FakeReply {
    const flags = l.baseFlags | (l.up ? IFF_UP | IFF_RUNNING | IFF_LOWER_UP : 0);
    const out = new ByteWriter(128);
    out.u8(0).u8(0).u16le(l.type).i32le(l.index).u32le(flags).u32le(0);
    const w = new AttrWriter(out);
    w.str(Ifla.IFNAME, l.name)
      .u32(Ifla.MTU, l.type === ARPHRD_LOOPBACK ? 65536 : 1500)
      .u8(Ifla.OPERSTATE, l.up ? IF_OPER_UNKNOWN : IF_OPER_DOWN);
    w.bytes(Ifla.ADDRESS, l.mac);
    if (l.kind !== undefined) {
      const info = new AttrWriter();
      info.str(IFLA_INFO_KIND, l.kind);
      w.bytes(Ifla.LINKINFO, info.finish());
    }
    return { type: RTM_NEWLINK, payload: out.toBytes(), seq: req.seq };
  }

  private addrReply(req: InMessage, a: FakeAddr): FakeReply {
    const out = new ByteWriter(64);
    out
      .u8(a.family)
      .u8(a.prefixLen)
      .u8(a.flags & 0xff)
      .u8(a.scope)
      .u32le(a.index);
    const w = new AttrWriter(out);
    w.bytes(Ifa.ADDRESS, a.bytes).bytes(Ifa.LOCAL, a.bytes);
    if (a.family === AF_INET) w.str(Ifa.LABEL, this.links.get(a.index)?.name ?? '');
    w.u32(Ifa.FLAGS, a.flags);
    return { type: RTM_NEWADDR, payload: out.toBytes(), seq: req.seq };
  }

  /** Addresses as text, for assertions: "kube-ipvs0 10.96.0.1/32". */
  dumpAddrs(): string[] {
    return this.addrs
      .map((a) => `${this.links.get(a.index)?.name ?? a.index} ${ipFromBytes(a.bytes).text}/${a.prefixLen}`)
      .sort();
  }
}

function done(req: InMessage): FakeReply {
  const w = new ByteWriter(4);
  w.u32le(0);
  return { type: NLMSG_DONE, flags: NLM_F_MULTI, payload: w.toBytes(), seq: req.seq };
}

/** A RouteClient whose kernel is a FakeRouteKernel. */
export function fakeRoute(opts: FakeRouteOptions = {}): { client: RouteClient; kernel: FakeRouteKernel } {
  const kernel = new FakeRouteKernel(opts);
  return {
    client: new RouteClient(new NetlinkConnection(new FakeKernel(kernel.handler), { timeoutMs: 5000 })),
    kernel,
  };
}
