// Upstream kube-proxy's iptables-nft chains (KUBE-SERVICES, KUBE-SVC-..., KUBE-FORWARD ...) in
// the tables iptables-nft uses (`ip|ip6 nat`, `filter`, `mangle`), and the rules that jump to
// them from the built-in chains: which names are upstream's, which of them the selected mode
// takes over, and one sweep per table that removes the rest. Everything else in those tables
// (a foreign rule in PREROUTING, kubelet's KUBE-FIREWALL, KUBE-MARK-DROP, KUBE-KUBELET-CANARY)
// stays where it is; rules are deleted by handle, so the order of the others is kept.
//
// Names transcribed from upstream's CleanupLeftovers (pkg/proxy/iptables/cleanup.go: the chains
// it flushes and deletes, plus its service/endpoint chain prefixes), pkg/proxy/ipvs
// (iptablesCleanupChains = our IPVS companion CHAINS) and pkg/proxy/userspace (KUBE-PORTALS-*,
// KUBE-NODEPORT-*: the userspace mode's rules.ts).

import { isNotFound } from '../netlink/core/index.ts';
import type { NftExpr, NftInterface, NftRule, NftTransaction } from '../netlink/nftables/index.ts';
import { CHAINS as IPVS_CHAINS } from '../proxier/ipvs/index.ts';
import { isUserspaceChain } from '../proxier/userspace/rules.ts';

export type IptablesTable = 'nat' | 'filter' | 'mangle';
export const IPTABLES_TABLES: readonly IptablesTable[] = ['nat', 'filter', 'mangle'];

/** The chains upstream's iptables mode creates, per table (besides the per-service ones). */
const UPSTREAM_IPTABLES_CHAINS: Record<IptablesTable, readonly string[]> = {
  nat: ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ', 'KUBE-PROXY-CANARY'],
  filter: [
    'KUBE-SERVICES',
    'KUBE-EXTERNAL-SERVICES',
    'KUBE-FORWARD',
    'KUBE-NODEPORTS',
    'KUBE-PROXY-FIREWALL',
    'KUBE-PROXY-CANARY',
  ],
  mangle: ['KUBE-PROXY-CANARY'],
};

/** Per-Service and per-endpoint chains of upstream's iptables mode (nat only; KUBE-XLB- before 1.24). */
export const SERVICE_CHAIN_PREFIXES: readonly string[] = [
  'KUBE-SVC-',
  'KUBE-SVL-',
  'KUBE-SEP-',
  'KUBE-FW-',
  'KUBE-EXT-',
  'KUBE-XLB-',
];

export function isUpstreamIptablesChain(table: IptablesTable, name: string): boolean {
  if (UPSTREAM_IPTABLES_CHAINS[table].includes(name)) return true;
  return table === 'nat' && SERVICE_CHAIN_PREFIXES.some((p) => name.startsWith(p));
}

export function isIpvsChain(table: IptablesTable, name: string): boolean {
  return IPVS_CHAINS.some((c) => c.table === table && c.name === name);
}

/** The fixed names of both lists in one table (for the legacy-iptables commands). */
export function fixedChainNames(table: IptablesTable): string[] {
  const ipvs = IPVS_CHAINS.filter((c) => c.table === table).map((c) => c.name);
  return [...new Set([...UPSTREAM_IPTABLES_CHAINS[table], ...ipvs])];
}

/** What a sweep of one table may do. */
export interface SweepPolicy {
  /** A chain of another proxy, to flush and delete. */
  remove(name: string): boolean;
  /** A chain of the same name the running mode owns: kept, but rules in it that lead into removed chains go. */
  takenOver(name: string): boolean;
  /** Also delete rules in taken-over chains that match ipsets (the IPVS form of a chain iptables mode takes over). */
  dropSetRules: boolean;
}

/**
 * As upstream's platformCleanup decides between modes: state of a mode other than the running
 * one goes; state whose names the running mode shares (`owns`) is left to it. --cleanup owns
 * nothing and removes every mode's chains.
 */
export function sweepPolicy(
  owns: (table: IptablesTable, name: string) => boolean,
  dropSetRules: boolean,
  table: IptablesTable,
): SweepPolicy {
  // The userspace mode's KUBE-PORTALS-* / KUBE-NODEPORT-* (upstream's names too) share no name with the others.
  const upstream = (n: string): boolean =>
    isUpstreamIptablesChain(table, n) || isIpvsChain(table, n) || isUserspaceChain(table, n);
  const takenOver = (n: string): boolean => owns(table, n);
  return { remove: (n) => upstream(n) && !takenOver(n), takenOver, dropSetRules };
}

/** A rule as the sweep needs it: where it is, its handle, the chains it jumps or goes to. */
export interface SweepRule {
  chain: string;
  handle: bigint;
  targets: readonly string[];
  usesSet: boolean;
}

export interface SweepPlan {
  /** Rules outside the removed chains that must go first (jumps from built-in or taken-over chains). */
  deleteRules: SweepRule[];
  /** Chains to flush, then delete. */
  chains: string[];
  /** Chains that would be removed but are still jumped to from a chain that is not ours to edit. */
  kept: { chain: string; heldBy: string }[];
}

function ruleTargets(exprs: readonly NftExpr[]): string[] {
  const out: string[] = [];
  for (const e of exprs)
    if (e.type === 'immediate' && 'verdict' in e && 'chain' in e.verdict) out.push(e.verdict.chain);
  return out;
}

const usesIpset = (exprs: readonly NftExpr[]): boolean =>
  exprs.some((e) => (e.type === 'xtmatch' && e.name === 'set') || (e.type === 'xttarget' && e.name === 'SET'));

export function sweepRule(r: NftRule): SweepRule | undefined {
  if (r.handle === undefined) return undefined;
  return { chain: r.chain, handle: r.handle, targets: ruleTargets(r.exprs), usesSet: usesIpset(r.exprs) };
}

/**
 * Pure: what to delete in one table. A chain to remove that a foreign chain (neither built-in,
 * taken over nor removed) still jumps to is kept, with everything only it leads to, so that the
 * table's batch can commit; the caller reports it.
 */
export function planSweep(
  chains: readonly { name: string; base: boolean }[],
  rules: readonly SweepRule[],
  policy: SweepPolicy,
): SweepPlan {
  const base = new Set(chains.filter((c) => c.base).map((c) => c.name));
  const removed = new Set(chains.filter((c) => !c.base && policy.remove(c.name)).map((c) => c.name));
  const editable = (chain: string): boolean => base.has(chain) || policy.takenOver(chain);
  const kept: SweepPlan['kept'] = [];
  // Each round keeps at least one more chain or stops: at most |removed| + 1 rounds.
  for (let round = 0, changed = true; changed && round <= chains.length; round++) {
    changed = false;
    for (const r of rules) {
      if (removed.has(r.chain) || editable(r.chain)) continue;
      for (const t of r.targets) {
        if (!removed.delete(t)) continue;
        kept.push({ chain: t, heldBy: r.chain });
        changed = true;
      }
    }
  }
  const leadsAway = (r: SweepRule): boolean => r.targets.some((t) => removed.has(t));
  const ipvsSetRule = (r: SweepRule): boolean => policy.dropSetRules && !base.has(r.chain) && r.usesSet;
  const deleteRules = rules.filter(
    (r) => !removed.has(r.chain) && editable(r.chain) && (leadsAway(r) || ipvsSetRule(r)),
  );
  return { deleteRules, chains: chains.map((c) => c.name).filter((n) => removed.has(n)), kept };
}

/** Operations per transaction: far below the socket's batch limit (~416 KiB) at ~100 bytes each. */
const OPS_PER_BATCH = 1000;

/**
 * The sweep's plan, reading only the rules it looks at: those of the chains that stay (built-in,
 * fixed taken-over ones, foreign). The rules of removed chains matter only when a foreign chain keeps one
 * of them; then the kept chains are read too and the plan made again. Read chain by chain: the
 * kernel walks a whole table again for each datagram of a dump (quadratic: minutes at 5,000
 * Services' chains), but only the named chain for a dump of one.
 */
async function sweepPlanOf(
  client: NftInterface,
  chains: readonly { name: string; base: boolean }[],
  policy: SweepPolicy,
): Promise<SweepPlan> {
  const rules: SweepRule[] = [];
  const read = new Set<string>();
  const readChains = async (names: Iterable<string>): Promise<void> => {
    for (const name of names) {
      if (read.has(name)) continue;
      read.add(name);
      let listed: NftRule[];
      try {
        listed = await client.listRules(name);
      } catch (e) {
        if (isNotFound(e)) continue; // deleted since listed
        throw e;
      }
      for (const r of listed) {
        const sr = r.chain === name ? sweepRule(r) : undefined;
        if (sr) rules.push(sr);
      }
    }
  };
  // A taken-over service or endpoint chain (iptables mode over upstream's) holds no rule the
  // sweep deletes: neither ipset matches nor jumps to the IPVS mode's chains.
  const perService = (n: string): boolean => policy.takenOver(n) && SERVICE_CHAIN_PREFIXES.some((p) => n.startsWith(p));
  await readChains(chains.filter((c) => c.base || (!policy.remove(c.name) && !perService(c.name))).map((c) => c.name));
  for (let round = 0; round <= chains.length; round++) {
    const plan = planSweep(chains, rules, policy);
    const removed = new Set(plan.chains);
    // Chains the policy removes but a foreign chain keeps: what they jump to is kept too.
    const unread = chains.map((c) => c.name).filter((n) => policy.remove(n) && !removed.has(n) && !read.has(n));
    if (unread.length === 0) return plan;
    await readChains(unread);
  }
  return planSweep(chains, rules, policy);
}

/** What one table's sweep did. */
export interface SweepResult {
  table: string;
  removedChains: string[];
  deletedRules: number;
  kept: SweepPlan['kept'];
}

/**
 * Removes another proxy's chains from one iptables-nft table: the jumps into them first, then
 * the chains flushed and deleted, in bounded batches (a large cluster leaves tens of thousands
 * of KUBE-SEP- chains). A missing table is nothing to do.
 */
export async function sweepTable(
  client: NftInterface,
  policy: SweepPolicy,
  signal?: AbortSignal,
): Promise<SweepResult> {
  const table = `${client.scope.family} ${client.scope.table}`;
  const listed = await client.listChains();
  const chains = listed.map((c) => ({ name: c.name, base: c.base !== undefined }));
  const empty: SweepResult = { table, removedChains: [], deletedRules: 0, kept: [] };
  if (!chains.some((c) => !c.base && (policy.remove(c.name) || policy.takenOver(c.name)))) return empty;
  const plan = await sweepPlanOf(client, chains, policy);
  const ops: ((tx: NftTransaction) => void)[] = [
    ...plan.deleteRules.map((r) => (tx: NftTransaction) => {
      tx.delete({ kind: 'rule', chain: r.chain, exprs: [], handle: r.handle });
    }),
    ...plan.chains.map((name) => (tx: NftTransaction) => tx.flush({ kind: 'chain', name })),
    ...plan.chains.map((name) => (tx: NftTransaction) => tx.delete({ kind: 'chain', name })),
  ];
  for (let i = 0; i < ops.length; i += OPS_PER_BATCH) {
    const tx = client.newTransaction();
    for (const op of ops.slice(i, i + OPS_PER_BATCH)) op(tx);
    await client.run(tx, signal);
  }
  return { table, removedChains: plan.chains, deletedRules: plan.deleteRules.length, kept: plan.kept };
}
