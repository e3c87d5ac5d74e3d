// Legacy iptables (x_tables, what `iptables-legacy` writes) cannot be read or changed over
// netlink: its rules live behind getsockopt/setsockopt on a raw socket, and we never run a
// program. So when upstream kube-proxy ran here with iptables-legacy, its KUBE-* rules can
// only be detected and named: /proc/net/ip_tables_names (ip6_tables_names) lists the legacy
// tables registered in this network namespace, and /etc/alternatives/iptables says which
// iptables the host's packages (and a packaged kube-proxy) used. The warning carries the
// commands that do what upstream's --cleanup would do to them, for the operator to run.

import { readFileSync, readlinkSync } from 'node:fs';
import type { Logger } from '../base/logger.ts';
import { IPTABLES_TABLES, SERVICE_CHAIN_PREFIXES, fixedChainNames } from './iptables.ts';
import type { IptablesTable } from './iptables.ts';

export interface LegacyTables {
  /** Legacy tables registered for IPv4 / IPv6 among nat, filter, mangle. */
  ipv4: IptablesTable[];
  ipv6: IptablesTable[];
  /** Where /etc/alternatives/iptables points, when it exists. */
  alternative?: string;
}

export interface LegacyProbe {
  read(path: string): string | undefined;
  readlink(path: string): string | undefined;
}

const quietly = <T>(f: () => T): T | undefined => {
  try {
    return f();
  } catch {
    return undefined;
  }
};

export const procProbe: LegacyProbe = {
  read: (path) => quietly(() => readFileSync(path, 'utf8')),
  readlink: (path) => quietly(() => readlinkSync(path)),
};

const tablesIn = (text: string | undefined): IptablesTable[] => {
  const names = new Set((text ?? '').split('\n').map((l) => l.trim()));
  return IPTABLES_TABLES.filter((t) => names.has(t));
};

export function detectLegacyTables(probe: LegacyProbe = procProbe): LegacyTables {
  const alternative = probe.readlink('/etc/alternatives/iptables');
  return {
    ipv4: tablesIn(probe.read('/proc/net/ip_tables_names')),
    ipv6: tablesIn(probe.read('/proc/net/ip6_tables_names')),
    ...(alternative !== undefined ? { alternative } : {}),
  };
}

const BUILT_IN = 'PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING';

/** An extended regex matching exactly upstream's chain names in one table (kubelet's are not among them). */
export function chainRegex(table: IptablesTable): string {
  const names = fixedChainNames(table).map((n) => n.slice('KUBE-'.length));
  const prefixes = table === 'nat' ? SERVICE_CHAIN_PREFIXES.map((p) => `${p.slice('KUBE-'.length)}.*`) : [];
  return `KUBE-(${[...names, ...prefixes].join('|')})`;
}

/**
 * Shell commands that remove upstream's legacy rules from one table, as its --cleanup would:
 * the jumps from the built-in chains (deleted by their own text, so other rules and their order
 * stay), then its chains flushed and deleted.
 */
export function legacyTableCommands(tool: 'iptables' | 'ip6tables', table: IptablesTable): string[] {
  const bin = `${tool}-legacy`;
  const save = `${bin}-save -t ${table}`;
  const re = chainRegex(table);
  const chains = `${save} | sed -n 's/^:\\(KUBE-[^ ]*\\) .*/\\1/p' | grep -E '^${re}$'`;
  return [
    `${save} | grep -E '^-A (${BUILT_IN}) .*-[jg] ${re}( |$)' | sed 's/^-A /-D /' | xargs -r -L1 ${bin} -t ${table}`,
    `${chains} | xargs -r -n1 ${bin} -t ${table} -F`,
    `${chains} | xargs -r -n1 ${bin} -t ${table} -X`,
  ];
}

/** Every command for the tables found, IPv4 then IPv6. */
export function legacyCleanupCommands(found: LegacyTables): string[] {
  return [
    ...found.ipv4.flatMap((t) => legacyTableCommands('iptables', t)),
    ...found.ipv6.flatMap((t) => legacyTableCommands('ip6tables', t)),
  ];
}

/**
 * Logs, once, what the operator must check and run when legacy tables exist; returns whether it
 * warned. Nothing is logged on a node where no legacy table was ever used.
 */
export function warnAboutLegacyIptables(logger: Logger, probe: LegacyProbe = procProbe): boolean {
  const found = detectLegacyTables(probe);
  if (found.ipv4.length === 0 && found.ipv6.length === 0) return false;
  const where = [
    found.ipv4.length > 0 ? `iptables: ${found.ipv4.join(', ')}` : '',
    found.ipv6.length > 0 ? `ip6tables: ${found.ipv6.join(', ')}` : '',
  ].filter(Boolean);
  const alt = found.alternative ? `; /etc/alternatives/iptables -> ${found.alternative}` : '';
  const check = [
    found.ipv4.length > 0 ? 'iptables-legacy-save' : '',
    found.ipv6.length > 0 ? 'ip6tables-legacy-save' : '',
  ]
    .filter(Boolean)
    .map((s) => `${s} | grep -E '^(:|-A .*)KUBE-'`);
  // One log line each, so every command stays a line of its own (copyable) in any log format.
  const lines = [
    `Legacy iptables tables are in use on this node (${where.join('; ')}${alt}). kube-proxy-ts cannot read or remove ` +
      'legacy rules. If upstream kube-proxy ran here with iptables-legacy, its KUBE-* rules still catch Service ' +
      'traffic. Check with the next command(s):',
    ...check,
    "Remove them (as upstream kube-proxy --cleanup would; kubelet's KUBE-FIREWALL, KUBE-MARK-DROP and " +
      'KUBE-KUBELET-CANARY stay) with the next commands, then restart kube-proxy-ts, so that upstream ipsets those ' +
      'rules still referenced are destroyed too:',
    ...legacyCleanupCommands(found),
  ];
  for (const line of lines) logger.warn(line);
  return true;
}
