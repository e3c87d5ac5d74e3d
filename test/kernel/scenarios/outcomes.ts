// What scenario functions report across the netns agent: plain data, never a thrown error.
import { NetlinkError } from '../../../src/netlink/core/index.ts';

export interface ErrorView {
  name: string;
  message: string;
  op?: string;
  code?: string;
}

export type Outcome<T = unknown> = { ok: true; value: T } | { ok: false; error: ErrorView };

/** A thrown value as data: NetlinkError's operation and errno name, else name and message. */
export const errorView = (e: unknown): ErrorView =>
  e instanceof NetlinkError
    ? { name: e.name, op: e.op, code: e.code, message: e.message }
    : { name: (e as Error).name, message: String((e as Error).message) };

/** The names of a client's methods. */
export type MethodOf<C> = { [K in keyof C]: C[K] extends (...a: never[]) => unknown ? K : never }[keyof C];

/** Runs client calls in order; each outcome is reported, none throws. */
export async function runClientCalls<C extends object>(
  client: C,
  list: readonly [MethodOf<C>, ...unknown[]][],
): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for (const [method, ...args] of list) {
    try {
      const fn = client[method] as (...a: unknown[]) => Promise<unknown>;
      out.push({ ok: true, value: (await fn.apply(client, args)) ?? null });
    } catch (e) {
      out.push({ ok: false, error: errorView(e) });
    }
  }
  return out;
}
