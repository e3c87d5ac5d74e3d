// Text for the operator: `explain` of one Service as a report, of all as a table, and a
// `trace` result. JSON output is the query's answer as it is (cli/); this is the table form.

import type { PortExplanation } from './explain.ts';
import type { TraceResult } from './trace.ts';

/** What the daemon says besides the ports: when it last synced, and what it has not synced yet. */
export interface SyncTimes {
  readonly mode: string;
  /** ISO time of the last successful sync per family; absent: none yet. */
  readonly lastSync: Readonly<Record<string, string>>;
  /** ISO time a change was last queued per family. */
  readonly lastChange: Readonly<Record<string, string>>;
  /** The model holds changes the proxier has not synced yet (the kernel may lag behind it). */
  readonly pending: boolean;
}

/** Which daemon answered: the control socket is a file, so no network namespace scopes it. */
export interface DaemonIdentity {
  readonly nodeName: string;
  readonly mode: string;
  readonly pid: number;
  /** The control socket path the daemon listens on. */
  readonly socket: string;
}

export interface ExplainAnswer {
  /** Absent from daemons older than this field. */
  readonly daemon?: DaemonIdentity;
  readonly sync: SyncTimes;
  readonly ports: readonly PortExplanation[];
}

/** Columns padded to their widest cell. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

const frontendText = (p: PortExplanation): string =>
  p.frontends.map((f) => `${f.kind === 'node-port' ? 'node' : f.address}:${f.port}`).join(',');

function kernelState(p: PortExplanation): string {
  if (!p.kernel) return 'n/a';
  if (p.kernel.agrees) return p.kernel.expected.length === 0 ? 'not programmed' : 'in sync';
  return `DRIFT (${p.kernel.drift.missing.length} missing, ${p.kernel.drift.unexpected.length} unexpected)`;
}

export function formatExplainTable(a: ExplainAnswer): string {
  const rows = a.ports.map((p) => {
    const used = p.endpoints.filter((e) => e.usedFor.length > 0).length;
    const policy = `iTP=${p.policies.internalTrafficPolicy}${p.policies.externalTrafficPolicy ? ` eTP=${p.policies.externalTrafficPolicy}` : ''}`;
    return [p.id, p.family, p.type, frontendText(p), policy, `${used}/${p.endpoints.length}`, kernelState(p)];
  });
  return (
    table(['SERVICE PORT', 'FAMILY', 'TYPE', 'FRONTENDS', 'POLICY', 'ENDPOINTS', 'KERNEL'], rows) + syncLine(a.sync)
  );
}

function syncLine(s: SyncTimes): string {
  const fam = Object.keys(s.lastSync).sort();
  const last = fam.length > 0 ? fam.map((f) => `${f} ${s.lastSync[f]}`).join(', ') : 'never';
  const change =
    Object.keys(s.lastChange)
      .sort()
      .map((f) => `${f} ${s.lastChange[f]}`)
      .join(', ') || 'none';
  return `mode ${s.mode}; last sync: ${last}; last change: ${change}${s.pending ? '; changes pending (not synced yet)' : ''}\n`;
}

export function formatExplainPort(p: PortExplanation): string {
  const out: string[] = [`${p.id} (${p.family}, ${p.type})`, 'Frontends:'];
  for (const f of p.frontends)
    out.push(`  ${f.kind.padEnd(14)} ${f.kind === 'node-port' ? '<node address>' : f.address}:${f.port}/${p.protocol}`);
  if (p.sourceRanges.length > 0) out.push(`  source ranges  ${p.sourceRanges.join(', ')}`);
  const pol = p.policies;
  out.push('Policies:');
  out.push(
    `  internalTrafficPolicy ${pol.internalTrafficPolicy}${pol.externalTrafficPolicy ? `, externalTrafficPolicy ${pol.externalTrafficPolicy}` : ''}`,
  );
  out.push(
    `  sessionAffinity ${pol.sessionAffinity}${pol.sessionAffinity === 'ClientIP' ? ` (${pol.stickySeconds}s)` : ''}`,
  );
  out.push(
    `  topology ${pol.topology || 'none (all ready endpoints)'}${pol.healthCheckNodePort ? `, healthCheckNodePort ${pol.healthCheckNodePort}` : ''}`,
  );
  out.push(...balancingLines(p.loadBalancing));
  out.push('Endpoints:');
  if (p.endpoints.length === 0) out.push('  (none)');
  const rows = p.endpoints.map((e) => [
    e.endpoint,
    e.nodeName || '-',
    e.zone || '-',
    [e.ready ? 'ready' : 'not-ready', e.serving ? 'serving' : '', e.terminating ? 'terminating' : '']
      .filter(Boolean)
      .join(','),
    e.usedFor.length > 0 ? `used (${e.usedFor.join(', ')})` : `not used: ${e.notUsedBecause}`,
  ]);
  if (rows.length > 0) out.push(indent(table(['ENDPOINT', 'NODE', 'ZONE', 'CONDITIONS', 'CHOICE'], rows)));
  out.push(`Kernel (${p.kernel?.mode ?? 'n/a'}): ${kernelState(p)}`);
  if (p.kernel) {
    for (const e of p.kernel.kernel) out.push(`  ${e.where}: ${e.key}${e.value ? ` : ${e.value}` : ''}`);
    for (const e of p.kernel.drift.missing) out.push(`  MISSING ${e.where}: ${e.key}${e.value ? ` : ${e.value}` : ''}`);
    for (const e of p.kernel.drift.unexpected)
      out.push(`  UNEXPECTED ${e.where}: ${e.key}${e.value ? ` : ${e.value}` : ''}`);
  }
  return out.join('\n') + '\n';
}

function balancingLines(b: PortExplanation['loadBalancing']): string[] {
  if (!b) return [];
  const out = ['Load balancing:', `  ${b.algorithm} (${b.source}): ${b.picking}`];
  if (b.refused) out.push(`  refused ${b.refused}`);
  return out;
}

const indent = (s: string): string =>
  s
    .trimEnd()
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');

/** The first line of every answer: who answered. */
export function daemonLine(d: DaemonIdentity | undefined): string {
  if (!d) return 'daemon: (it did not say which node it serves: an older kube-proxy-ts)\n';
  return `daemon: node ${d.nodeName}, mode ${d.mode}, pid ${d.pid}, socket ${d.socket}\n`;
}

export function formatExplain(a: ExplainAnswer, one: boolean): string {
  if (!one) return daemonLine(a.daemon) + formatExplainTable(a);
  return daemonLine(a.daemon) + a.ports.map(formatExplainPort).join('\n') + syncLine(a.sync);
}

export function formatTrace(r: TraceResult & { readonly daemon?: DaemonIdentity }): string {
  const q = r.query;
  const out = [
    daemonLine(r.daemon).trimEnd(),
    `packet ${q.from}${q.fromPort ? `:${q.fromPort}` : ''} -> ${q.to}:${q.port}/${q.protocol}${q.inInterface ? ` in ${q.inInterface}` : ''}`,
  ];
  if (r.frontend) out.push(`frontend: ${r.frontend.kind} of ${r.frontend.id}`);
  out.push(`verdict: ${r.verdict.toUpperCase()}: ${r.reason}`);
  if (r.masquerade) out.push(`masquerade: ${r.masquerade.yes ? 'yes' : 'no'} (${r.masquerade.why})`);
  if (r.endpoints.length > 0) {
    out.push('endpoints:');
    for (const e of r.endpoints)
      out.push(
        `  ${e.endpoint.padEnd(22)} ${(e.probability * 100).toFixed(1).padStart(5)}%  ${e.nodeName || '-'}${e.hairpin ? '  (hairpin: masqueraded)' : ''}`,
      );
  }
  for (const n of r.notes) out.push(`note: ${n}`);
  return out.join('\n') + '\n';
}

/** What `trace --live` saw: the path of the first matching packet (live-trace/session.ts). */
export interface LiveAnswer {
  readonly seen: boolean;
  readonly waitedMs: number;
  readonly path: readonly {
    family: string;
    table: string;
    chain: string;
    type: string;
    ruleHandle?: number;
    verdict?: string;
  }[];
}

export function formatLive(l: LiveAnswer): string {
  if (!l.seen) return `live: no matching packet within ${(l.waitedMs / 1000).toFixed(1)} s\n`;
  const rows = l.path.map((e) => [
    `${e.family} ${e.table}`,
    e.chain,
    // A rule event without a handle is the end of a chain the packet fell through.
    e.type === 'rule' ? (e.ruleHandle !== undefined ? `rule ${e.ruleHandle}` : 'end of chain') : e.type,
    e.verdict ?? '',
  ]);
  return `live: the path of the next matching packet (nf_tables trace):\n${indent(table(['TABLE', 'CHAIN', 'BY', 'VERDICT'], rows))}\n`;
}
