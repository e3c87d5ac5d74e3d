// Runs inside a test namespace (netns agent): listens to rtnetlink's link and address
// announcements (src/netlink/route/monitor.ts) while a RouteClient on a socket of its own
// adds and removes addresses and a link, and `ip` (another process) does the same; reports
// what was announced, with the client's port id.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connectWithPort, Protocol } from '../../../src/netlink/core/index.ts';
import { monitorRoute, RouteClient } from '../../../src/netlink/route/index.ts';
import type { RouteChange } from '../../../src/netlink/route/index.ts';

export interface Announced {
  ourPort: number;
  changes: RouteChange[];
  overflows: number;
  errors: string[];
}

const ip = (...a: string[]): void => void execFileSync('ip', a);

export async function announce(): Promise<Announced> {
  // As route.ts: DAD off, so the IPv6 address is usable at once (ifb stands in for dummy).
  for (const conf of ['all', 'default']) writeFileSync(`/proc/sys/net/ipv6/conf/${conf}/accept_dad`, '0');
  const changes: RouteChange[] = [];
  const errors: string[] = [];
  let overflows = 0;
  const listener = monitorRoute({
    onChange: (c) => changes.push(c),
    onOverflow: () => overflows++,
    onError: (e) => errors.push(e.message),
  });
  const { conn, port } = connectWithPort(Protocol.ROUTE, { timeoutMs: 10_000 });
  try {
    const client = new RouteClient(conn);
    const link = await client.createLink('kube-ipvs0', 'ifb');
    await client.addAddresses(link.index, ['10.96.0.1', '10.96.0.2', 'fd00:96::1']);
    await client.deleteAddresses(link.index, ['10.96.0.1', 'fd00:96::1']);
    ip('addr', 'del', '10.96.0.2/32', 'dev', 'kube-ipvs0');
    ip('addr', 'add', '10.96.0.3/32', 'dev', 'kube-ipvs0');
    ip('link', 'del', 'kube-ipvs0');
    // The announcements are read from the socket asynchronously: wait (bounded) for the last one.
    const end = Date.now() + 5_000;
    while (!changes.some((c) => c.kind === 'link' && !c.added) && Date.now() < end)
      await new Promise((r) => setTimeout(r, 20));
    return { ourPort: port, changes, overflows, errors };
  } finally {
    conn.close();
    listener.close();
  }
}
