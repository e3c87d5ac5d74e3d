// Scenario functions run inside a test namespace by the netns agent: they drive
// src/netlink/route against the machine's kernel and report results as plain data.
import { NetlinkError } from '../../../src/netlink/core/index.ts';
import { openRoute } from '../../../src/netlink/route/index.ts';
import type { RouteClient } from '../../../src/netlink/route/index.ts';

export interface ErrorView {
  name: string;
  message: string;
  op?: string;
  code?: string;
}
export type Outcome<T = unknown> = { ok: true; value: T } | { ok: false; error: ErrorView };

const view = (e: unknown): ErrorView =>
  e instanceof NetlinkError ? { name: e.name, message: e.message, op: e.op, code: e.code } : { name: (e as Error).name, message: String((e as Error).message) };

type Method = { [K in keyof RouteClient]: RouteClient[K] extends (...a: never[]) => unknown ? K : never }[keyof RouteClient];

export type Call = [Method, ...unknown[]];

/** Runs client calls in order; each outcome is reported, none throws. */
export async function runCalls(client: RouteClient, list: Call[]): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for (const [method, ...args] of list) {
    try {
      const fn = client[method] as (...a: unknown[]) => Promise<unknown>;
      out.push({ ok: true, value: (await fn.apply(client, args)) ?? null });
    } catch (e) {
      out.push({ ok: false, error: view(e) });
    }
  }
  return out;
}

/** runCalls on a fresh connection in this namespace (the agent's). */
export async function calls(list: Call[]): Promise<Outcome[]> {
  const { client, close } = openRoute({ timeoutMs: 10_000 });
  try {
    return await runCalls(client, list);
  } finally {
    close();
  }
}
