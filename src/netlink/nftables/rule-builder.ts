// A rule builder that emits the expression lists nft emits for the same rule text, and
// records that text for NftTransaction.toString(). The proxier writes rules through it:
//
//   rule('ip', 'services').match('ip daddr', '10.96.0.1').match('th dport', 80).goto('svc-x').build()
//     → [ payload load 4b @ network header + 16 => reg 1 ] [ cmp eq reg 1 0x0100600a ] ...
//
// Register use follows nft: a single value goes to reg 1; a concatenation starts at reg 1
// (NFT_REG_1, alias of 32-bit registers 8..11) and continues in the 32-bit registers after
// the words the previous fields used (ip daddr . meta l4proto . th dport → 1, 9, 10).

import type { Family } from './constants.ts';
import { NF_NAT_RANGE_PROTO_RANDOM_FULLY, NF_NAT_RANGE_PROTO_SPECIFIED, NFT_REG32_00 } from './constants.ts';
import type { FieldValue } from './datatypes.ts';
import { encodeField, pad4, parseAddr } from './datatypes.ts';
import type { CmpExpr, NftExpr } from './expr/index.ts';
import { CtState, RTN_LOCAL } from './expr/index.ts';
import { ident } from './message.ts';
import type { NftRule } from './types.ts';
import type { Verdict } from './verdict.ts';
import { renderVerdict } from './verdict.ts';
import { renderDuration } from './element.ts';

export type Field =
  | 'ip saddr'
  | 'ip daddr'
  | 'ip6 saddr'
  | 'ip6 daddr'
  | 'meta l4proto'
  | 'th sport'
  | 'th dport'
  | 'meta mark'
  | 'iifname'
  | 'oifname'
  | 'ct mark'
  | 'meta nfproto'
  | `numgen random mod ${number}`
  | `numgen random mod ${number} offset ${number}`;

interface Loaded {
  exprs: NftExpr[];
  len: number;
  text: string;
  /** The datatype a constant compared with this field is encoded as. */
  type: 'ipv4_addr' | 'ipv6_addr' | 'inet_proto' | 'inet_service' | 'mark' | 'ifname' | 'integer' | 'nf_proto';
  /** nfproto dependency nft adds in inet tables. */
  nfproto?: 2 | 10;
}

function load(f: Field, reg: number): Loaded {
  const payload = (base: 'network' | 'transport', offset: number, len: number): NftExpr => ({
    type: 'payload',
    base,
    offset,
    len,
    dreg: reg,
  });
  switch (f) {
    case 'ip saddr':
      return { exprs: [payload('network', 12, 4)], len: 4, text: f, type: 'ipv4_addr', nfproto: 2 };
    case 'ip daddr':
      return { exprs: [payload('network', 16, 4)], len: 4, text: f, type: 'ipv4_addr', nfproto: 2 };
    case 'ip6 saddr':
      return { exprs: [payload('network', 8, 16)], len: 16, text: f, type: 'ipv6_addr', nfproto: 10 };
    case 'ip6 daddr':
      return { exprs: [payload('network', 24, 16)], len: 16, text: f, type: 'ipv6_addr', nfproto: 10 };
    case 'th sport':
      return { exprs: [payload('transport', 0, 2)], len: 2, text: f, type: 'inet_service' };
    case 'th dport':
      return { exprs: [payload('transport', 2, 2)], len: 2, text: f, type: 'inet_service' };
    case 'meta l4proto':
      return { exprs: [{ type: 'meta', key: 'l4proto', dreg: reg }], len: 1, text: f, type: 'inet_proto' };
    case 'meta mark':
      return { exprs: [{ type: 'meta', key: 'mark', dreg: reg }], len: 4, text: f, type: 'mark' };
    case 'iifname':
    case 'oifname':
      return { exprs: [{ type: 'meta', key: f, dreg: reg }], len: 16, text: f, type: 'ifname' };
    case 'meta nfproto':
      return { exprs: [{ type: 'meta', key: 'nfproto', dreg: reg }], len: 1, text: f, type: 'nf_proto' };
    case 'ct mark':
      return { exprs: [{ type: 'ct', key: 'mark', dreg: reg }], len: 4, text: f, type: 'mark' };
  }
  const m = /^numgen random mod (\d+)(?: offset (\d+))?$/.exec(f);
  if (!m) throw new TypeError(`unknown field ${String(f)}`);
  return {
    exprs: [{ type: 'numgen', mode: 'random', modulus: Number(m[1]), offset: Number(m[2] ?? 0), dreg: reg }],
    len: 4,
    text: f,
    type: 'integer',
  };
}

/**
 * The register that starts `words` 32-bit words after reg 1, numbered as nft numbers it: a
 * 16-byte-aligned position by its 128-bit register (NFT_REG_2 ...), any other by its 32-bit
 * one (NFT_REG32_01 ...). Both name the same storage; nft prefers the old numbers "for
 * compatibility", and we send the bytes nft sends.
 */
export function registerAt(words: number): number {
  return words % 4 === 0 ? 1 + words / 4 : NFT_REG32_00 + words;
}

const u32be = (n: number): Uint8Array =>
  Uint8Array.of((n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
const u32le = (n: number): Uint8Array =>
  Uint8Array.of(n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff);
const hex32 = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

export type RejectWith =
  | 'icmp port-unreachable'
  | 'icmpv6 port-unreachable'
  | 'icmpx port-unreachable'
  | 'tcp reset'
  | 'icmp host-unreachable';

export class RuleBuilder {
  private readonly family: Family;
  private readonly chain: string;
  private readonly exprs: NftExpr[] = [];
  private readonly words: string[] = [];
  private nfproto: number | undefined;
  private commentText: string | undefined;
  private error: Error | undefined;

  constructor(family: Family, chain: string) {
    this.family = family;
    this.chain = chain;
  }

  private dep(l: Loaded): void {
    if (this.family !== 'inet' || l.nfproto === undefined || this.nfproto === l.nfproto) return;
    this.nfproto = l.nfproto;
    this.exprs.push(
      { type: 'meta', key: 'nfproto', dreg: 1 },
      { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(l.nfproto) },
    );
  }

  private guard(fn: () => void): this {
    if (this.error) return this;
    try {
      fn();
    } catch (e) {
      this.error = e as Error;
    }
    return this;
  }

  /** Loads fields as nft does for a concatenation and returns the text "a . b . c". */
  private loadConcat(fields: readonly Field[]): string {
    let reg = 1;
    let words = 0;
    const loaded = fields.map((f) => {
      const l = load(f, reg);
      words += pad4(l.len) / 4;
      reg = registerAt(words);
      return l;
    });
    for (const l of loaded) this.dep(l);
    for (const l of loaded) this.exprs.push(...l.exprs);
    return loaded.map((l) => l.text).join(' . ');
  }

  /** `FIELD [!=] VALUE`; an address value may be a CIDR (masked compare, as nft does). */
  match(field: Field, value: FieldValue, op: CmpExpr['op'] = 'eq'): this {
    return this.guard(() => {
      const l = load(field, 1);
      this.dep(l);
      this.exprs.push(...l.exprs);
      let text = String(value);
      if (typeof value === 'string' && value.includes('/') && (l.type === 'ipv4_addr' || l.type === 'ipv6_addr')) {
        const [addr, plen] = value.split('/') as [string, string];
        const bytes = parseAddr(addr);
        const prefix = Number(plen);
        if (!bytes || !(prefix >= 0 && prefix <= bytes.length * 8)) throw new TypeError(`${value} is not a CIDR`);
        const mask = new Uint8Array(bytes.length);
        for (let i = 0; i < mask.length; i++) mask[i] = (0xff << (8 - Math.max(0, Math.min(8, prefix - i * 8)))) & 0xff;
        const net = bytes.map((b, i) => b & mask[i]!);
        const load = this.exprs.at(-1);
        if (prefix % 8 === 0 && prefix > 0 && load?.type === 'payload') {
          // As nft does: a byte-aligned prefix loads only its bytes and compares them.
          load.len = prefix / 8;
          this.exprs.push({ type: 'cmp', sreg: 1, op, data: net.subarray(0, prefix / 8) });
        } else {
          this.exprs.push({
            type: 'bitwise',
            sreg: 1,
            dreg: 1,
            len: bytes.length,
            mask,
            xor: new Uint8Array(bytes.length),
          });
          this.exprs.push({ type: 'cmp', sreg: 1, op, data: net });
        }
      } else if (l.type === 'ifname' && typeof value === 'string' && value.endsWith('*')) {
        // nft's wildcard: "veth*" compares only the prefix's bytes (no NUL), as nft compiles it.
        const prefix = Buffer.from(value.slice(0, -1), 'utf8');
        if (prefix.length === 0 || prefix.length >= 16)
          throw new TypeError(`${value}: an interface-name prefix has 1 to 15 bytes`);
        this.exprs.push({ type: 'cmp', sreg: 1, op, data: new Uint8Array(prefix) });
        text = `"${value}"`;
      } else {
        this.exprs.push({ type: 'cmp', sreg: 1, op, data: encodeField(l.type, value) });
        if (l.type === 'ifname') text = `"${String(value)}"`;
        if (l.type === 'mark') text = hex32(Number(value));
      }
      this.words.push(`${l.text} ${op === 'eq' ? '' : `${OPS[op]} `}${text}`);
    });
  }

  /** `ct state new,established`: (ct state & bits) != 0, as nft compiles a flag list. */
  ctState(states: readonly (keyof typeof CtState)[]): this {
    return this.guard(() => {
      const bits = states.reduce((a, s) => a | CtState[s], 0);
      this.exprs.push(
        { type: 'ct', key: 'state', dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: u32le(bits), xor: new Uint8Array(4) },
        { type: 'cmp', sreg: 1, op: 'neq', data: new Uint8Array(4) },
      );
      this.words.push(`ct state ${states.join(',')}`);
    });
  }

  /** `ct direction original|reply`. */
  ctDirection(direction: 'original' | 'reply'): this {
    return this.guard(() => {
      this.exprs.push(
        { type: 'ct', key: 'direction', dreg: 1 },
        { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(direction === 'original' ? 0 : 1) },
      );
      this.words.push(`ct direction ${direction}`);
    });
  }

  /** `fib daddr|saddr type [!=] local`. */
  fibLocal(which: 'daddr' | 'saddr', negate = false): this {
    return this.guard(() => {
      this.exprs.push(
        { type: 'fib', result: 'type', flags: [which], dreg: 1 },
        { type: 'cmp', sreg: 1, op: negate ? 'neq' : 'eq', data: u32le(RTN_LOCAL) },
      );
      this.words.push(`fib ${which} type ${negate ? '!= ' : ''}local`);
    });
  }
  fibDaddrLocal(negate = false): this {
    return this.fibLocal('daddr', negate);
  }
  fibSaddrLocal(negate = false): this {
    return this.fibLocal('saddr', negate);
  }

  /** `meta mark & MASK [!=|==] VALUE`. */
  markAnd(mask: number, value: number, op: 'eq' | 'neq' = 'eq'): this {
    return this.guard(() => {
      this.exprs.push(
        { type: 'meta', key: 'mark', dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: 4, mask: u32le(mask), xor: new Uint8Array(4) },
        { type: 'cmp', sreg: 1, op, data: u32le(value) },
      );
      this.words.push(`meta mark & ${hex32(mask)} ${op === 'eq' ? '==' : '!='} ${hex32(value)}`);
    });
  }

  /** `meta mark set meta mark | BITS`. */
  setMarkOr(bits: number): this {
    return this.guard(() => {
      this.exprs.push(
        { type: 'meta', key: 'mark', dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: 4, mask: u32le(~bits >>> 0), xor: u32le(bits) },
        { type: 'meta', key: 'mark', sreg: 1 },
      );
      this.words.push(`meta mark set meta mark | ${hex32(bits)}`);
    });
  }

  /** `meta mark set meta mark & ~BITS` (clears bits, e.g. the masquerade mark once acted on). */
  clearMark(bits: number): this {
    return this.guard(() => {
      const mask = ~bits >>> 0;
      this.exprs.push(
        { type: 'meta', key: 'mark', dreg: 1 },
        { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: 4, mask: u32le(mask), xor: new Uint8Array(4) },
        { type: 'meta', key: 'mark', sreg: 1 },
      );
      this.words.push(`meta mark set meta mark & ${hex32(mask)}`);
    });
  }

  /** `FIELDS [!=] @set`. */
  inSet(fields: readonly Field[], set: string, negate = false): this {
    return this.guard(() => {
      const text = this.loadConcat(fields);
      this.exprs.push(negate ? { type: 'lookup', set, sreg: 1, invert: true } : { type: 'lookup', set, sreg: 1 });
      this.words.push(`${text} ${negate ? '!= ' : ''}@${ident(set)}`);
    });
  }

  /** `FIELDS vmap @map`: the verdict comes from a verdict map. */
  vmap(fields: readonly Field[], map: string): this {
    return this.guard(() => {
      const text = this.loadConcat(fields);
      this.exprs.push({ type: 'lookup', set: map, sreg: 1, dreg: 0 });
      this.words.push(`${text} vmap @${ident(map)}`);
    });
  }

  /** `update @set { FIELDS [timeout T] }` (session affinity). */
  update(set: string, fields: readonly Field[], timeoutMs?: number): this {
    return this.guard(() => {
      const text = this.loadConcat(fields);
      const e: NftExpr = { type: 'dynset', set, op: 'update', sregKey: 1 };
      if (timeoutMs !== undefined) e.timeoutMs = BigInt(timeoutMs);
      this.exprs.push(e);
      this.words.push(
        `update @${ident(set)} { ${text}${timeoutMs !== undefined ? ` timeout ${renderDuration(timeoutMs)}` : ''} }`,
      );
    });
  }

  counter(): this {
    this.exprs.push({ type: 'counter' });
    this.words.push('counter');
    return this;
  }

  notrack(): this {
    this.exprs.push({ type: 'notrack' });
    this.words.push('notrack');
    return this;
  }

  log(prefix: string): this {
    this.exprs.push({ type: 'log', prefix });
    this.words.push(`log prefix "${prefix}"`);
    return this;
  }

  /** `limit rate N/second burst B packets`. */
  limit(perSecond: number, burst = 5): this {
    this.exprs.push({ type: 'limit', rate: BigInt(perSecond), unit: 1n, burst, kind: 'packets' });
    this.words.push(`limit rate ${perSecond}/second${burst !== 5 ? ` burst ${burst} packets` : ''}`);
    return this;
  }

  verdict(v: Verdict): this {
    this.exprs.push({ type: 'immediate', verdict: v });
    this.words.push(renderVerdict(v));
    return this;
  }
  accept(): this {
    return this.verdict({ verdict: 'accept' });
  }
  drop(): this {
    return this.verdict({ verdict: 'drop' });
  }
  return(): this {
    return this.verdict({ verdict: 'return' });
  }
  continue(): this {
    return this.verdict({ verdict: 'continue' });
  }
  jump(chain: string): this {
    return this.verdict({ verdict: 'jump', chain });
  }
  goto(chain: string): this {
    return this.verdict({ verdict: 'goto', chain });
  }

  masquerade(opts: { fullyRandom?: boolean } = {}): this {
    this.exprs.push(opts.fullyRandom ? { type: 'masq', flags: NF_NAT_RANGE_PROTO_RANDOM_FULLY } : { type: 'masq' });
    this.words.push(`masquerade${opts.fullyRandom ? ' fully-random' : ''}`);
    return this;
  }

  private natTo(kind: 'dnat' | 'snat', addr: string, port?: number): this {
    return this.guard(() => {
      const bytes = parseAddr(addr);
      if (!bytes) throw new TypeError(`${addr} is not an IP address`);
      const fam = bytes.length === 4 ? 'ip' : 'ip6';
      this.exprs.push({ type: 'immediate', dreg: 1, data: bytes });
      if (port !== undefined) this.exprs.push({ type: 'immediate', dreg: 2, data: encodeField('inet_service', port) });
      this.exprs.push(
        port !== undefined
          ? { type: 'nat', nat: kind, family: fam, regAddrMin: 1, regProtoMin: 2, flags: NF_NAT_RANGE_PROTO_SPECIFIED }
          : { type: 'nat', nat: kind, family: fam, regAddrMin: 1 },
      );
      const a = fam === 'ip6' && port !== undefined ? `[${addr}]` : addr;
      this.words.push(
        `${kind}${this.family === 'inet' ? ` ${fam}` : ''} to ${a}${port !== undefined ? `:${port}` : ''}`,
      );
    });
  }
  dnat(addr: string, port?: number): this {
    return this.natTo('dnat', addr, port);
  }
  snat(addr: string, port?: number): this {
    return this.natTo('snat', addr, port);
  }

  /** Looks reg 1 up in `map`, whose data (address . port) lands in reg 1 onwards, and DNATs to it. */
  private dnatThroughMap(map: string, natFamily: 'ip' | 'ip6'): void {
    const addrWords = natFamily === 'ip' ? 1 : 4;
    this.exprs.push({ type: 'lookup', set: map, sreg: 1, dreg: 1 });
    this.exprs.push({ type: 'nat', nat: 'dnat', family: natFamily, regAddrMin: 1, regProtoMin: registerAt(addrWords) });
  }

  /** `dnat [ip|ip6] to FIELDS map @map` where the map yields address . port. */
  dnatMap(fields: readonly Field[], map: string, natFamily: 'ip' | 'ip6' = this.family === 'ip6' ? 'ip6' : 'ip'): this {
    return this.guard(() => {
      const text = this.loadConcat(fields);
      this.dnatThroughMap(map, natFamily);
      this.words.push(`dnat${this.family === 'inet' ? ` ${natFamily}` : ''} to ${text} map @${ident(map)}`);
    });
  }

  /**
   * `dnat [ip|ip6] to numgen random mod N [offset K] map @map`: pick one of N slots at random
   * and DNAT to the address . port the map holds for it (a map keyed `typeof numgen ...` with
   * data `ipv4_addr . inet_service`, or ipv6_addr for ip6).
   */
  dnatNumgen(
    modulus: number,
    offset: number,
    map: string,
    natFamily: 'ip' | 'ip6' = this.family === 'ip6' ? 'ip6' : 'ip',
  ): this {
    return this.guard(() => {
      if (!Number.isInteger(modulus) || modulus < 1)
        throw new TypeError(`numgen modulus ${modulus} must be a positive integer`);
      this.exprs.push({ type: 'numgen', mode: 'random', modulus, offset, dreg: 1 });
      this.dnatThroughMap(map, natFamily);
      this.words.push(
        `dnat ${natFamily} to numgen random mod ${modulus}${offset ? ` offset ${offset}` : ''} map @${ident(map)}`,
      );
    });
  }

  /**
   * `dnat [ip|ip6] to numgen inc mod N map @map`: round robin. The counter belongs to this
   * rule (nft_ng_inc_eval), so each rule that carries it spreads its own connections evenly.
   */
  dnatRoundRobin(modulus: number, map: string, natFamily: 'ip' | 'ip6' = this.family === 'ip6' ? 'ip6' : 'ip'): this {
    return this.guard(() => {
      if (!Number.isInteger(modulus) || modulus < 1)
        throw new TypeError(`numgen modulus ${modulus} must be a positive integer`);
      this.exprs.push({ type: 'numgen', mode: 'inc', modulus, offset: 0, dreg: 1 });
      this.dnatThroughMap(map, natFamily);
      this.words.push(`dnat ${natFamily} to numgen inc mod ${modulus} map @${ident(map)}`);
    });
  }

  /**
   * `dnat [ip|ip6] to jhash ip saddr mod M seed S map @map`: the bucket of the client's
   * address in a table of M buckets (consistent hashing). The seed is always sent: without it
   * the kernel picks a random one and two nodes would disagree.
   */
  dnatHashSource(
    modulus: number,
    seed: number,
    map: string,
    natFamily: 'ip' | 'ip6' = this.family === 'ip6' ? 'ip6' : 'ip',
  ): this {
    return this.guard(() => {
      if (!Number.isInteger(modulus) || modulus < 1)
        throw new TypeError(`hash modulus ${modulus} must be a positive integer`);
      // As nft: the address into a register of its own (NFT_REG_2), its hash into reg 1.
      const src = load(natFamily === 'ip' ? 'ip saddr' : 'ip6 saddr', 2);
      this.dep(src);
      this.exprs.push(...src.exprs);
      this.exprs.push({ type: 'hash', hash: 'jhash', sreg: 2, dreg: 1, len: src.len, modulus, seed, offset: 0 });
      this.dnatThroughMap(map, natFamily);
      this.words.push(`dnat ${natFamily} to jhash ${src.text} mod ${modulus} seed ${hex32(seed)} map @${ident(map)}`);
    });
  }

  reject(how: RejectWith = 'icmp port-unreachable'): this {
    const table: Record<RejectWith, NftExpr> = {
      'icmp port-unreachable': { type: 'reject', reject: 'icmp', code: 3 },
      'icmp host-unreachable': { type: 'reject', reject: 'icmp', code: 1 },
      'icmpv6 port-unreachable': { type: 'reject', reject: 'icmp', code: 4 },
      'icmpx port-unreachable': { type: 'reject', reject: 'icmpx', code: 1 },
      'tcp reset': { type: 'reject', reject: 'tcp-reset', code: 0 },
    };
    this.exprs.push(table[how]);
    this.words.push(
      how === 'tcp reset' ? 'reject with tcp reset' : `reject with ${how.split(' ')[0]!} type ${how.split(' ')[1]!}`,
    );
    return this;
  }

  /** Appends expressions the builder has no method for, with their nft text (for toString()). */
  raw(exprs: readonly NftExpr[], text: string): this {
    this.exprs.push(...exprs);
    if (text) this.words.push(text);
    return this;
  }

  comment(text: string): this {
    this.commentText = text;
    return this;
  }

  /** The rule; an invalid step (bad address, unknown field) is thrown here. */
  build(): NftRule {
    if (this.error) throw this.error;
    const r: NftRule = { kind: 'rule', chain: this.chain, exprs: [...this.exprs], text: this.words.join(' ') };
    if (this.commentText !== undefined) r.comment = this.commentText;
    return r;
  }
}

const OPS: Record<CmpExpr['op'], string> = { eq: '==', neq: '!=', lt: '<', lte: '<=', gt: '>', gte: '>=' };

export const rule = (family: Family, chain: string): RuleBuilder => new RuleBuilder(family, chain);
/** Byte helpers for callers building raw compare data (marks are host order, addresses network order). */
export { u32be, u32le };
