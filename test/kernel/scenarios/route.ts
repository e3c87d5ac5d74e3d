// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/route against the machine's kernel and report results as plain data.
import { writeFileSync } from 'node:fs';
import { openRoute } from '../../../src/netlink/route/index.ts';
import type { RouteClient } from '../../../src/netlink/route/index.ts';
import { runClientCalls } from './outcomes.ts';
import type { ErrorView, MethodOf, Outcome } from './outcomes.ts';

export type { ErrorView, Outcome };

export type Call = [MethodOf<RouteClient>, ...unknown[]];

/** Runs client calls in order; each outcome is reported, none throws. */
export const runCalls = (client: RouteClient, list: Call[]): Promise<Outcome[]> => runClientCalls(client, list);

/** runCalls on a fresh connection in this namespace (the agent's). */
export async function calls(list: Call[]): Promise<Outcome[]> {
  // This kernel has no dummy links, so the scripts use ifb in its place. A dummy link is NOARP
  // and never runs IPv6 duplicate address detection; ifb does, and whether a new address still
  // shows IFA_F_TENTATIVE when listed would then depend on timing. DAD off in this namespace
  // (its own /proc/sys/net) makes ifb behave as kube-ipvs0 does.
  for (const conf of ['all', 'default']) writeFileSync(`/proc/sys/net/ipv6/conf/${conf}/accept_dad`, '0');
  const { client, close } = openRoute({ timeoutMs: 10_000 });
  try {
    return await runCalls(client, list);
  } finally {
    close();
  }
}
