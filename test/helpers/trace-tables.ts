// The tables `trace --live` arms tracing with, as `nft list tables` shows them in a namespace.
import { runDaemon } from './daemon-process.ts';
import type { Netns, NetnsAgent } from './netns.ts';

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

/** What `trace --live -o json` answered, its path as "table chain type verdict" lines. */
export interface LiveTrace {
  readonly code: number;
  readonly stderr: string;
  readonly seen: boolean;
  readonly path: string[];
}

/**
 * Runs `trace --live --from CLIENT --to VIP:PORT/tcp` against the daemon's control socket and,
 * once the trace table is armed, connects from the client until the CLI has seen a packet
 * (bounded: 100 tries). Earlier connections are not traced (the arming is not visible otherwise).
 */
export async function liveTraceOfConnect(
  node: Netns,
  client: NetnsAgent,
  q: { from: string; vip: string; port: number; sock: string; echo: string },
): Promise<LiveTrace> {
  let done = false;
  const args = ['trace', '--from', q.from, '--to', `${q.vip}:${q.port}/tcp`, '--live', '--live-timeout', '30'];
  const live = runDaemon(node, [...args, '-o', 'json', '--control-socket', q.sock], 60_000).finally(
    () => (done = true),
  );
  for (let i = 0; i < 100 && !done; i++) {
    if ((await traceTables(node)).length > 0) await client.call<string>(q.echo, 'tcp', q.vip, q.port);
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const r = await live;
  if (r.code !== 0) return { code: r.code, stderr: r.stderr, seen: false, path: [] };
  const answer = JSON.parse(r.stdout) as {
    live: { seen: boolean; path: { table: string; chain: string; type: string; verdict?: string }[] };
  };
  const path = answer.live.path.map((e) => `${e.table} ${e.chain} ${e.type} ${e.verdict ?? ''}`.trim());
  return { code: r.code, stderr: r.stderr, seen: answer.live.seen, path };
}
