// A listed nf_tables rule (NftClient.listRules) read back as the IptRule encode.ts would have
// written it, so writers recognise their own rules and jumps (and drift), and `explain` can show
// them. The inverse of encode.ts, expression for expression: header (-i, -o, -p, -s, -d), then
// -m matches, an optional counter, one target. Anything else (other software's rules, options
// our model has no field for) gives undefined; this never throws on what the kernel returns.

import type { IPFamily } from '../../../base/ip.ts';
import { ipFromBytes } from '../../../base/ip.ts';
import type { NftExpr } from '../expr/index.ts';
import type { NftRule } from '../types.ts';
import { ADDR_OFFSET, PROTO_NUMBER } from './encode.ts';
import type { IptRule, IptTable, L4Proto, Match, Target } from './rule.ts';
import {
  XT_ADDRTYPE_LOCAL,
  isBareL4,
  isDefaultReject,
  isPhysdevNotIsIn,
  probabilityText,
  readAddrtype,
  readComment,
  readCtstate,
  readDnat,
  readIpvs,
  readMark,
  readMasquerade,
  readNfacct,
  readRecent,
  readRedirect,
  readSctp,
  readSet,
  readStatistic,
  readStatisticNth,
} from './xt-info.ts';

/** What decoding needs from outside: the name of an ipset by kernel index (undefined: unknown). */
export interface IptDecodeContext {
  setName?(index: number): string | undefined;
}

const PROTO_NAME = new Map<number, L4Proto>(Object.entries(PROTO_NUMBER).map(([k, v]) => [v, k as L4Proto]));

/** Thrown inside the decoder for "not one of ours"; caught at the top. */
class NotOurs extends Error {}
const fail = (): never => {
  throw new NotOurs();
};

const u32le = (b: Uint8Array): number =>
  b.length === 4 ? new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true) : fail();
/** The prefix length of a netmask (leading ones, then zeros), or -1. */
function prefixOf(mask: Uint8Array): number {
  let bits = 0;
  let i = 0;
  for (; i < mask.length && mask[i] === 0xff; i++) bits += 8;
  if (i < mask.length) {
    const b = mask[i++]!;
    const ones = Math.clz32(~(b << 24));
    if (((b << ones) & 0xff) !== 0) return -1;
    bits += ones;
  }
  for (; i < mask.length; i++) if (mask[i] !== 0) return -1;
  return bits;
}

class Cursor {
  private i = 0;
  private readonly exprs: readonly NftExpr[];
  constructor(exprs: readonly NftExpr[]) {
    this.exprs = exprs;
  }
  peek(): NftExpr | undefined {
    return this.exprs[this.i];
  }
  next(): NftExpr {
    return this.exprs[this.i++] ?? fail();
  }
  done(): boolean {
    return this.i >= this.exprs.length;
  }
  /** The next expression as a `cmp` on register 1. */
  cmp(): { op: 'eq' | 'neq'; data: Uint8Array } {
    const e = this.next();
    if (e.type !== 'cmp' || e.sreg !== 1 || (e.op !== 'eq' && e.op !== 'neq')) return fail();
    return { op: e.op, data: e.data };
  }
}

function ifaceMatch(m: 'inIface' | 'outIface', c: Cursor): Match {
  const next = c.peek();
  if (next?.type !== 'cmp') return { m, name: '+' }; // iptables-nft's `-i +`: the load alone
  const { op, data } = c.cmp();
  const nul = data.indexOf(0);
  if (nul >= 0 && nul !== data.length - 1) return fail();
  const name = new TextDecoder().decode(nul >= 0 ? data.subarray(0, nul) : data) + (nul >= 0 ? '' : '+');
  return op === 'neq' ? { m, name, invert: true } : { m, name };
}

function addrMatch(dir: 'src' | 'dst', len: number, family: IPFamily, c: Cursor): Match {
  const full = family === 'IPv4' ? 4 : 16;
  let prefix = len * 8;
  if (c.peek()?.type === 'bitwise') {
    const b = c.next();
    if (b.type !== 'bitwise' || !b.mask || len !== full || b.len !== full || b.xor?.some((x) => x !== 0)) return fail();
    prefix = prefixOf(b.mask);
    if (prefix < 0 || prefix % 8 === 0) return fail();
  } else if (len > full) return fail();
  const { op, data } = c.cmp();
  if (data.length !== len) return fail();
  const addr = new Uint8Array(full);
  addr.set(data);
  const cidr = `${ipFromBytes(addr).text}/${prefix}`;
  return op === 'neq' ? { m: dir, cidr, invert: true } : { m: dir, cidr };
}

function markMatch(c: Cursor): Match {
  let mask = 0xffffffff;
  if (c.peek()?.type === 'bitwise') {
    const b = c.next();
    if (b.type !== 'bitwise' || !b.mask || b.len !== 4 || b.xor?.some((x) => x !== 0)) return fail();
    mask = u32le(b.mask);
  }
  const { op, data } = c.cmp();
  const m: Match = { m: 'mark', value: u32le(data), mask };
  return op === 'neq' ? { ...m, invert: true } : m;
}

function xtMatch(
  name: string,
  info: Uint8Array,
  proto: L4Proto | undefined,
  family: IPFamily,
  ctx: IptDecodeContext,
): Match {
  switch (name) {
    case 'comment':
      return { m: 'comment', text: readComment(info) };
    case 'set': {
      const s = readSet(info) ?? fail();
      return { m: 'set', set: ctx.setName?.(s.index) ?? fail(), dirs: s.dirs };
    }
    case 'addrtype': {
      const a = readAddrtype(info) ?? fail();
      if (a.type !== XT_ADDRTYPE_LOCAL) return fail();
      return a.invert
        ? { m: 'addrtype', dir: a.dir, type: 'LOCAL', invert: true }
        : { m: 'addrtype', dir: a.dir, type: 'LOCAL' };
    }
    case 'conntrack': {
      const s = readCtstate(info) ?? fail();
      return s.invert ? { m: 'ctstate', states: s.states, invert: true } : { m: 'ctstate', states: s.states };
    }
    case 'physdev':
      return isPhysdevNotIsIn(info) ? { m: 'physdevNotIsIn' } : fail();
    case 'ipvs': {
      const v = readIpvs(info) ?? fail();
      const len = family === 'IPv4' ? 4 : 16;
      if (v.vaddr.subarray(len).some((x) => x !== 0)) return fail();
      return {
        m: 'ipvs',
        vaddr: ipFromBytes(v.vaddr.slice(0, len)).text,
        vproto: PROTO_NAME.get(v.l4proto) ?? fail(),
        vport: v.vport,
      };
    }
    case 'statistic': {
      const nth = readStatisticNth(info);
      if (nth) return { m: 'statisticNth', ...nth };
      return { m: 'statistic', probability: probabilityText(readStatistic(info) ?? fail()) };
    }
    case 'recent':
      return { m: 'recent', ...(readRecent(info, family) ?? fail()) };
    case 'nfacct':
      return { m: 'nfacct', name: readNfacct(info) ?? fail() };
    case 'tcp':
    case 'udp':
      return proto === name && isBareL4(info) ? { m: 'l4', proto: name } : fail();
    case 'sctp': {
      const port = readSctp(info);
      if (proto !== 'sctp' || port === undefined) return fail();
      return port === null ? { m: 'l4', proto: 'sctp' } : { m: 'dport', proto: 'sctp', port };
    }
    default:
      return fail();
  }
}

function target(e: NftExpr, family: IPFamily): Target {
  if (e.type === 'immediate' && 'verdict' in e) {
    const v = e.verdict;
    if (v.verdict === 'jump') return { t: 'jump', chain: v.chain };
    if (v.verdict === 'accept') return { t: 'ACCEPT' };
    if (v.verdict === 'drop') return { t: 'DROP' };
    if (v.verdict === 'return') return { t: 'RETURN' };
    return fail();
  }
  if (e.type !== 'xttarget') return fail();
  switch (`${e.name}/${e.rev}`) {
    case 'REJECT/0':
      return isDefaultReject(e.info, family) ? { t: 'REJECT' } : fail();
    case 'MARK/2':
      return { t: 'MARK', ...(readMark(e.info) ?? fail()) };
    case 'MASQUERADE/0':
      return { t: 'MASQUERADE', randomFully: readMasquerade(e.info, family) ?? fail() };
    case 'DNAT/2': {
      const d = readDnat(e.info, family) ?? fail();
      return { t: 'DNAT', addr: ipFromBytes(d.addr).text, port: d.port };
    }
    case 'REDIRECT/0':
      return { t: 'REDIRECT', port: readRedirect(e.info, family) ?? fail() };
    default:
      return fail();
  }
}

/** The next match at the cursor (header or -m), given the -p protocol seen so far. */
function nextMatch(c: Cursor, proto: L4Proto | undefined, family: IPFamily, ctx: IptDecodeContext): Match {
  const e = c.next();
  if (e.type === 'meta' && e.dreg === 1) {
    if (e.key === 'iifname') return ifaceMatch('inIface', c);
    if (e.key === 'oifname') return ifaceMatch('outIface', c);
    if (e.key === 'mark') return markMatch(c);
    if (e.key === 'l4proto') {
      const { op, data } = c.cmp();
      if (op !== 'eq' || data.length !== 1) return fail();
      return { m: 'proto', proto: PROTO_NAME.get(data[0]!) ?? fail() };
    }
    return fail();
  }
  if (e.type === 'payload' && e.dreg === 1 && e.base === 'network') {
    const dir = e.offset === ADDR_OFFSET[family].src ? 'src' : e.offset === ADDR_OFFSET[family].dst ? 'dst' : fail();
    return addrMatch(dir, e.len, family, c);
  }
  if (e.type === 'payload' && e.dreg === 1 && e.base === 'transport' && e.offset === 2 && e.len === 2) {
    const { op, data } = c.cmp();
    if (op !== 'eq' || data.length !== 2 || (proto !== 'tcp' && proto !== 'udp')) return fail();
    return { m: 'dport', proto, port: (data[0]! << 8) | data[1]! };
  }
  if (e.type === 'xtmatch') return xtMatch(e.name, e.info, proto, family, ctx);
  return fail();
}

/**
 * The rule as an IptRule of `table`, or undefined when it is not in the form iptables-nft (and
 * so encode.ts) gives one of our rule kinds.
 */
export function decodeIptRule(
  rule: NftRule,
  table: IptTable,
  family: IPFamily,
  ctx: IptDecodeContext = {},
): IptRule | undefined {
  try {
    const c = new Cursor(rule.exprs);
    const matches: Match[] = [];
    let proto: L4Proto | undefined;
    for (;;) {
      const e = c.peek() ?? fail();
      if (e.type === 'counter' || e.type === 'xttarget' || (e.type === 'immediate' && 'verdict' in e)) break;
      const m = nextMatch(c, proto, family, ctx);
      if (m.m === 'proto') proto = m.proto;
      matches.push(m);
    }
    if (c.peek()?.type === 'counter') c.next();
    const t: Target = c.done() ? { t: 'none' } : target(c.next(), family);
    if (!c.done()) return undefined;
    return { table, chain: rule.chain, matches, target: t };
  } catch {
    return undefined; // NotOurs, or a malformed struct (a DataView's RangeError): not ours either
  }
}

/** The chain a rule jumps to (its -j CHAIN), without decoding the rest. */
export function jumpTarget(rule: NftRule): string | undefined {
  const last = rule.exprs[rule.exprs.length - 1];
  return last?.type === 'immediate' && 'verdict' in last && last.verdict.verdict === 'jump'
    ? last.verdict.chain
    : undefined;
}

/** The `-m comment` text of a rule (the first one), without decoding the rest. */
export function ruleComment(rule: NftRule): string | undefined {
  const e = rule.exprs.find((x) => x.type === 'xtmatch' && x.name === 'comment' && x.rev === 0);
  return e?.type === 'xtmatch' ? readComment(e.info) : undefined;
}
