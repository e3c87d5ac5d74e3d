// FakeIpsetKernel: the ipset subsystem of a kernel, in memory, at the message boundary
// (mdlayher's nltest idea): it answers the requests the real IpsetClient sends over a core
// FakeKernel, with the errnos the kernel returns. Proxier tests use it as
// `fakeIpset().client`; test/kernel/ipset-contract.test.ts runs one script against it and
// against the real kernel and expects the same outcomes. Pure: no sockets, no timers.
//
// Known simplifications: entry timeouts are stored but never expire; `test` on hash:net
// matches the exact network (the kernel also matches an address inside a stored network);
// every malformed entry is IPSET_ERR_PROTOCOL (the kernel has a few finer codes, such as
// IPSET_ERR_MISSING_PROTO); sets are never resized (hashsize stays as created).

import {
  AttrSet,
  AttrWriter,
  ByteWriter,
  ERRNO,
  NetlinkConnection,
  NetlinkDecodeError,
  NLM_F_EXCL,
  NLM_F_MULTI,
  NLMSG_DONE,
  NLMSG_ERROR,
  nfnlType,
  NfnlSubsys,
  NLA_F_NET_BYTEORDER,
} from '../../core/index.ts';
import type { InMessage } from '../../core/index.ts';
import type { FakeReply } from '../../core/fake/index.ts';
import { FakeKernel } from '../../core/fake/index.ts';
import { parseCIDR, parseIP } from '../../../base/ip.ts';
import {
  IPSET_FLAG_LIST_HEADER,
  IPSET_FLAG_LIST_SETNAME,
  IPSET_FLAG_WITH_COMMENT,
  IPSET_PROTOCOL,
  IPSET_PROTOCOL_MIN,
  IpsetAttr,
  IpsetCmd,
  IpsetDataAttr as D,
  NFPROTO_IPV4,
  NFPROTO_IPV6,
  NFPROTO_UNSPEC,
} from '../constants.ts';
import { decodeEntry, entryProblem, formatEntry, ipsetAttrs, isKnownType, writeEntry } from '../codec.ts';
import { IpsetClient } from '../client.ts';
import type { IpsetEntry, IpsetFamily, IpsetType } from '../types.ts';

const { ENOENT, EEXIST, EOPNOTSUPP } = ERRNO;
const E = {
  PROTOCOL: 4097,
  FIND_TYPE: 4098,
  MAX_SETS: 4099,
  BUSY: 4100,
  EXIST_SETNAME2: 4101,
  TYPE_MISMATCH: 4102,
  EXIST: 4103,
  TIMEOUT: 4107,
  REFERENCED: 4108,
  COMMENT: 4112,
  HASH_FULL: 4352,
} as const;

/** The highest revisions of Linux 6.18 (what IPSET_CMD_TYPE answers there). */
const REVISIONS: Record<IpsetType, number> = {
  'hash:ip': 6,
  'hash:ip,port': 7,
  'hash:ip,port,ip': 6,
  'hash:ip,port,net': 8,
  'hash:net': 7,
  'bitmap:port': 3,
};
const NET = NLA_F_NET_BYTEORDER;

interface FakeSet {
  name: string;
  type: IpsetType;
  family: number;
  revision: number;
  hashSize: number;
  maxElem: number;
  comment: boolean;
  timeout: number | undefined;
  portRange: { from: number; to: number };
  /** Keyed by the entry's canonical text (host bits cleared), comments aside. */
  entries: Map<string, IpsetEntry>;
  references: number;
}

class Refusal extends Error {
  readonly errno: number;
  readonly lineno: number | undefined;
  constructor(errno: number, lineno?: number) {
    super(`errno ${errno}`);
    this.errno = errno;
    this.lineno = lineno;
  }
}

const famName = (f: number): IpsetFamily => (f === NFPROTO_IPV6 ? 'inet6' : 'inet');

export class FakeIpsetKernel {
  /** Sets by kernel index (ip_set_max slots); a destroyed set frees its slot. */
  readonly slots: (FakeSet | undefined)[] = [];
  /** CONFIG_IP_SET_MAX of the machine's kernel. */
  maxSets = 256;
  /** Every request handled, for assertions. */
  readonly requests: InMessage[] = [];

  private find(name: string): FakeSet | undefined {
    return this.slots.find((s) => s?.name === name);
  }

  /** A set's state, for assertions: entries in canonical text form, sorted. */
  dump(name: string): { type: string; entries: string[] } | undefined {
    const s = this.find(name);
    return (
      s && {
        type: s.type,
        entries: [...s.entries.values()]
          .map((e) => formatEntry(e) + (e.comment !== undefined ? ` comment "${e.comment}"` : ''))
          .sort(),
      }
    );
  }

  /** Marks a set as referenced (as an iptables rule or a list:set would). */
  reference(name: string, by = 1): void {
    const s = this.find(name);
    if (!s) throw new Error(`no set ${name}`);
    s.references += by;
  }

  /** A FakeKernel handler: one request per datagram, as NetlinkConnection.request sends. */
  readonly handler = (requests: InMessage[]): FakeReply[] => requests.flatMap((r) => this.handle(r));

  handle(req: InMessage): FakeReply[] {
    this.requests.push(req);
    try {
      if (req.type >> 8 !== NfnlSubsys.IPSET) return [errorReply(req, EOPNOTSUPP)];
      const a = ipsetAttrs(req, 'fake ipset request');
      const proto = a.u8(IpsetAttr.PROTOCOL);
      if (proto === undefined || proto < IPSET_PROTOCOL_MIN) throw new Refusal(E.PROTOCOL);
      const cmd = req.type & 0xff;
      const exist = (req.flags & NLM_F_EXCL) === 0;
      switch (cmd) {
        case IpsetCmd.PROTOCOL:
        case IpsetCmd.TYPE:
        case IpsetCmd.HEADER:
        case IpsetCmd.GET_BYNAME:
          return [this.info(req, a, cmd, proto), ack(req)];
        case IpsetCmd.CREATE:
          this.create(a, exist);
          break;
        case IpsetCmd.DESTROY:
          this.destroy(a.str(IpsetAttr.SETNAME));
          break;
        case IpsetCmd.FLUSH:
          this.need(a).entries.clear();
          break;
        case IpsetCmd.RENAME:
          this.rename(a);
          break;
        case IpsetCmd.SWAP:
          this.swap(a);
          break;
        case IpsetCmd.ADD:
        case IpsetCmd.DEL:
          this.adt(req, a, cmd, exist);
          break;
        case IpsetCmd.TEST:
          this.test(a);
          break;
        case IpsetCmd.LIST:
        case IpsetCmd.SAVE:
          return this.list(req, a, cmd);
        default:
          throw new Refusal(E.PROTOCOL);
      }
      return [ack(req)];
    } catch (e) {
      if (e instanceof Refusal) return [errorReply(req, e.errno, e.lineno)];
      if (e instanceof NetlinkDecodeError) return [errorReply(req, E.PROTOCOL)];
      throw e;
    }
  }

  /** The answer to PROTOCOL, TYPE, HEADER and GET_BYNAME: one message of attributes. */
  private info(req: InMessage, a: AttrSet, cmd: number, proto: number): FakeReply {
    switch (cmd) {
      case IpsetCmd.PROTOCOL:
        return this.reply(req, cmd, (w) =>
          w.u8(IpsetAttr.PROTOCOL, IPSET_PROTOCOL).u8(IpsetAttr.PROTOCOL_MIN, IPSET_PROTOCOL_MIN),
        );
      case IpsetCmd.TYPE: {
        const type = a.str(IpsetAttr.TYPENAME) ?? '';
        if (!isKnownType(type)) throw new Refusal(E.FIND_TYPE);
        return this.reply(req, cmd, (w) =>
          w
            .u8(IpsetAttr.PROTOCOL, proto)
            .str(IpsetAttr.TYPENAME, type)
            .u8(IpsetAttr.FAMILY, a.u8(IpsetAttr.FAMILY) ?? 0)
            .u8(IpsetAttr.REVISION, REVISIONS[type])
            .u8(IpsetAttr.REVISION_MIN, 0),
        );
      }
      default: {
        const s = this.need(a);
        const index = this.slots.indexOf(s);
        return this.reply(req, cmd, (w) => {
          w.u8(IpsetAttr.PROTOCOL, proto);
          if (cmd === IpsetCmd.HEADER)
            w.str(IpsetAttr.SETNAME, s.name)
              .str(IpsetAttr.TYPENAME, s.type)
              .u8(IpsetAttr.FAMILY, s.family)
              .u8(IpsetAttr.REVISION, s.revision);
          else w.u8(IpsetAttr.FAMILY, s.family).u16(IpsetAttr.INDEX | NET, index, 'net');
        });
      }
    }
  }

  private rename(a: AttrSet): void {
    const s = this.need(a);
    const to = a.str(IpsetAttr.SETNAME2) ?? '';
    if (this.find(to)) throw new Refusal(E.EXIST_SETNAME2);
    if (s.references > 0) throw new Refusal(E.REFERENCED);
    s.name = to;
  }

  private swap(a: AttrSet): void {
    const from = this.need(a);
    const to = this.find(a.str(IpsetAttr.SETNAME2) ?? '');
    if (!to) throw new Refusal(E.EXIST_SETNAME2);
    if (from.type !== to.type || from.family !== to.family) throw new Refusal(E.TYPE_MISMATCH);
    const i = this.slots.indexOf(from);
    const j = this.slots.indexOf(to);
    // The kernel swaps the sets between the two slots and swaps their names back.
    [from.name, to.name] = [to.name, from.name];
    this.slots[i] = to;
    this.slots[j] = from;
  }

  private test(a: AttrSet): void {
    const s = this.need(a);
    const d = a.nested(IpsetAttr.DATA);
    if (!d) throw new Refusal(E.PROTOCOL);
    if (!s.entries.has(this.key(s, decodeEntry(d)))) throw new Refusal(E.EXIST);
  }

  private need(a: AttrSet): FakeSet {
    const name = a.str(IpsetAttr.SETNAME);
    if (name === undefined) throw new Refusal(E.PROTOCOL);
    const s = this.find(name);
    if (!s) throw new Refusal(ENOENT);
    return s;
  }

  private create(a: AttrSet, exist: boolean): void {
    const name = a.str(IpsetAttr.SETNAME);
    const type = a.str(IpsetAttr.TYPENAME);
    const family = a.u8(IpsetAttr.FAMILY);
    const revision = a.u8(IpsetAttr.REVISION);
    if (name === undefined || type === undefined || family === undefined || revision === undefined)
      throw new Refusal(E.PROTOCOL);
    if (!isKnownType(type) || revision > REVISIONS[type]) throw new Refusal(E.FIND_TYPE);
    const d = a.nested(IpsetAttr.DATA);
    const u32 = (t: number): number | undefined => d?.u32(t, 'net');
    const fam = type === 'bitmap:port' ? NFPROTO_UNSPEC : family === NFPROTO_UNSPEC ? NFPROTO_IPV4 : family;
    const set: FakeSet = {
      name,
      type,
      family: fam,
      revision,
      hashSize: u32(D.HASHSIZE) ?? 1024,
      maxElem: u32(D.MAXELEM) ?? 65536,
      comment: ((u32(D.CADT_FLAGS) ?? 0) & IPSET_FLAG_WITH_COMMENT) !== 0,
      timeout: u32(D.TIMEOUT),
      portRange: { from: d?.u16(D.PORT, 'net') ?? 0, to: d?.u16(D.PORT_TO, 'net') ?? 65535 },
      entries: new Map(),
      references: 0,
    };
    const clash = this.find(name);
    if (clash) {
      // With -exist, the same set again is fine (ip_set_create compares type, family, revision, options).
      const same =
        clash.type === set.type &&
        clash.family === set.family &&
        clash.comment === set.comment &&
        clash.timeout === set.timeout &&
        clash.maxElem === set.maxElem;
      if (exist && same) return;
      throw new Refusal(EEXIST);
    }
    let slot = this.slots.indexOf(undefined);
    if (slot < 0) slot = this.slots.length;
    if (slot >= this.maxSets) throw new Refusal(E.MAX_SETS);
    this.slots[slot] = set;
  }

  private destroy(name: string | undefined): void {
    if (name === undefined) {
      // No name: every set, unless one is referenced.
      if (this.slots.some((s) => s && s.references > 0)) throw new Refusal(E.BUSY);
      this.slots.length = 0;
      return;
    }
    const s = this.find(name);
    if (!s) throw new Refusal(ENOENT);
    if (s.references > 0) throw new Refusal(E.BUSY);
    this.slots[this.slots.indexOf(s)] = undefined;
  }

  /** The entry's identity: canonical text with host bits cleared; refuses what the kernel refuses. */
  private key(s: FakeSet, e: IpsetEntry): string {
    const problem = entryProblem(s.type, famName(s.family), e);
    if (problem) throw new Refusal(E.PROTOCOL);
    const k: IpsetEntry = {};
    const masked = (ip: string, cidr: number | undefined): { ip: string; cidr?: number } => {
      if (cidr === undefined) return { ip: parseIP(ip)!.text };
      const c = parseCIDR(`${ip}/${cidr}`)!;
      return { ip: c.addr.text, cidr };
    };
    if (e.ip !== undefined)
      Object.assign(
        k,
        masked(e.ip, s.type === 'hash:net' ? (e.cidr ?? (s.family === NFPROTO_IPV6 ? 128 : 32)) : undefined),
      );
    if (e.port !== undefined) {
      if (e.proto !== undefined) k.proto = e.proto;
      k.port = e.port;
    }
    if (e.ip2 !== undefined) {
      const m = masked(
        e.ip2,
        s.type === 'hash:ip,port,net' ? (e.cidr2 ?? (s.family === NFPROTO_IPV6 ? 128 : 32)) : undefined,
      );
      k.ip2 = m.ip;
      if (m.cidr !== undefined) k.cidr2 = m.cidr;
    }
    return JSON.stringify(k);
  }

  private adt(req: InMessage, a: AttrSet, cmd: number, exist: boolean): void {
    const s = this.need(a);
    const one = a.nested(IpsetAttr.DATA);
    const list = a.nested(IpsetAttr.ADT);
    if (!one === !list || (list && !a.has(IpsetAttr.LINENO))) throw new Refusal(E.PROTOCOL);
    const items = one
      ? [one]
      : list!.all.map((x) => (x.type === IpsetAttr.DATA ? new AttrSet(x.data, 'data') : undefined));
    for (const d of items) {
      if (!d) throw new Refusal(E.PROTOCOL);
      const lineno = list ? d.u32(D.LINENO, 'net') : undefined;
      const fail = (errno: number): never => {
        throw new Refusal(errno, lineno || undefined);
      };
      const e = decodeEntry(d);
      let key: string;
      try {
        key = this.key(s, e);
      } catch (err) {
        if (err instanceof Refusal) fail(err.errno);
        throw err;
      }
      if (s.type === 'bitmap:port' && (e.port! < s.portRange.from || e.port! > s.portRange.to))
        fail(4352 /* IPSET_ERR_BITMAP_RANGE */);
      if (cmd === IpsetCmd.ADD) {
        if (e.comment !== undefined && !s.comment) fail(E.COMMENT);
        if (e.timeout !== undefined && s.timeout === undefined) fail(E.TIMEOUT);
        if (s.entries.has(key!)) {
          if (!exist) fail(E.EXIST);
        } else if (s.entries.size >= s.maxElem) fail(E.HASH_FULL);
        const stored: IpsetEntry = { ...(JSON.parse(key!) as IpsetEntry) };
        if (s.type === 'hash:net' && stored.cidr === undefined) stored.cidr = s.family === NFPROTO_IPV6 ? 128 : 32;
        if (s.timeout !== undefined) stored.timeout = e.timeout ?? s.timeout;
        if (e.comment !== undefined) stored.comment = e.comment;
        s.entries.set(key!, stored);
      } else {
        if (!s.entries.delete(key!) && !exist) fail(E.EXIST);
      }
    }
    void req;
  }

  private list(req: InMessage, a: AttrSet, cmd: number): FakeReply[] {
    const name = a.str(IpsetAttr.SETNAME);
    const flags = a.u32(IpsetAttr.FLAGS, 'net') ?? 0;
    const proto = a.u8(IpsetAttr.PROTOCOL) ?? IPSET_PROTOCOL;
    const sets = name === undefined ? this.slots.filter((s): s is FakeSet => s !== undefined) : [this.need(a)];
    const parts = sets.map((s) => {
      const r = this.reply(req, cmd, (w) => {
        w.u8(IpsetAttr.PROTOCOL, proto).str(IpsetAttr.SETNAME, s.name);
        if (flags & IPSET_FLAG_LIST_SETNAME) return;
        w.str(IpsetAttr.TYPENAME, s.type)
          .u8(IpsetAttr.FAMILY, s.family)
          .u8(IpsetAttr.REVISION, s.revision)
          .u16(IpsetAttr.INDEX | NET, this.slots.indexOf(s), 'net');
        w.nested(IpsetAttr.DATA, (d) => {
          if (s.type === 'bitmap:port')
            d.u16(D.PORT | NET, s.portRange.from, 'net').u16(D.PORT_TO | NET, s.portRange.to, 'net');
          else d.u32(D.HASHSIZE | NET, s.hashSize, 'net').u32(D.MAXELEM | NET, s.maxElem, 'net');
          if (s.timeout !== undefined) d.u32(D.TIMEOUT | NET, s.timeout, 'net');
          if (s.comment) d.u32(D.CADT_FLAGS | NET, IPSET_FLAG_WITH_COMMENT, 'net');
          d.u32(D.REFERENCES | NET, s.references, 'net')
            .u32(D.MEMSIZE | NET, 0, 'net')
            .u32(D.ELEMENTS | NET, s.entries.size, 'net');
        });
        if (flags & IPSET_FLAG_LIST_HEADER) return;
        w.nested(IpsetAttr.ADT, (adt) => {
          for (const e of s.entries.values()) adt.nested(IpsetAttr.DATA, (d) => writeEntry(d, e, undefined));
        });
      });
      return { ...r, flags: NLM_F_MULTI };
    });
    const done = new ByteWriter(4);
    done.u32le(0);
    return [...parts, { type: NLMSG_DONE, flags: NLM_F_MULTI, payload: done.toBytes(), seq: req.seq }];
  }

  private reply(req: InMessage, cmd: number, fill: (w: AttrWriter) => void): FakeReply {
    const out = new ByteWriter(64);
    out.u8(NFPROTO_IPV4).u8(0).u16be(0);
    fill(new AttrWriter(out));
    return { type: nfnlType(NfnlSubsys.IPSET, cmd), payload: out.toBytes(), seq: req.seq };
  }
}

function ack(req: InMessage): FakeReply {
  return errorReply(req, 0);
}

/** NLMSG_ERROR echoing the whole request, with LINENO patched to `lineno` as ipset's call_ad() does. */
function errorReply(req: InMessage, errno: number, lineno?: number): FakeReply {
  const echo = Uint8Array.from(req.payload);
  if (lineno !== undefined) {
    const at = ipsetAttrs({ payload: echo }, 'echo').get(IpsetAttr.LINENO);
    if (at) new DataView(echo.buffer).setUint32(at.offset + 4, lineno, false);
  }
  const w = new ByteWriter(32 + echo.length);
  w.u32le(-errno >>> 0)
    .u32le(16 + req.payload.length)
    .u16le(req.type)
    .u16le(req.flags)
    .u32le(req.seq)
    .u32le(req.pid);
  if (errno !== 0) w.bytes(echo);
  return { type: NLMSG_ERROR, payload: w.toBytes(), seq: req.seq };
}

/** An IpsetClient whose kernel is a FakeIpsetKernel. */
export function fakeIpset(): { client: IpsetClient; kernel: FakeIpsetKernel } {
  const kernel = new FakeIpsetKernel();
  const client = new IpsetClient(new NetlinkConnection(new FakeKernel(kernel.handler), { timeoutMs: 5000 }));
  return { client, kernel };
}
