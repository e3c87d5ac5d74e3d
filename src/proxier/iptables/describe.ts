// `kube-proxy-ts explain` for the iptables mode: the rules one service port owns, read back
// from the kernel and decoded (netlink/nftables/iptables/decode.ts) to iptables-save lines,
// beside the rules the last sync wrote for it (made again from the same inputs). A port owns
// its KUBE-SVC/SVL/EXT/FW/SEP chains whole, and the rules in the shared chains (nat
// KUBE-SERVICES, KUBE-NODEPORTS, filter KUBE-SERVICES, ...) that carry its name in their
// comment, as upstream writes them ("ns/name:port cluster IP", "ns/name:port", ...).
//
// The chains present and the shared chains' rules are read once per query (kept in the describe
// session), so explaining every Service lists them once; a port's own chains are listed per port.
// Entries: one per rule, where = "TABLE CHAIN", key = the rule as iptables-save prints it; one per owned chain
// (where = "chain") so that an empty chain missing is seen too.

import type { IPFamily } from '../../base/ip.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { NftRule } from '../../netlink/nftables/index.ts';
import { decodeIptRule } from '../../netlink/nftables/iptables/decode.ts';
import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { ruleLine } from '../../netlink/nftables/iptables/save.ts';
import type { DescribeOptions, PortDescription, ProgrammedEntry } from '../types.ts';
import { SHARED_CHAINS } from './desired.ts';
import { portChainNames, servicePortName } from './names.ts';
import type { ServicePortInfo } from '../../model/index.ts';
import { chainId } from '../iptables-nft/units.ts';
import type { ChainRef, Unit } from '../iptables-nft/units.ts';
import type { TableClient } from '../iptables-nft/writer-types.ts';

/** A rule as listed: decoded, or its chain and a note when it is in a form we never write. */
function lineOf(listed: NftRule, table: IptTable, family: IPFamily): { line: string; rule: IptRule | undefined } {
  const rule = decodeIptRule(listed, table, family);
  return {
    rule,
    line: rule
      ? ruleLine(rule, family)
      : `-A ${listed.chain} (a rule iptables-nft cannot show; handle ${listed.handle})`,
  };
}

const ruleEntry = (table: IptTable, chain: string, line: string): ProgrammedEntry => ({
  where: `${table} ${chain}`,
  key: line,
  value: '',
});
const chainEntry = (table: IptTable, name: string): ProgrammedEntry => ({
  where: 'chain',
  key: `${table} ${name}`,
  value: '',
});

/** Lists one chain; a chain that is not there lists as undefined. */
async function listChain(client: TableClient | undefined, name: string): Promise<NftRule[] | undefined> {
  if (!client) return undefined;
  try {
    return (await client.listRules(name)).filter((r) => r.chain === name);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

interface SharedRule {
  readonly table: IptTable;
  readonly chain: string;
  readonly line: string;
  readonly comment: string | undefined;
}

interface Snapshot {
  /** table/chain of every chain present (listing a chain that is not there answers nothing, not an error). */
  readonly chains: ReadonlySet<string>;
  readonly shared: readonly SharedRule[];
}

/** The chains present and the shared chains' rules, decoded. */
async function readSnapshot(clients: ReadonlyMap<IptTable, TableClient>, family: IPFamily): Promise<Snapshot> {
  const chains = new Set<string>();
  for (const [table, client] of clients) {
    try {
      for (const c of await client.listChains()) chains.add(chainId(table, c.name));
    } catch (e) {
      if (!isNotFound(e)) throw e; // no such table: no chains
    }
  }
  const out: SharedRule[] = [];
  for (const c of SHARED_CHAINS) {
    if (!chains.has(chainId(c.table, c.name))) continue;
    for (const r of (await listChain(clients.get(c.table), c.name)) ?? []) {
      const { rule, line } = lineOf(r, c.table, family);
      const m = rule?.matches.find((x) => x.m === 'comment');
      out.push({ table: c.table, chain: c.name, line, comment: m?.m === 'comment' ? m.text : undefined });
    }
  }
  return { chains, shared: out };
}

/** Upstream's comments on a port's shared rules: its name alone, or followed by what the rule is for. */
const commentOfPort = (comment: string | undefined, portName: string): boolean =>
  comment !== undefined && (comment === portName || comment.startsWith(`${portName} `));

/** What the last sync wrote for the port: its chains and all its rules. */
export function expectedEntries(unit: Unit | undefined, family: IPFamily): ProgrammedEntry[] {
  if (!unit) return [];
  return [
    ...unit.chains.map((c) => chainEntry(c.table, c.name)),
    ...unit.rules.map((r) => ruleEntry(r.table, r.chain, ruleLine(r, family))),
  ];
}

export interface IptDescribeInputs {
  readonly clients: ReadonlyMap<IptTable, TableClient>;
  readonly family: IPFamily;
  /** The port's unit as the last sync wrote it; undefined: never programmed. */
  readonly unit: Unit | undefined;
}

/**
 * The port's own chains to look for in the kernel: the unit's, and the names its KUBE-SVC/SVL/
 * EXT/FW chains have, so that one left over (or never programmed) shows as unexpected.
 */
function ownChains(info: ServicePortInfo, unit: Unit | undefined): ChainRef[] {
  const n = portChainNames(info);
  const out: ChainRef[] = [...(unit?.chains ?? [])];
  for (const name of [n.svc, n.svl, n.ext, n.fw])
    if (!out.some((c) => c.table === 'nat' && c.name === name)) out.push({ table: 'nat', name });
  return out;
}

export async function describeIptPort(
  info: ServicePortInfo,
  i: IptDescribeInputs,
  opts: DescribeOptions = {},
): Promise<PortDescription> {
  const key = `iptables-shared ${i.family}`;
  let pending = opts.session?.get(key) as Promise<Snapshot> | undefined;
  if (!pending) {
    pending = readSnapshot(i.clients, i.family);
    opts.session?.set(key, pending);
  }
  const snapshot = await pending;
  const kernel: ProgrammedEntry[] = [];
  for (const c of ownChains(info, i.unit)) {
    if (!snapshot.chains.has(chainId(c.table, c.name))) continue;
    const rules = await listChain(i.clients.get(c.table), c.name);
    if (!rules) continue;
    kernel.push(chainEntry(c.table, c.name));
    for (const r of rules) kernel.push(ruleEntry(c.table, c.name, lineOf(r, c.table, i.family).line));
  }
  const portName = servicePortName(info);
  for (const r of snapshot.shared)
    if (commentOfPort(r.comment, portName)) kernel.push(ruleEntry(r.table, r.chain, r.line));
  return { mode: 'iptables', kernel, expected: expectedEntries(i.unit, i.family) };
}
