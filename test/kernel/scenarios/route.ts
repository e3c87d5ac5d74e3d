// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/route against the machine's kernel and report results as plain data.
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
  const { client, close } = openRoute({ timeoutMs: 10_000 });
  try {
    return await runCalls(client, list);
  } finally {
    close();
  }
}
