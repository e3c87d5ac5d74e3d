// A packet tracer over FakeNft's typed rules, for unit tests of the nftables proxier (as upstream's
// pkg/proxy/nftables/helpers_test.go traces packets through knftables' fake): "a TCP packet from A
// to B:p arriving on eth0 ends at endpoint E, masqueraded". It interprets the expressions at the
// register level, as the kernel does (nft_do_chain): payload reads real header bytes, lookups encode
// the set's elements with the same datatypes the client sends, numgen forks the trace over every
// value it can take. An expression or key it does not model throws, naming it: a trace never
// passes by ignoring a rule.
//
// The hooks a packet passes, as netfilter runs them (base chains in priority order):
//   from elsewhere: prerouting, then (routing on the address after DNAT) input, or forward + postrouting
//   from the node:  output, postrouting, and for itself again prerouting + input
// nat chains see only a connection's first packet (ct state new), as in the kernel.

import type { FakeNft } from '../../src/netlink/nftables/fake/index.ts';
import {
  concatFields,
  CtState,
  decodeField,
  encodeField,
  isVerdict,
  keyLength,
  parseAddr,
  PROTOCOLS,
  RTN_LOCAL,
  splitFields,
} from '../../src/netlink/nftables/index.ts';
import type {
  FieldValue,
  Hook,
  KeyField,
  NftExpr,
  NftRule,
  NftSetLike,
  Verdict,
} from '../../src/netlink/nftables/index.ts';
import { cmpBytes, fieldBounds } from '../../src/netlink/nftables/element-encode.ts';

export interface TracePacket {
  protocol: 'tcp' | 'udp' | 'sctp';
  saddr: string;
  daddr: string;
  dport: number;
  sport?: number;
  /** 'remote' (default): arrives on `iif` from elsewhere; 'local': sent by a process on the node. */
  from?: 'remote' | 'local';
  /** Interface a remote packet arrives on (default eth0). */
  iif?: string;
  /** Connection tracking state of the packet (default new: the connection's first packet). */
  ct?: 'new' | 'established' | 'related';
  mark?: number;
}

export type TraceVerdict = 'accept' | 'drop' | 'reject';

/** One way through the ruleset (one value of each numgen on the way). */
export interface TracePath {
  verdict: TraceVerdict;
  /** DNAT destination, "ip:port" ("[ip6]:port" for IPv6). */
  dnat?: string;
  masquerade: boolean;
  /** After routing (on the DNATed address): delivered to the node, forwarded, or sent by it. */
  route?: 'input' | 'forward' | 'output';
  /** Every rule that decided something, "chain: rule text", for failure messages. */
  rules: string[];
  /** Elements the packet added to sets (dynset: session affinity). */
  learned: { set: string; key: Uint8Array }[];
}

/** What every path agrees on; `endpoints` is every DNAT destination some path reaches. */
export interface Trace {
  verdict: TraceVerdict;
  endpoints: string[];
  masquerade: boolean;
  route?: TracePath['route'];
  paths: TracePath[];
}

export interface TracerOptions {
  /** The node's addresses (fib type local); loopback is always local. */
  localAddresses: readonly string[];
}

const MAX_PATHS = 4096;
const MAX_STEPS = 10_000;

/** A numgen met beyond the choices made so far: the driver retries with each value appended. */
class Fork {
  readonly values: number[];
  constructor(values: number[]) {
    this.values = values;
  }
}

/** The registers: NFT_REG_1..4 (16 bytes each) overlaid by NFT_REG32_00..15, after the verdict. */
class Registers {
  private readonly b = new Uint8Array(16 + 64);
  private static at(reg: number, len: number): number {
    if (reg === 0) throw new Error('the verdict register holds no data');
    const off = reg <= 4 ? reg * 16 : (reg - 8) * 4 + 16;
    if (reg > 23 || (reg > 4 && reg < 8) || off + len > 80)
      throw new Error(`register ${reg} (+${len} bytes) is out of range`);
    return off;
  }
  read(reg: number, len: number): Uint8Array {
    const off = Registers.at(reg, len);
    return this.b.slice(off, off + len);
  }
  write(reg: number, data: Uint8Array): void {
    const off = Registers.at(reg, data.length);
    // The kernel zeroes the last 32-bit word a short value lands in (nft_reg_store8/16).
    this.b.fill(0, off, off + Math.ceil(data.length / 4) * 4);
    this.b.set(data, off);
  }
}

const u32host = (n: number): Uint8Array => encodeField('integer', n >>> 0);
const hostU32 = (b: Uint8Array): number => new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true);

interface Headers {
  family: 'ip' | 'ip6';
  network: Uint8Array;
  transport: Uint8Array;
}

function headers(p: TracePacket, daddr: string, dport: number): Headers {
  const src = parseAddr(p.saddr);
  const dst = parseAddr(daddr);
  if (!src || !dst) throw new TypeError(`trace: ${!src ? p.saddr : daddr} is not an IP address`);
  if (src.length !== dst.length) throw new TypeError(`trace: ${p.saddr} and ${daddr} are of different families`);
  const proto = PROTOCOLS[p.protocol];
  const v4 = src.length === 4;
  const network = new Uint8Array(v4 ? 20 : 40);
  if (v4) {
    network[0] = 0x45;
    network[9] = proto;
    network.set(src, 12);
    network.set(dst, 16);
  } else {
    network[0] = 0x60;
    network[6] = proto;
    network.set(src, 8);
    network.set(dst, 24);
  }
  const sport = p.sport ?? 40000;
  const transport = Uint8Array.of(sport >> 8, sport & 255, dport >> 8, dport & 255, 0, 0, 0, 0);
  return { family: v4 ? 'ip' : 'ip6', network, transport };
}

/** One run of the ruleset with fixed numgen choices. */
class Run {
  readonly rules: string[] = [];
  readonly learned: { set: string; key: Uint8Array }[] = [];
  dnat: { addr: Uint8Array; port: number | undefined } | undefined;
  masquerade = false;
  /** The connection's NAT is decided (nat chains see only its first pass). */
  private natDone = false;
  mark: number;
  private numgens = 0;
  private steps = 0;
  private regs = new Registers();
  private h: Headers;

  private readonly tracer: NftTracer;
  private readonly p: TracePacket;
  private readonly choices: readonly number[];

  constructor(tracer: NftTracer, p: TracePacket, choices: readonly number[]) {
    this.tracer = tracer;
    this.p = p;
    this.choices = choices;
    this.mark = p.mark ?? 0;
    this.h = headers(p, p.daddr, p.dport);
  }

  /** Runs the packet through every hook it passes; the final verdict. */
  go(): { verdict: TraceVerdict; route: TracePath['route'] } {
    const local = (this.p.from ?? 'remote') === 'local';
    const first: Hook = local ? 'output' : 'prerouting';
    const v = this.hook(first);
    if (v !== 'accept') return { verdict: v, route: undefined };
    const toNode = this.tracer.isLocal(this.currentDaddr());
    // A packet the node sends to itself leaves through postrouting and comes back in through
    // prerouting and input; its connection is NATed already, so nat chains are not run again.
    const rest: Hook[] = local
      ? toNode
        ? ['postrouting', 'prerouting', 'input']
        : ['postrouting']
      : toNode
        ? ['input']
        : ['forward', 'postrouting'];
    const route = toNode ? 'input' : local ? 'output' : 'forward';
    for (const hook of rest) {
      if (hook === 'prerouting') this.natDone = true;
      const r = this.hook(hook);
      if (r !== 'accept') return { verdict: r, route };
    }
    return { verdict: 'accept', route };
  }

  private currentDaddr(): Uint8Array {
    return this.h.family === 'ip' ? this.h.network.slice(16, 20) : this.h.network.slice(24, 40);
  }

  private hook(hook: Hook): TraceVerdict {
    for (const chain of this.tracer.baseChains(hook)) {
      if (chain.type === 'nat' && (this.natDone || (this.p.ct ?? 'new') !== 'new')) continue;
      const v = this.chain(chain.name, chain.policy);
      if (v !== 'accept') return v;
      // DNAT rewrites the packet for the chains and hooks after this one.
      if (chain.type === 'nat' && this.dnat && hook !== 'postrouting') this.applyDnat();
    }
    return 'accept';
  }

  private applyDnat(): void {
    const d = this.dnat!;
    const dport = d.port ?? this.p.dport;
    const text = decodeField(d.addr.length === 4 ? 'ipv4_addr' : 'ipv6_addr', d.addr);
    this.h = headers(this.p, String(text), dport);
  }

  /** Runs a base chain with its jumps and gotos; accept, drop or reject. */
  private chain(base: string, policy: 'accept' | 'drop'): TraceVerdict {
    const stack: { chain: string; next: number }[] = [];
    let at = { chain: base, next: 0 };
    for (;;) {
      const rules = this.tracer.rulesOf(at.chain);
      if (at.next >= rules.length) {
        const back = stack.pop();
        if (!back) return policy;
        at = back;
        continue;
      }
      const r = rules[at.next++]!;
      if (++this.steps > MAX_STEPS) throw new Error(`trace: more than ${MAX_STEPS} rules evaluated (a loop?)`);
      const v = this.rule(r);
      if (v === undefined || v.verdict === 'continue') continue;
      this.rules.push(`${at.chain}: ${r.text ?? JSON.stringify(r.exprs)}`);
      if (v.reject) return 'reject';
      switch (v.verdict) {
        case 'accept':
          return 'accept';
        case 'drop':
          return 'drop';
        case 'return': {
          const back = stack.pop();
          if (!back) return policy;
          at = back;
          break;
        }
        case 'jump':
          if (stack.length >= 16) throw new Error(`trace: jump depth over 16 at ${v.chain}`);
          stack.push(at);
          at = { chain: v.chain, next: 0 };
          break;
        case 'goto':
          at = { chain: v.chain, next: 0 };
          break;
        case 'break':
          break;
      }
    }
  }

  /** A rule's expressions in order; undefined when one of them does not match (NFT_BREAK). */
  private rule(r: NftRule): (Verdict & { reject?: true }) | undefined {
    for (const e of r.exprs) {
      const out = this.expr(e, r);
      if (out === 'break') return undefined;
      if (out !== undefined) return out;
    }
    return { verdict: 'continue' };
  }

  private expr(e: NftExpr, r: NftRule): 'break' | (Verdict & { reject?: true }) | undefined {
    switch (e.type) {
      case 'payload':
        return this.payload(e);
      case 'meta':
        return this.meta(e);
      case 'cmp': {
        const c = cmpBytes(this.regs.read(e.sreg, e.data.length), e.data);
        const ok = { eq: c === 0, neq: c !== 0, lt: c < 0, lte: c <= 0, gt: c > 0, gte: c >= 0 }[e.op];
        return ok ? undefined : 'break';
      }
      case 'bitwise': {
        if ((e.op ?? 'bool') !== 'bool' || !e.mask || !e.xor) throw new Error(`trace: bitwise ${e.op} is not modelled`);
        const v = this.regs.read(e.sreg, e.len);
        this.regs.write(
          e.dreg,
          v.map((x, i) => (x & e.mask![i]!) ^ e.xor![i]!),
        );
        return undefined;
      }
      case 'immediate':
        if ('verdict' in e) return e.verdict;
        this.regs.write(e.dreg, e.data);
        return undefined;
      case 'lookup':
        return this.lookup(e.set, e.sreg, e.dreg, e.invert ?? false);
      // Round robin and hashing fork like random: the trace answers where a connection can end.
      case 'hash':
      case 'numgen': {
        const i = this.numgens++;
        const offset = e.offset ?? 0;
        if (i >= this.choices.length) throw new Fork(Array.from({ length: e.modulus }, (_, k) => k + offset));
        this.regs.write(e.dreg, u32host(this.choices[i]!));
        return undefined;
      }
      case 'ct':
        if (e.key !== 'state' || e.dreg === undefined) throw new Error(`trace: ct ${e.key} is not modelled`);
        this.regs.write(e.dreg, u32host(CtState[this.p.ct ?? 'new']));
        return undefined;
      case 'fib': {
        const which = e.flags.filter((f) => f === 'saddr' || f === 'daddr');
        if (e.result !== 'type' || which.length !== 1 || e.flags.length !== 1)
          throw new Error(`trace: fib ${e.flags.join(' ')} ${e.result} is not modelled`);
        const n = this.h.network;
        const v4 = this.h.family === 'ip';
        const addr = which[0] === 'saddr' ? n.slice(v4 ? 12 : 8, v4 ? 16 : 24) : this.currentDaddr();
        this.regs.write(e.dreg, u32host(this.tracer.isLocal(addr) ? RTN_LOCAL : 1));
        return undefined;
      }
      case 'nat': {
        if (e.nat !== 'dnat' || e.regAddrMin === undefined)
          throw new Error(`trace: nat ${e.nat} without an address register is not modelled`);
        if (e.regAddrMax !== undefined || e.regProtoMax !== undefined)
          throw new Error('trace: nat ranges are not modelled');
        const addr = this.regs.read(e.regAddrMin, e.family === 'ip' ? 4 : 16);
        const port =
          e.regProtoMin === undefined ? undefined : decodeField('inet_service', this.regs.read(e.regProtoMin, 2));
        this.dnat = { addr, port: port as number | undefined };
        return { verdict: 'accept' };
      }
      case 'masq':
        this.masquerade = true;
        return { verdict: 'accept' };
      case 'reject':
        return { verdict: 'drop', reject: true };
      case 'dynset': {
        if (e.op === 'delete' || e.sregData !== undefined) throw new Error(`trace: dynset ${e.op} is not modelled`);
        const set = this.tracer.setOf(e.set);
        this.learned.push({ set: e.set, key: this.regs.read(e.sregKey, keyLength(set.def.key)) });
        return undefined;
      }
      case 'counter':
      case 'log':
        return undefined;
      default:
        throw new Error(`trace: expression ${e.type === 'unknown' ? e.name : e.type} is not modelled (in ${r.chain})`);
    }
  }

  private payload(e: Extract<NftExpr, { type: 'payload' }>): undefined {
    if (e.dreg === undefined) throw new Error('trace: payload writes are not modelled');
    const src = e.base === 'network' ? this.h.network : e.base === 'transport' ? this.h.transport : undefined;
    if (!src) throw new Error(`trace: payload base ${e.base} is not modelled`);
    if (e.offset + e.len > src.length)
      throw new Error(`trace: payload ${e.base} ${e.offset}+${e.len} is past the header`);
    this.regs.write(e.dreg, src.slice(e.offset, e.offset + e.len));
    return undefined;
  }

  private meta(e: Extract<NftExpr, { type: 'meta' }>): undefined {
    if (e.sreg !== undefined) {
      if (e.key !== 'mark') throw new Error(`trace: meta ${e.key} set is not modelled`);
      this.mark = hostU32(this.regs.read(e.sreg, 4));
      return undefined;
    }
    const p = this.p;
    let v: Uint8Array;
    switch (e.key) {
      case 'l4proto':
        v = Uint8Array.of(PROTOCOLS[p.protocol]);
        break;
      case 'nfproto':
        v = Uint8Array.of(this.h.family === 'ip' ? 2 : 10);
        break;
      case 'mark':
        v = u32host(this.mark);
        break;
      case 'iifname':
        if ((p.from ?? 'remote') === 'local') throw new Error('trace: iifname of a locally sent packet');
        v = encodeField('ifname', p.iif ?? 'eth0');
        break;
      default:
        throw new Error(`trace: meta ${e.key} is not modelled`);
    }
    this.regs.write(e.dreg!, v);
    return undefined;
  }

  private lookup(name: string, sreg: number, dreg: number | undefined, invert: boolean): 'break' | Verdict | undefined {
    const set = this.tracer.setOf(name);
    const key = this.regs.read(sreg, keyLength(set.def.key));
    const hit = this.tracer.find(set, key, this.learned);
    if (invert) return hit ? 'break' : undefined;
    if (!hit) return 'break';
    if (dreg === undefined) return undefined;
    const value = hit.value;
    if (dreg === 0) {
      if (!value || !isVerdict(value)) throw new Error(`trace: ${name} is not a verdict map`);
      return value;
    }
    if (set.def.kind !== 'map' || set.def.data === 'verdict' || !value || isVerdict(value))
      throw new Error(`trace: ${name} holds no data for register ${dreg}`);
    const types = set.def.data;
    this.regs.write(dreg, concatFields(types.map((t, i) => encodeField(t, value[i] as FieldValue))));
    return undefined;
  }
}

interface Element {
  key: readonly KeyField[];
  value?: readonly FieldValue[] | Verdict;
}

export class NftTracer {
  private readonly local: Uint8Array[];
  private learnedSets = new Map<string, Uint8Array[]>();

  private readonly nft: FakeNft;

  constructor(nft: FakeNft, o: TracerOptions) {
    this.nft = nft;
    this.local = o.localAddresses.map((a) => {
      const b = parseAddr(a);
      if (!b) throw new TypeError(`trace: ${a} is not an IP address`);
      return b;
    });
  }

  /** Every path the packet can take; throws when the paths disagree on verdict, masquerade or route. */
  trace(p: TracePacket): Trace {
    const paths = this.paths(p);
    const first = paths[0]!;
    for (const x of paths)
      if (x.verdict !== first.verdict || x.masquerade !== first.masquerade || x.route !== first.route)
        throw new Error(`trace: the paths disagree:\n${paths.map(describe).join('\n')}`);
    const endpoints = [...new Set(paths.flatMap((x) => (x.dnat ? [x.dnat] : [])))].sort();
    const out: Trace = { verdict: first.verdict, endpoints, masquerade: first.masquerade, paths };
    if (first.route) out.route = first.route;
    return out;
  }

  /** Every path, one per combination of numgen values met on the way. */
  paths(p: TracePacket): TracePath[] {
    const out: TracePath[] = [];
    const todo: number[][] = [[]];
    while (todo.length > 0) {
      if (out.length + todo.length > MAX_PATHS) throw new Error(`trace: more than ${MAX_PATHS} paths`);
      const choices = todo.shift()!;
      const run = new Run(this, p, choices);
      try {
        const { verdict, route } = run.go();
        const path: TracePath = { verdict, masquerade: run.masquerade, rules: run.rules, learned: run.learned };
        if (route) path.route = route;
        if (run.dnat) path.dnat = endpointText(run.dnat.addr, run.dnat.port ?? p.dport);
        out.push(path);
      } catch (e) {
        if (!(e instanceof Fork)) throw e;
        for (const v of e.values) todo.push([...choices, v]);
      }
    }
    return out;
  }

  /** Keeps what a path added to dynamic sets (as the kernel would after that packet), e.g. affinity. */
  learn(path: TracePath): void {
    for (const { set, key } of path.learned) {
      const list = this.learnedSets.get(set) ?? [];
      if (!list.some((k) => cmpBytes(k, key) === 0)) list.push(key);
      this.learnedSets.set(set, list);
    }
  }

  // ---- for Run ----

  isLocal(addr: Uint8Array): boolean {
    if (addr.length === 4 && addr[0] === 127) return true;
    if (addr.length === 16 && addr.every((b, i) => b === (i === 15 ? 1 : 0))) return true;
    return this.local.some((l) => cmpBytes(l, addr) === 0);
  }

  baseChains(hook: Hook): { name: string; type: string; policy: 'accept' | 'drop' }[] {
    const out: { name: string; type: string; policy: 'accept' | 'drop'; priority: number }[] = [];
    for (const name of this.chainNames()) {
      const b = this.nft.chain(name)!.chain.base;
      if (b && b.hook === hook) out.push({ name, type: b.type, policy: b.policy ?? 'accept', priority: b.priority });
    }
    return out.sort((a, b) => a.priority - b.priority);
  }

  private chainNames(): string[] {
    return this.nft.chainNames();
  }

  rulesOf(chain: string): readonly NftRule[] {
    const c = this.nft.chain(chain);
    if (!c) throw new Error(`trace: jump to missing chain ${chain}`);
    return c.rules;
  }

  setOf(name: string): { def: NftSetLike; elements: readonly Element[] } {
    const s = this.nft.set(name);
    if (!s) throw new Error(`trace: lookup in missing set ${name}`);
    return s;
  }

  /** The element whose key matches (exactly, or within an interval field by field). */
  find(
    set: { def: NftSetLike; elements: readonly Element[] },
    key: Uint8Array,
    learnedNow: readonly { set: string; key: Uint8Array }[],
  ): Element | undefined {
    const types = set.def.key;
    const fields = splitFields(types, key);
    const interval = set.def.flags?.includes('interval') ?? false;
    const hit = set.elements.find((el) =>
      el.key.every((k, i) => {
        const t = types[i]!;
        if (!interval) return cmpBytes(encodeField(t, k as FieldValue), fields[i]!) === 0;
        const [lo, hi] = fieldBounds(t, k);
        return cmpBytes(lo, fields[i]!) <= 0 && cmpBytes(fields[i]!, hi) <= 0;
      }),
    );
    if (hit) return hit;
    const learned = [
      ...(this.learnedSets.get(set.def.name) ?? []),
      ...learnedNow.filter((l) => l.set === set.def.name).map((l) => l.key),
    ];
    return learned.some((k) => cmpBytes(k, key) === 0) ? { key: [key] } : undefined;
  }
}

function endpointText(addr: Uint8Array, port: number): string {
  const ip = decodeField(addr.length === 4 ? 'ipv4_addr' : 'ipv6_addr', addr);
  return addr.length === 4 ? `${ip}:${port}` : `[${ip}]:${port}`;
}

function describe(p: TracePath): string {
  return `  ${p.verdict}${p.dnat ? ` to ${p.dnat}` : ''}${p.masquerade ? ' masqueraded' : ''} via ${p.rules.join(' | ')}`;
}
