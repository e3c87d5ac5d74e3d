// Kubernetes objects -> the model's tracker -> the iptables generator -> iptables-save text,
// so that tests state Services and endpoints the way upstream's proxier tests do.
import type { DesiredState, ModelOptions } from '../../../../src/model/index.ts';
import { rulesetToSave, ruleLine } from '../../../../src/netlink/nftables/iptables/save.ts';
import {
  assembleRuleset,
  globalContext,
  globalRules,
  NfacctCounter,
  portContext,
  servicePortRules,
} from '../../../../src/proxier/iptables/index.ts';
import type { IptablesOptions, ServicePortFragment } from '../../../../src/proxier/iptables/index.ts';
import { newTracker } from '../../model/helpers.ts';

export { ep, node, NODE, slice, svc } from '../../model/helpers.ts';

export function cluster(o: Partial<ModelOptions> = {}) {
  return newTracker({ clusterCIDRs: ['10.0.0.0/8'], ...o }).t;
}

/**
 * As upstream's fake proxier (NewFakeProxier): the kernel has both nfacct objects, so their
 * counting rules are in every ruleset unless a test says otherwise.
 */
export const BOTH_COUNTERS: ReadonlySet<string> = new Set(Object.values(NfacctCounter));
const withCounters = (opts: IptablesOptions): IptablesOptions => ({ nfacctCounters: BOTH_COUNTERS, ...opts });

export function fragments(desired: DesiredState, opts: IptablesOptions = {}): ServicePortFragment[] {
  const ctx = portContext(desired, withCounters(opts));
  return [...desired.services.values()].map((p) => servicePortRules(p, desired.selections.get(p.id), ctx));
}

/** The whole ruleset as iptables-save prints it. */
export function saveText(
  desired: DesiredState,
  opts: IptablesOptions = {},
  nodePortIPs: readonly string[] = [],
): string {
  const global = globalRules(globalContext(desired, nodePortIPs, withCounters(opts)));
  return rulesetToSave(assembleRuleset(global, fragments(desired, opts)));
}

/** Lines of the ruleset text that belong to chains whose name starts with `prefix` (or the table headers). */
export function chainLines(text: string, chain: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`-A ${chain} `) || l === `-A ${chain}`);
}

/** A fragment's rules as iptables-save lines: own chains first, then shared rules. */
export function fragmentLines(f: ServicePortFragment, family: DesiredState['family'] = 'IPv4'): string[] {
  return [...f.chains.flatMap((c) => c.rules), ...f.shared].map((r) => ruleLine(r, family));
}

/** Dedent a template literal: strip the common leading whitespace and the first/last blank lines. */
export function dedent(s: string): string {
  const lines = s
    .replace(/^\n/, '')
    .replace(/\n\s*$/, '')
    .split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim() !== '').map((l) => /^\s*/.exec(l)![0].length));
  return lines.map((l) => l.slice(indent)).join('\n') + '\n';
}
