// The companion rules (rules.ts) as nf_tables expressions, in the form iptables-nft 1.8.9 emits
// them (checked against `nft --debug=netlink` of rules iptables-nft-restore loaded in the VM:
// test/vm/scenarios/ipvs-proxier-companion.capture.txt):
//   -s/-i/-p      native: payload/meta load + cmp (first, in that order)
//   -m mark       native: meta mark, bitwise mask, cmp eq/neq
//   other -m      nft_compat xt matches in rule order (set v4, comment v0, addrtype v1, physdev v0,
//                 conntrack v3, ipvs v0), infos from netlink/nftables/expr/xt-info.ts
//   counter       always, right before the verdict/target (as iptables-nft)
//   -j verdict    native immediate (accept, drop, return, jump)
//   -j MARK/MASQUERADE/REJECT  xt targets
//
// Not yet sent anywhere: the nftables layer's NftExpr union does not include the xt `match` and
// `target` expressions (xt-match.ts / xt-target.ts wait to be registered), and the writer (create
// ip nat/filter with iptables-nft's base chains when missing, flush and refill our KUBE-* chains,
// insert the jump rules once, NFTA_RULE_COMPAT) is still to be written.

import { parseCIDR, parseIP } from '../../base/ip.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { NftExpr } from '../../netlink/nftables/index.ts';
import {
  XT_ADDRTYPE_LOCAL,
  addrtypeMatch,
  commentMatch,
  ctstateMatch,
  ipvsMatch,
  markTarget,
  masqueradeTarget,
  physdevNotIsInMatch,
  rejectTarget,
  setMatch,
} from '../../netlink/nftables/expr/xt-info.ts';
import type { IptRule, Match } from './rules.ts';

/** The expressions of a companion rule: native ones and the xtables-compat match/target. */
export type CompatExpr = NftExpr;

const PROTO: Readonly<Record<string, number>> = { tcp: 6, udp: 17, sctp: 132 };
const u32le = (n: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0, true);
  return b;
};

/** `-s CIDR`: load as many bytes as the prefix covers whole, mask the rest (iptables-nft's add_addr). */
function srcMatch(cidr: string, invert: boolean, family: IPFamily): NftExpr[] {
  const c = parseCIDR(cidr);
  if (!c || c.family !== family) throw new Error(`rule source ${cidr} is not an ${family} CIDR`);
  const offset = family === 'IPv4' ? 12 : 8;
  const len = Math.ceil(c.prefix / 8);
  const out: NftExpr[] = [{ type: 'payload', base: 'network', offset, len, dreg: 1 }];
  if (c.prefix % 8 !== 0) {
    const mask = new Uint8Array(len);
    for (let i = 0; i < len; i++) mask[i] = i < len - 1 ? 0xff : (0xff << (8 - (c.prefix % 8))) & 0xff;
    out.push({ type: 'bitwise', sreg: 1, dreg: 1, len, mask, xor: new Uint8Array(len) });
  }
  out.push({ type: 'cmp', sreg: 1, op: invert ? 'neq' : 'eq', data: c.addr.bytes.slice(0, len) });
  return out;
}

function ifaceMatch(name: string, invert: boolean): NftExpr[] {
  const wildcard = name.endsWith('+');
  const base = wildcard ? name.slice(0, -1) : name;
  const data = new Uint8Array(wildcard ? base.length : 16);
  data.set(new TextEncoder().encode(base));
  return [
    { type: 'meta', key: 'iifname', dreg: 1 },
    { type: 'cmp', sreg: 1, op: invert ? 'neq' : 'eq', data },
  ];
}

/** The expressions of one rule. `setIndex` gives an ipset's kernel index (IpsetClient.getByName). */
export function ruleExprs(r: IptRule, family: IPFamily, setIndex: (name: string) => number): CompatExpr[] {
  const head: CompatExpr[] = [];
  const body: CompatExpr[] = [];
  const ordered = (m: Match): number => (m.m === 'src' ? 0 : m.m === 'inIface' ? 1 : m.m === 'proto' ? 2 : 3);
  for (const m of [...r.matches].sort((a, b) => ordered(a) - ordered(b))) {
    switch (m.m) {
      case 'src':
        head.push(...srcMatch(m.cidr, m.invert ?? false, family));
        break;
      case 'inIface':
        head.push(...ifaceMatch(m.name, m.invert ?? false));
        break;
      case 'proto':
        head.push({ type: 'meta', key: 'l4proto', dreg: 1 }, { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(PROTO[m.proto]!) });
        break;
      case 'comment':
        body.push(commentMatch(m.text));
        break;
      case 'set':
        body.push(setMatch(setIndex(m.set), m.dirs));
        break;
      case 'addrtype':
        body.push(addrtypeMatch(m.dir, XT_ADDRTYPE_LOCAL, m.invert ?? false));
        break;
      case 'mark':
        body.push(
          { type: 'meta', key: 'mark', dreg: 1 },
          { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: u32le(m.mask), xor: u32le(0) },
          { type: 'cmp', sreg: 1, op: m.invert ? 'neq' : 'eq', data: u32le(m.value) },
        );
        break;
      case 'ctstate':
        body.push(ctstateMatch(m.states));
        break;
      case 'physdevNotIsIn':
        body.push(physdevNotIsInMatch());
        break;
      case 'ipvs': {
        const ip = parseIP(m.vaddr);
        if (!ip) throw new Error(`ipvs match: bad address ${m.vaddr}`);
        const addr = new Uint8Array(16);
        addr.set(ip.bytes);
        body.push(ipvsMatch(addr, PROTO[m.vproto] ?? 0, m.vport));
        break;
      }
    }
  }
  const out: CompatExpr[] = [...head, ...body, { type: 'counter' }];
  const t = r.target;
  switch (t.t) {
    case 'jump':
      out.push({ type: 'immediate', verdict: { verdict: 'jump', chain: t.chain } });
      break;
    case 'ACCEPT':
    case 'DROP':
    case 'RETURN':
      out.push({ type: 'immediate', verdict: { verdict: t.t === 'ACCEPT' ? 'accept' : t.t === 'DROP' ? 'drop' : 'return' } });
      break;
    case 'REJECT':
      out.push(rejectTarget(family));
      break;
    case 'MARK':
      out.push(markTarget(t.value, t.op === 'or' ? t.value : 0));
      break;
    case 'MASQUERADE':
      out.push(masqueradeTarget(t.randomFully, family));
      break;
  }
  return out;
}
