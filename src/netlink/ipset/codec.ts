// ipset over nfnetlink (subsystem NFNL_SUBSYS_IPSET = 6): message builders and decoders.
//
// Every request starts with nfgenmsg (family NFPROTO_IPV4, version 0, res_id 0) and carries
// IPSET_ATTR_PROTOCOL first. Integers are big-endian and flagged NLA_F_NET_BYTEORDER (the kernel
// checks the flag on ports, timeouts, sizes and line numbers); u8 attributes carry no flag.
//
//   add KUBE-CLUSTER-IP 10.96.0.1,tcp:443 comment "x"          (what `ipset add` sends)
//   ┌ PROTOCOL u8 7 ┬ SETNAME "KUBE-CLUSTER-IP" ┬ DATA (nested) ────────────────────────────┐
//   │               │                           │ IP (nested) { IPADDR_IPV4 be32 }          │
//   │               │                           │ PORT be16 · PROTO u8 · COMMENT str · LINENO │
//   └───────────────┴───────────────────────────┴─────────────────────────────────────────────┘
//   A bulk add (what `ipset restore` sends) replaces DATA with ADT { DATA, DATA, ... } and adds a
//   top-level LINENO; each DATA has its own LINENO, and on failure the kernel echoes the request
//   with the top-level LINENO set to the failing entry's.
//
// Whether an add of an existing entry (or a del of a missing one) is an error is carried by
// NLM_F_EXCL, not by an attribute: without it the kernel behaves as `ipset -exist`.

import { ipFromBytes, parseCIDR, parseIP } from '../../base/ip.ts';
import {
  AttrSet,
  NetlinkDecodeError,
  NfnlSubsys,
  NLA_F_NESTED,
  NLA_F_NET_BYTEORDER,
  NLM_F_CREATE,
  NLM_F_EXCL,
  nfMessage,
  splitNfPayload,
} from '../core/index.ts';
import type { AttrWriter, InMessage, OutMessage } from '../core/index.ts';
import {
  IPSET_ATTR_IPADDR_IPV4,
  IPSET_ATTR_IPADDR_IPV6,
  IPSET_FLAG_WITH_COMMENT,
  IPSET_PROTOCOL,
  IpsetAttr,
  IpsetCmd,
  IpsetDataAttr as D,
  NFPROTO_IPV4,
  NFPROTO_IPV6,
  NFPROTO_UNSPEC,
} from './constants.ts';
import type {
  IpsetCreateOptions,
  IpsetEntry,
  IpsetFamily,
  IpsetHeader,
  IpsetInfo,
  IpsetProto,
  IpsetType,
} from './types.ts';

const NET = NLA_F_NET_BYTEORDER;

const PROTO_NUMBERS: Record<string, number> = { icmp: 1, tcp: 6, udp: 17, icmpv6: 58, sctp: 132 };
const PROTO_NAMES = new Map(Object.entries(PROTO_NUMBERS).map(([k, v]) => [v, k]));

export const protoNumber = (p: IpsetProto): number => (typeof p === 'number' ? p : PROTO_NUMBERS[p]!);
export const protoName = (n: number): IpsetProto => (PROTO_NAMES.get(n) as IpsetProto | undefined) ?? n;

export const familyNumber = (type: string, family: IpsetFamily | undefined): number =>
  type.startsWith('bitmap:port') ? NFPROTO_UNSPEC : family === 'inet6' ? NFPROTO_IPV6 : NFPROTO_IPV4;

/** What an entry of each type must carry. */
interface Shape {
  ip: boolean;
  cidr: boolean;
  port: boolean;
  ip2: boolean;
  cidr2: boolean;
}
const SHAPES: Record<IpsetType, Shape> = {
  'hash:ip': { ip: true, cidr: false, port: false, ip2: false, cidr2: false },
  'hash:ip,port': { ip: true, cidr: false, port: true, ip2: false, cidr2: false },
  'hash:ip,port,ip': { ip: true, cidr: false, port: true, ip2: true, cidr2: false },
  'hash:ip,port,net': { ip: true, cidr: false, port: true, ip2: true, cidr2: true },
  'hash:net': { ip: true, cidr: true, port: false, ip2: false, cidr2: false },
  'bitmap:port': { ip: false, cidr: false, port: true, ip2: false, cidr2: false },
};
export const isKnownType = (t: string): t is IpsetType => Object.hasOwn(SHAPES, t);

/** The entry in ipset's own text form: "10.96.0.1,tcp:443", "10.0.0.0/8", "30080". */
export function formatEntry(e: IpsetEntry): string {
  const parts: string[] = [];
  if (e.ip !== undefined) parts.push(e.cidr !== undefined ? `${e.ip}/${e.cidr}` : e.ip);
  if (e.port !== undefined)
    parts.push(
      e.proto !== undefined && e.ip !== undefined ? `${protoName(protoNumber(e.proto))}:${e.port}` : String(e.port),
    );
  if (e.ip2 !== undefined) parts.push(e.cidr2 !== undefined ? `${e.ip2}/${e.cidr2}` : e.ip2);
  return parts.join(',');
}

/** Parses ipset's text form for the given type ("10.96.0.1,tcp:443" for hash:ip,port). */
export function parseEntry(type: IpsetType, text: string): IpsetEntry {
  const shape = SHAPES[type];
  const fail = (why: string): never => {
    throw new TypeError(`invalid ${type} entry "${text}": ${why}`);
  };
  if (type === 'bitmap:port') {
    const m = /^(?:(tcp|udp|sctp):)?(\d+)$/.exec(text);
    if (!m) fail('expected a port');
    return { port: Number(m![2]) };
  }
  // IPv6 addresses contain colons but never commas, so commas split the parts.
  const parts = text.split(',');
  const want = 1 + (shape.port ? 1 : 0) + (shape.ip2 ? 1 : 0);
  if (parts.length !== want) fail(`expected ${want} comma-separated parts`);
  const e: IpsetEntry = {};
  const [first, second, third] = parts as [string, string | undefined, string | undefined];
  const net = (s: string, withCidr: boolean): { ip: string; cidr?: number } => {
    if (!withCidr) return { ip: s };
    const slash = s.lastIndexOf('/');
    if (slash < 0) return { ip: s };
    return { ip: s.slice(0, slash), cidr: Number(s.slice(slash + 1)) };
  };
  const a = net(first, shape.cidr);
  e.ip = a.ip;
  if (a.cidr !== undefined) e.cidr = a.cidr;
  if (shape.port) {
    const m = /^(?:([a-z0-9]+):)?(\d+)$/.exec(second ?? '');
    if (!m) fail('expected proto:port');
    e.proto = m![1] === undefined ? 'tcp' : /^\d+$/.test(m![1]) ? Number(m![1]) : (m![1] as IpsetProto);
    e.port = Number(m![2]);
  }
  if (shape.ip2) {
    const b = net(third ?? '', shape.cidr2);
    e.ip2 = b.ip;
    if (b.cidr !== undefined) e.cidr2 = b.cidr;
  }
  return e;
}

/** Checks an entry against its set's type and family; returns a reason, or undefined when valid. */
export function entryProblem(type: IpsetType, family: IpsetFamily, e: IpsetEntry): string | undefined {
  const shape = SHAPES[type];
  const fam = family === 'inet6' ? 'IPv6' : 'IPv4';
  const maxPrefix = family === 'inet6' ? 128 : 32;
  const addr = (what: string, s: string | undefined): string | undefined => {
    if (s === undefined) return `missing ${what}`;
    const ip = parseIP(s);
    if (!ip) return `${what} "${s}" is not an IP address`;
    if (ip.family !== fam) return `${what} ${s} is not ${fam}`;
    return undefined;
  };
  const prefix = (what: string, n: number | undefined): string | undefined =>
    n === undefined || (Number.isInteger(n) && n >= 0 && n <= maxPrefix) ? undefined : `${what} /${n} out of range`;
  if (shape.ip) {
    const p = addr('ip', e.ip) ?? prefix('cidr', e.cidr);
    if (p) return p;
  } else if (e.ip !== undefined) return `${type} entries have no ip`;
  if (!shape.cidr && e.cidr !== undefined) return `${type} entries have no cidr`;
  if (shape.port) {
    if (e.port === undefined || !Number.isInteger(e.port) || e.port < 0 || e.port > 65535)
      return `port ${e.port} out of range`;
    if (shape.ip) {
      if (e.proto === undefined) return 'missing protocol';
      const n = protoNumber(e.proto);
      if (n === undefined || !Number.isInteger(n) || n <= 0 || n > 255) return `unknown protocol ${String(e.proto)}`;
    }
  } else if (e.port !== undefined) return `${type} entries have no port`;
  if (shape.ip2) {
    const p = addr('second address', e.ip2) ?? prefix('cidr2', e.cidr2);
    if (p) return p;
  } else if (e.ip2 !== undefined) return `${type} entries have no second address`;
  if (!shape.cidr2 && e.cidr2 !== undefined) return `${type} entries have no cidr2`;
  if (e.timeout !== undefined && (!Number.isInteger(e.timeout) || e.timeout < 0 || e.timeout > 0x7fffffff))
    return `timeout ${e.timeout} out of range`;
  if (e.comment !== undefined && Buffer.byteLength(e.comment) > 255) return 'comment longer than 255 bytes';
  return undefined;
}

/** Dotted-quad bytes without the general parser (bulk adds parse tens of thousands). */
function v4Bytes(text: string): Uint8Array | undefined {
  const out = new Uint8Array(4);
  let part = 0;
  let val = 0;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 46 /* . */) {
      if (digits === 0 || part === 3) return undefined;
      out[part++] = val;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && val === 0) return undefined; // no leading zeros
      val = val * 10 + c - 48;
      if (++digits > 3 || val > 255) return undefined;
    } else return undefined;
  }
  if (part !== 3 || digits === 0) return undefined;
  out[3] = val;
  return out;
}

// IPSET_ATTR_IP { IPADDR_IPV4 } as a fixed 12-byte template: header of the nest, header of the address.
const NEST_V4 = 4 + 4 + 4;

function writeAddr(w: AttrWriter, type: number, text: string): void {
  const b4 = v4Bytes(text);
  if (b4) {
    // nested(type, IPV4|NET bytes) written directly: 0c 00 <type|NESTED> 08 00 <IPV4|NET> a b c d
    w.out
      .u16le(NEST_V4)
      .u16le(type | NLA_F_NESTED)
      .u16le(8)
      .u16le(IPSET_ATTR_IPADDR_IPV4 | NET)
      .bytes(b4);
    return;
  }
  const ip = parseIP(text);
  if (!ip) throw new TypeError(`"${text}" is not an IP address`);
  w.nested(type, (n) =>
    n.bytes((ip.family === 'IPv4' ? IPSET_ATTR_IPADDR_IPV4 : IPSET_ATTR_IPADDR_IPV6) | NET, ip.bytes),
  );
}

/**
 * Writes an entry's attributes, in the order the ipset tool writes them (attribute number
 * order, LINENO last). `lineno` undefined leaves LINENO out (as `ipset test` does).
 */
export function writeEntry(w: AttrWriter, e: IpsetEntry, lineno: number | undefined): void {
  if (e.ip !== undefined) writeAddr(w, D.IP, e.ip);
  if (e.cidr !== undefined) w.u8(D.CIDR, e.cidr);
  if (e.port !== undefined) w.u16(D.PORT | NET, e.port, 'net');
  if (e.timeout !== undefined) w.u32(D.TIMEOUT | NET, e.timeout, 'net');
  if (e.proto !== undefined && e.ip !== undefined) w.u8(D.PROTO, protoNumber(e.proto));
  if (e.ip2 !== undefined) writeAddr(w, D.IP2, e.ip2);
  if (e.cidr2 !== undefined) w.u8(D.CIDR2, e.cidr2);
  if (e.comment !== undefined) w.str(D.COMMENT, e.comment);
  if (lineno !== undefined) w.u32(D.LINENO | NET, lineno, 'net');
}

const ipsetMsg = (cmd: number, flags: number, label: string, fill: (w: AttrWriter) => void): OutMessage =>
  nfMessage(NfnlSubsys.IPSET, cmd, NFPROTO_IPV4, flags, label, (w) => {
    w.u8(IpsetAttr.PROTOCOL, IPSET_PROTOCOL);
    fill(w);
  });

export function checkName(name: string): void {
  const n = Buffer.byteLength(name);
  if (n === 0 || n > 31) throw new TypeError(`ipset name "${name}" must be 1 to 31 bytes long`);
}

export const protocolMessage = (): OutMessage => ipsetMsg(IpsetCmd.PROTOCOL, 0, 'get ipset protocol', () => {});

/** IPSET_CMD_TYPE: asks for the revisions of a type the kernel supports. */
export const typeMessage = (type: string, family: IpsetFamily | undefined): OutMessage =>
  ipsetMsg(IpsetCmd.TYPE, 0, `get ipset type ${type} family ${family ?? 'inet'}`, (w) =>
    w.str(IpsetAttr.TYPENAME, type).u8(IpsetAttr.FAMILY, familyNumber(type, family)),
  );

/** The revisions in an IPSET_CMD_TYPE reply. */
export function parseTypeReply(m: InMessage): { revision: number; revisionMin: number } {
  const a = ipsetAttrs(m, 'ipset type reply');
  return {
    revision: a.require(IpsetAttr.REVISION, a.u8(IpsetAttr.REVISION)),
    revisionMin: a.u8(IpsetAttr.REVISION_MIN) ?? 0,
  };
}

export function createMessage(
  name: string,
  type: IpsetType,
  revision: number,
  opts: IpsetCreateOptions = {},
  exist = false,
): OutMessage {
  checkName(name);
  const family = familyNumber(type, opts.family);
  return ipsetMsg(
    IpsetCmd.CREATE,
    exist ? NLM_F_CREATE : NLM_F_CREATE | NLM_F_EXCL,
    `create ipset ${name} ${type}${type === 'bitmap:port' ? '' : ` family ${opts.family ?? 'inet'}`}`,
    (w) => {
      w.str(IpsetAttr.SETNAME, name)
        .str(IpsetAttr.TYPENAME, type)
        .u8(IpsetAttr.REVISION, revision)
        .u8(IpsetAttr.FAMILY, family);
      w.nested(IpsetAttr.DATA, (d) => {
        if (type === 'bitmap:port') {
          const r = opts.portRange ?? { from: 0, to: 65535 };
          d.u16(D.PORT | NET, r.from, 'net').u16(D.PORT_TO | NET, r.to, 'net');
        }
        if (opts.timeout !== undefined) d.u32(D.TIMEOUT | NET, opts.timeout, 'net');
        if (opts.comment) d.u32(D.CADT_FLAGS | NET, IPSET_FLAG_WITH_COMMENT, 'net');
        if (opts.hashSize !== undefined) d.u32(D.HASHSIZE | NET, opts.hashSize, 'net');
        if (opts.maxElem !== undefined) d.u32(D.MAXELEM | NET, opts.maxElem, 'net');
      });
    },
  );
}

const nameMessage = (cmd: number, flags: number, verb: string, name: string): OutMessage => {
  checkName(name);
  return ipsetMsg(cmd, flags, `${verb} ipset ${name}`, (w) => w.str(IpsetAttr.SETNAME, name));
};

// `ipset destroy` sends NLM_F_EXCL; flush does not. Mirrored for byte equality with the tool.
export const destroyMessage = (name: string): OutMessage => nameMessage(IpsetCmd.DESTROY, NLM_F_EXCL, 'destroy', name);
export const flushMessage = (name: string): OutMessage => nameMessage(IpsetCmd.FLUSH, 0, 'flush', name);

export function renameMessage(from: string, to: string): OutMessage {
  checkName(from);
  checkName(to);
  return ipsetMsg(IpsetCmd.RENAME, 0, `rename ipset ${from} to ${to}`, (w) =>
    w.str(IpsetAttr.SETNAME, from).str(IpsetAttr.SETNAME2, to),
  );
}

export function swapMessage(a: string, b: string): OutMessage {
  checkName(a);
  checkName(b);
  return ipsetMsg(IpsetCmd.SWAP, 0, `swap ipsets ${a} and ${b}`, (w) =>
    w.str(IpsetAttr.SETNAME, a).str(IpsetAttr.SETNAME2, b),
  );
}

/** LIST (a dump): one set when `name` is given, else all; `flags` IPSET_FLAG_LIST_SETNAME/HEADER. */
export function listMessage(name?: string, flags = 0): OutMessage {
  if (name !== undefined) checkName(name);
  return ipsetMsg(IpsetCmd.LIST, 0, name === undefined ? 'list ipsets' : `list ipset ${name}`, (w) => {
    if (name !== undefined) w.str(IpsetAttr.SETNAME, name);
    if (flags) w.u32(IpsetAttr.FLAGS | NET, flags, 'net');
  });
}

export const getByNameMessage = (name: string): OutMessage => nameMessage(IpsetCmd.GET_BYNAME, 0, 'get index of', name);

export type AdtCmd = 'add' | 'del' | 'test';
const ADT_CMDS: Record<AdtCmd, number> = { add: IpsetCmd.ADD, del: IpsetCmd.DEL, test: IpsetCmd.TEST };
const adtLabel = (cmd: AdtCmd, set: string, what: string): string =>
  `${cmd} ${what} ${cmd === 'add' ? 'to' : cmd === 'del' ? 'from' : 'in'} ipset ${set}`;

/**
 * One entry. `exist` (add/del) makes an existing (add) or missing (del) entry a success, as
 * `ipset -exist` does. LINENO 0 is written as the tool does; test carries none.
 */
export function adtMessage(cmd: AdtCmd, set: string, e: IpsetEntry, exist = false): OutMessage {
  checkName(set);
  const flags = cmd === 'test' || exist ? 0 : NLM_F_EXCL;
  return ipsetMsg(ADT_CMDS[cmd], flags, adtLabel(cmd, set, formatEntry(e)), (w) => {
    w.str(IpsetAttr.SETNAME, set);
    w.nested(IpsetAttr.DATA, (d) => writeEntry(d, e, cmd === 'test' ? undefined : 0));
  });
}

/** The largest ADT attribute: nla_len is a u16. Leaves room for the last entry's overshoot. */
const ADT_BUDGET = 0xffff - 1024;

/**
 * Bulk add/del as `ipset restore` sends it: entries in ADT lists, each DATA numbered with its
 * LINENO (firstLine, firstLine+1, ...), as many per message as fit in one attribute.
 * Returns the messages and, for each, the index in `entries` of its first entry.
 */
export function adtBulkMessages(
  cmd: 'add' | 'del',
  set: string,
  entries: readonly IpsetEntry[],
  exist = false,
): { msgs: OutMessage[]; starts: number[] } {
  checkName(set);
  const msgs: OutMessage[] = [];
  const starts: number[] = [];
  const flags = exist ? 0 : NLM_F_EXCL;
  let i = 0;
  while (i < entries.length) {
    const start = i;
    const msg = nfMessage(NfnlSubsys.IPSET, ADT_CMDS[cmd], NFPROTO_IPV4, flags, '', (w) => {
      // The top-level LINENO is where the kernel reports the failing entry's number. The tool
      // writes its first line number there; we write 0, so that an error the kernel did not
      // attribute to an entry (a missing set, a malformed message) cannot be mistaken for one.
      w.u8(IpsetAttr.PROTOCOL, IPSET_PROTOCOL)
        .str(IpsetAttr.SETNAME, set)
        .u32(IpsetAttr.LINENO | NET, 0, 'net');
      w.nested(IpsetAttr.ADT, (adt) => {
        const base = adt.out.length;
        while (i < entries.length && adt.out.length - base < ADT_BUDGET) {
          const e = entries[i]!;
          adt.nested(IpsetAttr.DATA, (d) => writeEntry(d, e, i + 1));
          i++;
        }
      });
    });
    const n = i - start;
    const what = formatEntry(entries[start]!);
    msgs.push({ ...msg, label: adtLabel(cmd, set, n === 1 ? what : `${n} entries (${what} ...)`) });
    starts.push(start);
  }
  return { msgs, starts };
}

/** The top-level attributes of an ipset message (after nfgenmsg). */
export function ipsetAttrs(m: { payload: Uint8Array }, where: string): AttrSet {
  const nf = splitNfPayload(m.payload);
  if (!nf) throw new NetlinkDecodeError(where, 0, `payload of ${m.payload.length} bytes is shorter than nfgenmsg`);
  return new AttrSet(nf.attrs, where, 4);
}

/**
 * The LINENO in an echoed bulk request: the 1-based number of the entry the kernel refused, or
 * undefined when it attributed the error to no entry (LINENO still 0, or absent).
 */
export function echoedLineno(echo: Uint8Array): number | undefined {
  try {
    return ipsetAttrs({ payload: echo }, 'echoed ipset request').u32(IpsetAttr.LINENO, 'net') || undefined;
  } catch {
    return undefined;
  }
}

function readAddr(a: AttrSet, type: number): string | undefined {
  const n = a.nested(type);
  if (!n) return undefined;
  const v4 = n.bytes(IPSET_ATTR_IPADDR_IPV4);
  const v6 = n.bytes(IPSET_ATTR_IPADDR_IPV6);
  const b = v4 ?? v6;
  if (!b) throw new NetlinkDecodeError(n.where, 0, 'address attribute holds neither IPv4 nor IPv6');
  const want = v4 ? 4 : 16;
  if (b.length !== want) throw new NetlinkDecodeError(n.where, 0, `address of ${b.length} bytes, expected ${want}`);
  return ipFromBytes(b).text;
}

/** Decodes one DATA attribute of a LIST reply (or of a request) into an entry. */
export function decodeEntry(d: AttrSet): IpsetEntry {
  const e: IpsetEntry = {};
  const ip = readAddr(d, D.IP);
  if (ip !== undefined) e.ip = ip;
  const cidr = d.u8(D.CIDR);
  if (cidr !== undefined) e.cidr = cidr;
  const proto = d.u8(D.PROTO);
  const port = d.u16(D.PORT, 'net');
  if (port !== undefined) {
    if (proto !== undefined) e.proto = protoName(proto);
    e.port = port;
  }
  const ip2 = readAddr(d, D.IP2);
  if (ip2 !== undefined) e.ip2 = ip2;
  const cidr2 = d.u8(D.CIDR2);
  if (cidr2 !== undefined) e.cidr2 = cidr2;
  const timeout = d.u32(D.TIMEOUT, 'net');
  if (timeout !== undefined) e.timeout = timeout;
  const comment = d.str(D.COMMENT);
  if (comment !== undefined) e.comment = comment;
  return e;
}

const FAMILIES: Record<number, IpsetFamily | 'unspec'> = {
  [NFPROTO_IPV4]: 'inet',
  [NFPROTO_IPV6]: 'inet6',
  [NFPROTO_UNSPEC]: 'unspec',
};

function decodeHeader(name: string, a: AttrSet): IpsetHeader {
  const type = a.require(IpsetAttr.TYPENAME, a.str(IpsetAttr.TYPENAME));
  const fam = a.require(IpsetAttr.FAMILY, a.u8(IpsetAttr.FAMILY));
  const h: IpsetHeader = {
    name,
    type,
    family: FAMILIES[fam] ?? 'unspec',
    revision: a.u8(IpsetAttr.REVISION) ?? 0,
    comment: false,
  };
  const index = a.u16(IpsetAttr.INDEX, 'net');
  if (index !== undefined) h.index = index;
  const d = a.nested(IpsetAttr.DATA);
  if (d) {
    const num = (t: number): number | undefined => d.u32(t, 'net');
    const set = <K extends keyof IpsetHeader>(k: K, v: IpsetHeader[K] | undefined): void => {
      if (v !== undefined) h[k] = v;
    };
    set('hashSize', num(D.HASHSIZE));
    set('maxElem', num(D.MAXELEM));
    set('timeout', num(D.TIMEOUT));
    set('references', num(D.REFERENCES));
    set('memSize', num(D.MEMSIZE));
    set('elements', num(D.ELEMENTS));
    set('bucketSize', d.u8(D.BUCKETSIZE));
    const flags = num(D.CADT_FLAGS) ?? 0;
    h.comment = (flags & IPSET_FLAG_WITH_COMMENT) !== 0;
    const from = d.u16(D.PORT, 'net');
    const to = d.u16(D.PORT_TO, 'net');
    if (from !== undefined && to !== undefined) h.portRange = { from, to };
  }
  return h;
}

/**
 * Folds the messages of a LIST dump into sets. The kernel sends a set's header in its first
 * message and its members over as many messages as they need, each naming the set again.
 */
export function decodeList(replies: readonly InMessage[]): IpsetInfo[] {
  const sets = new Map<string, IpsetInfo>();
  replies.forEach((m, i) => {
    const where = `ipset list reply ${i}`;
    const a = ipsetAttrs(m, where);
    const name = a.require(IpsetAttr.SETNAME, a.str(IpsetAttr.SETNAME));
    let info = sets.get(name);
    if (!info) {
      const header: IpsetHeader = a.has(IpsetAttr.TYPENAME)
        ? decodeHeader(name, a)
        : { name, type: '', family: 'unspec', revision: 0, comment: false };
      info = { ...header, entries: [] };
      sets.set(name, info);
    }
    const adt = a.nested(IpsetAttr.ADT);
    if (adt) {
      for (const d of adt.all) {
        if (d.type !== IpsetAttr.DATA) continue;
        info.entries.push(decodeEntry(new AttrSet(d.data, `${adt.where}/data`, d.offset + 4)));
      }
    }
  });
  return [...sets.values()];
}

/** The kernel index (and family) in a GET_BYNAME reply. */
export function parseByNameReply(m: InMessage): { index: number; family: IpsetFamily | 'unspec' } {
  const a = ipsetAttrs(m, 'ipset get-by-name reply');
  const index = a.require(IpsetAttr.INDEX, a.u16(IpsetAttr.INDEX, 'net'));
  return { index, family: FAMILIES[a.u8(IpsetAttr.FAMILY) ?? 0] ?? 'unspec' };
}

/** Parses a CIDR-ish "10.0.0.0/8" into the ip/cidr pair hash:net entries use. */
export function netEntry(text: string): IpsetEntry {
  const c = parseCIDR(text);
  if (!c) throw new TypeError(`"${text}" is not a CIDR`);
  return { ip: c.addr.text, cidr: c.prefix };
}
