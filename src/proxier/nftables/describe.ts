// `kube-proxy-ts explain` for the nftables mode: the elements, chains and sets one service
// port owns, read back from the kernel, beside what its plan (port-plan.ts) says the last
// sync wrote. The port's objects are found by its frontends: every element of the shared
// sets and maps whose key starts with `clusterIP . proto . port`, `vip . proto . port` or
// `proto . nodePort`, and the affinity chains and sets named after it. Reading lists whole
// maps, which is fine for a command an operator types, and is never done by a sync.

import type { ServicePortInfo } from '../../model/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import type { NftElement, NftInterface } from '../../netlink/nftables/index.ts';
import type { PortDescription, ProgrammedEntry } from '../types.ts';
import { keyText, slotElement } from './elements.ts';
import { externalChain, isEndpointsMap, serviceChain, SET } from './names.ts';
import type { PortPlan } from './port-plan.ts';

/** The sets and maps whose elements belong to service ports (hairpin is shared by endpoint address, so left out). */
const PORT_SETS: ReadonlySet<string> = new Set([
  SET.clusterIPs, SET.serviceIPs, SET.serviceNodePorts, SET.noEndpointServices, SET.noEndpointNodePorts, SET.firewallProtected, SET.firewallAllow,
]);

type Field = string | number;

function valueText(e: NftElement): string {
  const v = e.value;
  if (v === undefined) return '';
  if (Array.isArray(v)) return keyText(v as readonly Field[]);
  const verdict = v as { verdict: string; chain?: string };
  return verdict.chain !== undefined ? `${verdict.verdict} ${verdict.chain}` : verdict.verdict;
}

const entryOf = (e: NftElement): ProgrammedEntry => ({ where: e.set, key: keyText(e.key as readonly Field[]), value: valueText(e) });

/** The key prefixes of the port's frontends, as nft prints them. */
export function frontendKeys(p: ServicePortInfo): string[] {
  const proto = p.protocol.toLowerCase();
  const keys = [keyText([p.clusterIP, proto, p.port])];
  if (p.externallyAccessible) {
    for (const ip of [...p.externalIPs, ...p.loadBalancerVIPs]) keys.push(keyText([ip, proto, p.port]));
    if (p.nodePort > 0) keys.push(keyText([proto, p.nodePort]));
  }
  return keys;
}

/** Whether an element (of a set other than cluster-ips) belongs to one of these frontends. */
function ownedBy(set: string, key: string, p: ServicePortInfo, frontends: readonly string[]): boolean {
  if (set === SET.clusterIPs) return key === p.clusterIP;
  return frontends.some((f) => key === f || key.startsWith(`${f} . `));
}

/** What the plan wrote: one entry per element, chain and set. */
export function plannedEntries(plan: PortPlan | undefined): ProgrammedEntry[] {
  if (!plan) return [];
  const out: ProgrammedEntry[] = [];
  for (const c of plan.contributions) {
    if (c.kind === 'element') out.push(entryOf(c.element));
    else for (let i = 0; i < c.endpoints.length; i++) out.push(entryOf(slotElement(c, i)));
  }
  for (const ch of plan.chains) out.push({ where: 'chain', key: ch.name, value: `${ch.rules.length} rules` });
  for (const s of plan.sets) out.push({ where: 'set', key: s.name, value: '' });
  return out;
}

/** The affinity sets of a port carry its readable name after the hash (names.ts affinitySet). */
const affinityPrefix = (p: ServicePortInfo): string => `-${p.namespace}/${p.name}/${p.protocol.toLowerCase()}/${p.portName || p.port}__`;

/** What the kernel holds for the port now. An absent table holds nothing. */
export async function kernelEntries(nft: NftInterface, p: ServicePortInfo): Promise<ProgrammedEntry[]> {
  const out: ProgrammedEntry[] = [];
  let sets: string[];
  let chains: string[];
  try {
    chains = (await nft.listChains()).map((c) => c.name);
    if (chains.length === 0) return out;
    sets = (await nft.listSets()).map((s) => s.name);
  } catch (e) {
    if (isNotFound(e)) return out;
    throw e;
  }
  const frontends = frontendKeys(p);
  for (const set of sets) {
    if (PORT_SETS.has(set) || isEndpointsMap(set)) {
      for (const e of await nft.listElements(set)) {
        const entry = entryOf(e);
        if (ownedBy(set, entry.key, p, frontends)) out.push(entry);
      }
    } else if (set.startsWith('affinity-') && set.includes(affinityPrefix(p))) {
      out.push({ where: 'set', key: set, value: '' });
    }
  }
  // Only Services with session affinity have chains of their own.
  for (const name of [serviceChain(p), externalChain(p)]) {
    if (!chains.includes(name)) continue;
    const rules = await nft.listRules(name);
    out.push({ where: 'chain', key: name, value: `${rules.length} rules` });
  }
  return out;
}

export async function describeNftPort(nft: NftInterface, p: ServicePortInfo, plan: PortPlan | undefined): Promise<PortDescription> {
  return { mode: 'nftables', kernel: await kernelEntries(nft, p), expected: plannedEntries(plan) };
}
