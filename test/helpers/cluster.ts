// A throwaway namespace "cluster" for real-packet tests: a node where the proxy programs
// its rules, pods behind it (one namespace each, answering with their name and the peer
// they saw), and an external client. Everything is removed in teardown.
//
//   client 10.1.0.2 ──── 10.1.0.1 node 10.244.i.1 ──── 10.244.i.2 pod-i      (i = 1..n)
//                                  node 10.9.0.1  ──── 10.9.0.2  gw
//
// The node routes between them (ip_forward). Its default route points at `gw`, a dead end
// standing for the upstream router: traffic to a service address the rules do not take
// leaves through the node's forward hook as on a real node (a default route back towards
// the client would make a routing loop instead).

import type { NetnsAgent } from './netns.ts';
import { Netns } from './netns.ts';

export const ECHO = new URL('../kernel/scenarios/echo.ts', import.meta.url).href;
export const BACKEND_PORT = 8080;

export interface Cluster {
  node: Netns;
  client: Netns;
  pods: Netns[];
  /** The upstream router (a dead end unless a test gives it routes and listeners). */
  gw: Netns;
  /** Agents: one in the node (runs the proxier), one in the client, one per pod. */
  nodeAgent: NetnsAgent;
  clientAgent: NetnsAgent;
  podAgents: NetnsAgent[];
  podIP(i: number): string;
  destroy(): Promise<void>;
}

export const NODE_IP = '10.1.0.1';
export const CLIENT_IP = '10.1.0.2';
export const podIP = (i: number): string => `10.244.${i + 1}.2`;
export const podGateway = (i: number): string => `10.244.${i + 1}.1`;
// IPv6 twins of the same links.
export const NODE_IP6 = 'fd01::1';
export const CLIENT_IP6 = 'fd01::2';
export const podIP6 = (i: number): string => `fd44:${i + 1}::2`;
export const podGateway6 = (i: number): string => `fd44:${i + 1}::1`;

/** `nodeAgentArgs`: Node options for the node namespace's agent (the process a benchmark measures). */
export async function makeCluster(
  t: { teardown(fn: () => Promise<void>): void },
  label: string,
  pods = 3,
  nodeAgentArgs: readonly string[] = [],
): Promise<Cluster> {
  const made: Netns[] = [];
  const destroy = async (): Promise<void> => {
    for (const ns of made) await ns.destroy();
  };
  t.teardown(destroy);
  const node = await Netns.create(`${label}-node`);
  made.push(node);
  const client = await Netns.create(`${label}-cl`);
  made.push(client);
  await node.run('ip', 'link', 'add', 'to-client', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', client.name);
  await node.run('ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'to-client');
  await node.run('ip', 'link', 'set', 'to-client', 'up');
  await client.run('ip', 'addr', 'add', `${CLIENT_IP}/24`, 'dev', 'eth0');
  await client.run('ip', 'link', 'set', 'eth0', 'up');
  await client.run('ip', 'route', 'add', 'default', 'via', NODE_IP);
  // IPv6 too (nodad: usable at once).
  await node.run('ip', '-6', 'addr', 'add', `${NODE_IP6}/64`, 'dev', 'to-client', 'nodad');
  await client.run('ip', '-6', 'addr', 'add', `${CLIENT_IP6}/64`, 'dev', 'eth0', 'nodad');
  await client.run('ip', '-6', 'route', 'add', 'default', 'via', NODE_IP6);
  const gw = await Netns.create(`${label}-gw`);
  made.push(gw);
  await node.run('ip', 'link', 'add', 'to-gw', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', gw.name);
  await node.run('ip', 'addr', 'add', '10.9.0.1/24', 'dev', 'to-gw');
  await node.run('ip', 'link', 'set', 'to-gw', 'up');
  await gw.run('ip', 'addr', 'add', '10.9.0.2/24', 'dev', 'eth0');
  await gw.run('ip', 'link', 'set', 'eth0', 'up');
  await node.run('ip', 'route', 'add', 'default', 'via', '10.9.0.2');
  await node.run('ip', '-6', 'addr', 'add', 'fd09::1/64', 'dev', 'to-gw', 'nodad');
  await gw.run('ip', '-6', 'addr', 'add', 'fd09::2/64', 'dev', 'eth0', 'nodad');
  await node.run('ip', '-6', 'route', 'add', 'default', 'via', 'fd09::2');
  await node.run('sysctl', '-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1');
  const podNs: Netns[] = [];
  for (let i = 0; i < pods; i++) {
    const pod = await Netns.create(`${label}-p${i + 1}`);
    made.push(pod);
    podNs.push(pod);
    await node.run('ip', 'link', 'add', `pod${i + 1}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod.name);
    await node.run('ip', 'addr', 'add', `${podGateway(i)}/24`, 'dev', `pod${i + 1}`);
    await node.run('ip', 'link', 'set', `pod${i + 1}`, 'up');
    await pod.run('ip', 'addr', 'add', `${podIP(i)}/24`, 'dev', 'eth0');
    await pod.run('ip', 'link', 'set', 'eth0', 'up');
    await pod.run('ip', 'route', 'add', 'default', 'via', podGateway(i));
    await node.run('ip', '-6', 'addr', 'add', `${podGateway6(i)}/64`, 'dev', `pod${i + 1}`, 'nodad');
    await pod.run('ip', '-6', 'addr', 'add', `${podIP6(i)}/64`, 'dev', 'eth0', 'nodad');
    await pod.run('ip', '-6', 'route', 'add', 'default', 'via', podGateway6(i));
  }
  const [nodeAgent, clientAgent, ...podAgents] = await Promise.all([
    node.agent(nodeAgentArgs),
    client.agent(),
    ...podNs.map((p) => p.agent()),
  ]);
  await Promise.all(podAgents.map((a, i) => a!.call(ECHO, 'serve', `pod${i + 1}`, BACKEND_PORT)));
  return {
    node,
    client,
    pods: podNs,
    gw,
    nodeAgent: nodeAgent!,
    clientAgent: clientAgent!,
    podAgents: podAgents as NetnsAgent[],
    podIP,
    destroy,
  };
}
