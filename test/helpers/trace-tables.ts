// The tables `trace --live` arms tracing with, as `nft list tables` shows them in a namespace.
import type { Netns } from './netns.ts';

/** "ip kube-proxy-ts-trace-<pid>-<start>-<n>" for each trace --live table (and the earlier shared one). */
export async function traceTables(ns: Netns): Promise<string[]> {
  const out = await ns.run('nft', 'list', 'tables');
  return out
    .split('\n')
    .map((l) => /^table (ip6?) (kube-proxy-ts-trace\S*)$/.exec(l.trim()))
    .filter((m) => m !== null)
    .map((m) => `${m[1]} ${m[2]}`)
    .sort();
}
