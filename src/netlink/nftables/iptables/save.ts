// Rules as `iptables-save` prints them (iptables-nft-save 1.8.9), for logs, docs and golden
// tests: what an operator sees on a node, and what test/kernel/iptables-save-render.test.ts
// checks against the real tool.
//
// How iptables-save lays a rule out (checked against iptables-nft-save output):
//   -A CHAIN [!] -s A/32 [!] -d A/32 [!] -i IF [!] -o IF -p PROTO  -m ... (rule order)  -j TARGET ...
// the address/interface/protocol part always first and in that order, whatever order the
// rule was written in; then each match with its options in the rule's order; bare addresses
// get their full-length prefix; a comment is quoted unless it is only [A-Za-z0-9_-].
// A table: `*name`, the built-in chains (`:INPUT ACCEPT [0:0]`), our chains sorted by name
// (`:KUBE-X - [0:0]`), then the rules chain by chain in that same order, then `COMMIT`.

import type { IPFamily } from '../../../base/ip.ts';
import type { BuiltinChain, IptRule, IptTable, Match, Target } from './rule.ts';

/** A chain and its rules as one table holds them (a built-in chain holds only our jumps). */
export interface IptRulesetChain {
  readonly name: string;
  readonly rules: readonly IptRule[];
}

export interface IptRulesetTable {
  readonly table: IptTable;
  readonly chains: readonly IptRulesetChain[];
}

/** A whole desired ruleset of one IP family. */
export interface IptRuleset {
  readonly family: IPFamily;
  readonly tables: readonly IptRulesetTable[];
}

/** The built-in chains iptables-nft creates in each table, in the order iptables-save lists them. */
export const BUILTIN_CHAINS: Readonly<Record<IptTable, readonly BuiltinChain[]>> = {
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
};

/** The order iptables-nft-save prints tables in. */
export const TABLE_ORDER: readonly IptTable[] = ['mangle', 'filter', 'nat'];

const BUILTIN = new Set<string>(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

const hex = (n: number): string => `0x${(n >>> 0).toString(16)}`;
const not = (inv: boolean | undefined): string[] => (inv ? ['!'] : []);
const PROTO_NUMBER: Readonly<Record<string, number>> = { tcp: 6, udp: 17, sctp: 132 };

/** A bare address as iptables prints it: with its full-length prefix. */
function withPrefix(cidr: string): string {
  if (cidr.includes('/')) return cidr;
  return `${cidr}/${cidr.includes(':') ? 128 : 32}`;
}

/** libxtables xtables_save_string(): bare when only [A-Za-z0-9_-], else quoted with \ before " \ '. */
export function saveString(s: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(s)) return s;
  return `"${s.replace(/["\\']/g, (c) => `\\${c}`)}"`;
}

/**
 * libxt_statistic: the kernel keeps the probability as a 31-bit fraction
 * (lround(p * 2^31)), and iptables-save prints that fraction with `%.11f`.
 */
export function statisticThreshold(probability: string): number {
  const p = Number(probability);
  if (!Number.isFinite(p) || p < 0 || p > 1)
    throw new RangeError(`statistic probability '${probability}' is not in 0..1`);
  return Math.round(p * 0x80000000);
}

const FIVE_POW_31 = 5n ** 31n;

/** threshold / 2^31 printed with exactly 11 decimals, rounded half to even as glibc's printf does. */
export function formatThreshold(threshold: number): string {
  // threshold / 2^31 == threshold * 5^31 / 10^31 exactly: 31 decimals, cut to 11.
  const exact = BigInt(threshold) * FIVE_POW_31;
  const unit = 10n ** 20n;
  let q = exact / unit;
  const r = exact % unit;
  if (r * 2n > unit || (r * 2n === unit && q % 2n === 1n)) q += 1n;
  const digits = q.toString().padStart(12, '0');
  return `${digits.slice(0, -11)}.${digits.slice(-11)}`;
}

function matchArgs(m: Match, family: IPFamily, head: Map<string, string[]>, rest: string[]): void {
  switch (m.m) {
    case 'src':
      head.set('-s', [...not(m.invert), '-s', withPrefix(m.cidr)]);
      return;
    case 'dst':
      head.set('-d', [...not(m.invert), '-d', withPrefix(m.cidr)]);
      return;
    case 'inIface':
      head.set('-i', [...not(m.invert), '-i', m.name]);
      return;
    case 'outIface':
      head.set('-o', [...not(m.invert), '-o', m.name]);
      return;
    case 'proto':
      head.set('-p', ['-p', m.proto]);
      return;
    case 'dport':
      rest.push('-m', m.proto, '--dport', String(m.port));
      return;
    case 'l4':
      rest.push('-m', m.proto);
      return;
    case 'comment':
      rest.push('-m', 'comment', '--comment', saveString(m.text));
      return;
    case 'set':
      rest.push('-m', 'set', '--match-set', m.set, m.dirs.join(','));
      return;
    case 'addrtype':
      rest.push('-m', 'addrtype', ...not(m.invert), m.dir === 'src' ? '--src-type' : '--dst-type', m.type);
      return;
    case 'mark':
      rest.push(
        '-m',
        'mark',
        ...not(m.invert),
        '--mark',
        m.mask === 0xffffffff ? hex(m.value) : `${hex(m.value)}/${hex(m.mask)}`,
      );
      return;
    case 'ctstate':
      rest.push('-m', 'conntrack', ...not(m.invert), '--ctstate', m.states.join(','));
      return;
    case 'physdevNotIsIn':
      rest.push('-m', 'physdev', '!', '--physdev-is-in');
      return;
    case 'nfacct':
      // libxt_nfacct prints " --nfacct-name " and then the name through xtables_save_string,
      // which adds its own leading space: two spaces, as upstream's rulesets show them.
      rest.push('-m', 'nfacct', '--nfacct-name', ` ${saveString(m.name)}`);
      return;
    case 'ipvs':
      // iptables-save prints the protocol as a number and the address without a full-length mask.
      rest.push(
        '-m',
        'ipvs',
        '--vproto',
        String(PROTO_NUMBER[m.vproto] ?? m.vproto),
        '--vaddr',
        m.vaddr,
        '--vport',
        String(m.vport),
      );
      return;
    case 'statistic':
      rest.push(
        '-m',
        'statistic',
        '--mode',
        'random',
        '--probability',
        formatThreshold(statisticThreshold(m.probability)),
      );
      return;
    case 'statisticNth':
      rest.push('-m', 'statistic', '--mode', 'nth', '--every', String(m.every), '--packet', String(m.packet));
      return;
    case 'recent': {
      const mode = m.mode === 'set' ? ['--set'] : ['--rcheck'];
      const seconds = m.seconds ? ['--seconds', String(m.seconds)] : [];
      const reap = m.reap ? ['--reap'] : [];
      const mask = family === 'IPv6' ? 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' : '255.255.255.255';
      rest.push('-m', 'recent', ...mode, ...seconds, ...reap, '--name', m.name, '--mask', mask, '--rsource');
      return;
    }
  }
}

function targetArgs(t: Target, family: IPFamily): string[] {
  switch (t.t) {
    case 'jump':
      return ['-j', t.chain];
    case 'MARK':
      // MARK revision 2 is saved as --set-xmark value/mask: --or-mark v is v/v, --xor-mark v is v/0x0.
      return ['-j', 'MARK', '--set-xmark', `${hex(t.value)}/${hex(t.op === 'or' ? t.value : 0)}`];
    case 'MASQUERADE':
      return ['-j', 'MASQUERADE', ...(t.randomFully ? ['--random-fully'] : [])];
    case 'REJECT':
      return ['-j', 'REJECT', '--reject-with', family === 'IPv6' ? 'icmp6-port-unreachable' : 'icmp-port-unreachable'];
    case 'DNAT':
      return ['-j', 'DNAT', '--to-destination', t.addr.includes(':') ? `[${t.addr}]:${t.port}` : `${t.addr}:${t.port}`];
    case 'REDIRECT':
      return ['-j', 'REDIRECT', '--to-ports', String(t.port)];
    case 'none':
      return [];
    default:
      return ['-j', t.t];
  }
}

const HEAD_ORDER = ['-s', '-d', '-i', '-o', '-p'] as const;

/** One rule's arguments as iptables-save prints them (everything after `-A CHAIN`). */
export function ruleArgs(r: IptRule, family: IPFamily = 'IPv4'): string {
  const head = new Map<string, string[]>();
  const rest: string[] = [];
  for (const m of r.matches) matchArgs(m, family, head, rest);
  const out: string[] = [];
  for (const k of HEAD_ORDER) out.push(...(head.get(k) ?? []));
  out.push(...rest, ...targetArgs(r.target, family));
  return out.join(' ');
}

/** `-A CHAIN args`, one line of iptables-save. */
export function ruleLine(r: IptRule, family: IPFamily = 'IPv4'): string {
  const args = ruleArgs(r, family);
  return args === '' ? `-A ${r.chain}` : `-A ${r.chain} ${args}`;
}

/** Byte order, as iptables-nft sorts its chain cache (strcmp). */
const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * One table as iptables-nft-save prints it (without its `#` comment lines): every built-in
 * chain of the table with policy ACCEPT (iptables-nft creates them all), our chains sorted by
 * name, and the rules chain by chain in that order.
 */
export function tableToSave(t: IptRulesetTable, family: IPFamily): string {
  const builtins = BUILTIN_CHAINS[t.table];
  const byChain = new Map<string, IptRulesetChain>();
  for (const c of t.chains) {
    if (byChain.has(c.name)) throw new Error(`chain ${c.name} appears twice in table ${t.table}`);
    if (BUILTIN.has(c.name) && !(builtins as readonly string[]).includes(c.name))
      throw new Error(`table ${t.table} has no built-in chain ${c.name}`);
    byChain.set(c.name, c);
  }
  const own = t.chains
    .filter((c) => !BUILTIN.has(c.name))
    .map((c) => c.name)
    .sort(byName);
  const lines = [`*${t.table}`];
  for (const b of builtins) lines.push(`:${b} ACCEPT [0:0]`);
  for (const name of own) lines.push(`:${name} - [0:0]`);
  for (const name of [...builtins, ...own]) {
    for (const r of byChain.get(name)?.rules ?? []) lines.push(ruleLine(r, family));
  }
  lines.push('COMMIT');
  return lines.join('\n') + '\n';
}

/** The whole ruleset, tables in iptables-nft-save's order (mangle, filter, nat). */
export function rulesetToSave(rs: IptRuleset): string {
  const tables = [...rs.tables].sort((a, b) => TABLE_ORDER.indexOf(a.table) - TABLE_ORDER.indexOf(b.table));
  return tables.map((t) => tableToSave(t, rs.family)).join('');
}
