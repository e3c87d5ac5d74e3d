// The VM topology the IPVS proxier scenarios share (ipvs-proxier.ts, ipvs-local-policy.ts): the
// VM's root namespace is the node; namespace "pods" holds backends at 10.0.0.2.. answering TCP
// 8080 (ipvs-proxier-agent.mjs server), namespace "client" (192.168.7.2) holds an agent that
// makes connections on request.
//
//   client 192.168.7.2 ── vclient 192.168.7.1 node 10.0.0.1 vpods ── pods 10.0.0.2, 10.0.0.3, ...
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { ip } from './vm-shell.ts';

export const NODE_IP = '192.168.7.1';
const NODE_BIN = process.execPath;
const AGENT = new URL('./ipvs-proxier-agent.mjs', import.meta.url).pathname;

export class PodsAndClient {
  readonly children: ChildProcess[] = [];
  private client: ChildProcess | undefined;
  private readonly waiting = new Map<number, (v: Record<string, unknown>) => void>();
  private nextId = 1;

  /** Creates the namespaces and links, starts the backends (addresses `backends`) and the client agent. */
  async start(backends: readonly string[]): Promise<void> {
    await ip('netns', 'add', 'pods');
    await ip('netns', 'add', 'client');
    await ip('link', 'add', 'vpods', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'pods');
    await ip('link', 'add', 'vclient', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'client');
    await ip('addr', 'add', '10.0.0.1/24', 'dev', 'vpods');
    await ip('addr', 'add', `${NODE_IP}/24`, 'dev', 'vclient');
    await ip('link', 'set', 'vpods', 'up');
    await ip('link', 'set', 'vclient', 'up');
    for (const [ns, addrs, gw] of [
      ['pods', backends.map((a) => `${a}/24`), '10.0.0.1'],
      ['client', ['192.168.7.2/24'], NODE_IP],
    ] as const) {
      for (const a of addrs) await ip('-n', ns, 'addr', 'add', a, 'dev', 'eth0');
      await ip('-n', ns, 'link', 'set', 'eth0', 'up');
      await ip('-n', ns, 'link', 'set', 'lo', 'up');
      await ip('-n', ns, 'route', 'add', 'default', 'via', gw);
    }
    const server = spawn('/usr/sbin/ip', ['netns', 'exec', 'pods', NODE_BIN, AGENT, 'server', ...backends], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.children.push(server);
    const client = spawn('/usr/sbin/ip', ['netns', 'exec', 'client', NODE_BIN, AGENT, 'client'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    this.client = client;
    this.children.push(client);
    const ready = (c: ChildProcess, what: string) =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${what} did not start`)), 60_000);
        c.stdout!.once('data', () => {
          clearTimeout(t);
          resolve();
        });
      });
    await Promise.all([ready(server, 'backend server'), ready(client, 'client agent')]);
    readline.createInterface({ input: client.stdout! }).on('line', (l) => {
      const v = JSON.parse(l) as Record<string, unknown>;
      if (typeof v.id === 'number') this.waiting.get(v.id)?.(v);
    });
  }

  /** One request to the client agent ({ op: 'tcp' | 'udp', host, port, n }) and its answer. */
  ask(q: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`client agent did not answer ${JSON.stringify(q)}`)), 30_000);
      this.waiting.set(id, (v) => {
        clearTimeout(t);
        resolve(v);
      });
      this.client!.stdin!.write(JSON.stringify({ ...q, id }) + '\n');
    });
  }

  stop(): void {
    for (const c of this.children) c.kill();
  }
}
