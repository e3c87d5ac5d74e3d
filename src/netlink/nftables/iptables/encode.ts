// IptRule -> nf_tables expressions, exactly as Debian 12's iptables-nft 1.8.9 sends the same rule
// (byte for byte: test/unit/netlink/nftables/iptables/encode.test.ts against the messages
// iptables-nft-restore sent, test/fixtures/netlink/iptables/). What 1.8.9 does:
//   header first, in this order whatever the text's: -i, -o (meta iifname/oifname + cmp: the name
//     with its NUL, or the bytes before a '+'), -p (meta l4proto + cmp), -s, -d (payload + cmp;
//     a prefix that is not whole bytes loads the whole address and masks it with bitwise)
//   then each -m in rule order: native for `-m tcp|udp --dport N` (transport payload + cmp) and
//     `-m mark` (meta mark, bitwise unless the mask is all ones, cmp); every other match through
//     nft_compat (`xtmatch`, infos from xt-info.ts), including `-m sctp`, bare `-m tcp|udp` and
//     `-m nfacct` (revision 1)
//   a counter (zero packets and bytes) in every rule, right before the target
//   -j: native immediate for ACCEPT/DROP/RETURN and chain jumps; xt targets for REJECT, MARK,
//     MASQUERADE, DNAT (rev 2) and REDIRECT
//   NFTA_RULE_COMPAT with the -p protocol (0 without), flags 0; no rule userdata.

import type { IPFamily } from '../../../base/ip.ts';
import { parseCIDRBytes, parseIP } from '../../../base/ip.ts';
import type { NftExpr } from '../expr/index.ts';
import type { NftRule } from '../types.ts';
import type { IptRule, L4Proto, Match, Target } from './rule.ts';
import {
  XT_ADDRTYPE_LOCAL,
  addrtypeMatch,
  commentMatch,
  ctstateMatch,
  dnatTarget,
  ipvsMatch,
  l4Match,
  markTarget,
  masqueradeTarget,
  nfacctMatch,
  physdevNotIsInMatch,
  recentMatch,
  redirectTarget,
  rejectTarget,
  sctpMatch,
  setMatch,
  statisticMatch,
  statisticNthMatch,
} from './xt-info.ts';

/** What encoding needs from outside: the kernel index of an ipset (IpsetClient.getByName). */
export interface IptEncodeContext {
  setIndex(name: string): number;
}

export const PROTO_NUMBER: Readonly<Record<L4Proto, number>> = { tcp: 6, udp: 17, sctp: 132 };

/** Header offsets of the source and destination addresses. */
export const ADDR_OFFSET: Readonly<Record<IPFamily, { src: number; dst: number }>> = {
  IPv4: { src: 12, dst: 16 },
  IPv6: { src: 8, dst: 24 },
};

const u32le = (n: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0, true);
  return b;
};
const u16be = (n: number): Uint8Array => Uint8Array.of((n >> 8) & 0xff, n & 0xff);
const cmp = (op: 'eq' | 'neq', data: Uint8Array): NftExpr => ({ type: 'cmp', sreg: 1, op, data });

function checkPort(what: string, port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new RangeError(`${what}: port ${port} is not in 1..65535`);
  return port;
}

/** -s / -d: iptables-nft's add_addr. */
function addrExprs(dir: 'src' | 'dst', cidr: string, invert: boolean, family: IPFamily): NftExpr[] {
  const c = parseCIDRBytes(cidr);
  if (!c || c.family !== family)
    throw new Error(`rule ${dir === 'src' ? 'source' : 'destination'} ${cidr} is not an ${family} CIDR`);
  if (c.prefix === 0) {
    if (invert) throw new Error(`rule ${dir === 'src' ? '! -s' : '! -d'} ${cidr} matches nothing`);
    return []; // iptables drops a /0 address match
  }
  const full = c.bytes.length;
  const len = c.prefix % 8 === 0 ? c.prefix / 8 : full;
  const out: NftExpr[] = [{ type: 'payload', base: 'network', offset: ADDR_OFFSET[family][dir], len, dreg: 1 }];
  if (c.prefix % 8 !== 0) {
    const mask = new Uint8Array(full);
    for (let i = 0; i < full; i++) mask[i] = (0xff << (8 - Math.max(0, Math.min(8, c.prefix - i * 8)))) & 0xff;
    out.push({ type: 'bitwise', sreg: 1, dreg: 1, len: full, mask, xor: new Uint8Array(full) });
  }
  out.push(cmp(invert ? 'neq' : 'eq', len === full ? c.bytes : c.bytes.slice(0, len)));
  return out;
}

/** -i / -o: the name and its NUL, or only the bytes before a trailing '+' (a lone '+': the load alone). */
function ifaceExprs(key: 'iifname' | 'oifname', name: string, invert: boolean): NftExpr[] {
  const wildcard = name.endsWith('+');
  const base = new TextEncoder().encode(wildcard ? name.slice(0, -1) : name);
  if (base.length > 15 || name.length === 0 || base.includes(0))
    throw new Error(`interface name ${JSON.stringify(name)} is not valid`);
  const load: NftExpr = { type: 'meta', key, dreg: 1 };
  if (wildcard && base.length === 0) return [load];
  const data = new Uint8Array(wildcard ? base.length : base.length + 1);
  data.set(base);
  return [load, cmp(invert ? 'neq' : 'eq', data)];
}

/** The part of a match that precedes the -m matches (header), or undefined for a -m match. */
function headerRank(m: Match): number | undefined {
  switch (m.m) {
    case 'inIface':
      return 0;
    case 'outIface':
      return 1;
    case 'proto':
      return 2;
    case 'src':
      return 3;
    case 'dst':
      return 4;
    default:
      return undefined;
  }
}

function headerExprs(m: Match, family: IPFamily): NftExpr[] {
  switch (m.m) {
    case 'inIface':
      return ifaceExprs('iifname', m.name, m.invert ?? false);
    case 'outIface':
      return ifaceExprs('oifname', m.name, m.invert ?? false);
    case 'proto':
      return [{ type: 'meta', key: 'l4proto', dreg: 1 }, cmp('eq', Uint8Array.of(PROTO_NUMBER[m.proto]))];
    case 'src':
    case 'dst':
      return addrExprs(m.m, m.cidr, m.invert ?? false, family);
    default:
      return [];
  }
}

function matchExprs(m: Match, proto: L4Proto | undefined, family: IPFamily, ctx: IptEncodeContext): NftExpr[] {
  switch (m.m) {
    case 'dport':
    case 'l4':
      if (m.proto !== proto) throw new Error(`-m ${m.proto} needs -p ${m.proto} in the same rule`);
      if (m.m === 'l4') return [m.proto === 'sctp' ? sctpMatch() : l4Match(m.proto)];
      if (m.proto === 'sctp') return [sctpMatch(checkPort('-m sctp --dport', m.port))];
      return [
        { type: 'payload', base: 'transport', offset: 2, len: 2, dreg: 1 },
        cmp('eq', u16be(checkPort(`-m ${m.proto} --dport`, m.port))),
      ];
    case 'comment':
      return [commentMatch(m.text)];
    case 'set':
      return [setMatch(ctx.setIndex(m.set), m.dirs)];
    case 'addrtype':
      return [addrtypeMatch(m.dir, XT_ADDRTYPE_LOCAL, m.invert ?? false)];
    case 'mark': {
      const out: NftExpr[] = [{ type: 'meta', key: 'mark', dreg: 1 }];
      if (m.mask >>> 0 !== 0xffffffff)
        out.push({ type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: u32le(m.mask), xor: u32le(0) });
      out.push(cmp(m.invert ? 'neq' : 'eq', u32le(m.value)));
      return out;
    }
    case 'ctstate':
      return [ctstateMatch(m.states, m.invert ?? false)];
    case 'physdevNotIsIn':
      return [physdevNotIsInMatch()];
    case 'ipvs': {
      const ip = parseIP(m.vaddr);
      if (!ip || ip.family !== family) throw new Error(`-m ipvs --vaddr ${m.vaddr} is not an ${family} address`);
      const addr = new Uint8Array(16);
      addr.set(ip.bytes);
      return [ipvsMatch(addr, PROTO_NUMBER[m.vproto], checkPort('-m ipvs --vport', m.vport))];
    }
    case 'statistic':
      return [statisticMatch(m.probability)];
    case 'statisticNth':
      return [statisticNthMatch(m.every, m.packet)];
    case 'recent':
      return [recentMatch(m, family)];
    case 'nfacct':
      return [nfacctMatch(m.name)];
    default:
      return headerExprs(m, family);
  }
}

function targetExprs(t: Target, family: IPFamily): NftExpr[] {
  switch (t.t) {
    case 'jump':
      if (t.chain.length === 0 || t.chain.length > 28)
        throw new Error(`-j ${JSON.stringify(t.chain)}: a chain name has 1 to 28 characters`);
      return [{ type: 'immediate', verdict: { verdict: 'jump', chain: t.chain } }];
    case 'ACCEPT':
      return [{ type: 'immediate', verdict: { verdict: 'accept' } }];
    case 'DROP':
      return [{ type: 'immediate', verdict: { verdict: 'drop' } }];
    case 'RETURN':
      return [{ type: 'immediate', verdict: { verdict: 'return' } }];
    case 'REJECT':
      return [rejectTarget(family)];
    case 'MARK':
      return [markTarget(t.value, t.op === 'or' ? t.value : 0)];
    case 'MASQUERADE':
      return [masqueradeTarget(t.randomFully, family)];
    case 'DNAT': {
      const ip = parseIP(t.addr);
      if (!ip || ip.family !== family) throw new Error(`-j DNAT --to-destination ${t.addr}: not an ${family} address`);
      return [dnatTarget(ip.bytes, checkPort('-j DNAT', t.port))];
    }
    case 'REDIRECT':
      return [redirectTarget(checkPort('-j REDIRECT --to-ports', t.port), family)];
    case 'none':
      return []; // a rule without -j: iptables-nft ends it with the counter alone
  }
}

/** The -p protocol of a rule, if any (at most one). */
export function ruleProto(rule: IptRule): L4Proto | undefined {
  const protos = rule.matches.filter((m) => m.m === 'proto');
  if (protos.length > 1) throw new Error(`rule in ${rule.chain} has more than one -p`);
  return protos[0]?.proto;
}

/** The expressions of one rule, as iptables-nft 1.8.9 sends them. Throws a clear error on bad input. */
export function ruleExprs(rule: IptRule, family: IPFamily, ctx: IptEncodeContext): NftExpr[] {
  const proto = ruleProto(rule);
  // The header matches by rank (one slot each), then the -m matches in rule order.
  const header: (Match | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  for (const m of rule.matches) {
    const rank = headerRank(m);
    if (rank === undefined) continue;
    if (header[rank] !== undefined) throw new Error(`rule in ${rule.chain} repeats -${m.m}`);
    header[rank] = m;
  }
  const out: NftExpr[] = [];
  for (const m of header) if (m !== undefined) for (const e of headerExprs(m, family)) out.push(e);
  for (const m of rule.matches)
    if (headerRank(m) === undefined) for (const e of matchExprs(m, proto, family, ctx)) out.push(e);
  out.push(COUNTER);
  for (const e of targetExprs(rule.target, family)) out.push(e);
  return out;
}

// Every rule's counter is the same zero counter; expressions are only read (encoded, compared).
const COUNTER: NftExpr = Object.freeze({ type: 'counter', bytes: 0n, packets: 0n });

/** The rule as an NftRule for an NftTransaction bound to (ip|ip6, rule.table). */
export function iptNftRule(rule: IptRule, family: IPFamily, ctx: IptEncodeContext): NftRule {
  const proto = ruleProto(rule);
  return {
    kind: 'rule',
    chain: rule.chain,
    exprs: ruleExprs(rule, family, ctx),
    compat: { proto: proto === undefined ? 0 : PROTO_NUMBER[proto], flags: 0 },
  };
}
