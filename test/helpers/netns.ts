// Network namespaces for kernel tests. Each test makes its own, uniquely named, and removes
// it in teardown even when the test fails. Nothing here touches the root namespace.
//
// Node cannot enter a namespace itself (no setns), so code that must run inside one runs in
// a child process started through `ip netns exec`: either a command (exec) or a long-lived
// agent that imports test modules and calls their exported functions (agent).

import { execFile, fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SYSTEM_DIRS = ['/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/**
 * The absolute path of a system tool. npm puts node_modules/.bin first on PATH, and it holds
 * look-alikes (ava depends on @vercel/nft, whose CLI is called `nft`), so tests never rely
 * on PATH for the independent readers.
 */
export function systemTool(name: string): string {
  if (name.includes('/')) return name;
  for (const dir of SYSTEM_DIRS) {
    try {
      accessSync(`${dir}/${name}`, fsConstants.X_OK);
      return `${dir}/${name}`;
    } catch {
      // try the next directory
    }
  }
  throw new Error(`${name} is not installed in ${SYSTEM_DIRS.join(':')}: run scripts/setup.sh`);
}

const PREFIX = 'kpts';
let counter = 0;

export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number;
}

function execRaw(cmd: string, args: readonly string[], timeoutMs = 30_000, input?: string): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = execFile(
      systemTool(cmd),
      args,
      { timeout: timeoutMs, maxBuffer: 256 << 20, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ stdout, stderr: err && !stderr ? String(err.message) : stderr, code });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** Runs a command in the root namespace, for set-up steps such as `ip netns add`. Throws on failure. */
export async function sh(cmd: string, ...args: string[]): Promise<string> {
  const r = await execRaw(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Namespaces that the process `pid` created through Netns.create (named by PREFIX and pid), still present. */
export async function namespacesOfProcess(pid: number): Promise<string[]> {
  return (await sh('ip', 'netns', 'list'))
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(`${PREFIX}-${pid}-`));
}

export class Netns {
  readonly name: string;
  private agents: NetnsAgent[] = [];

  private constructor(name: string) {
    this.name = name;
  }

  static async create(label: string): Promise<Netns> {
    const name = `${PREFIX}-${process.pid}-${++counter}-${label}`.slice(0, 60);
    await sh('ip', 'netns', 'add', name);
    const ns = new Netns(name);
    await ns.run('ip', 'link', 'set', 'lo', 'up');
    return ns;
  }

  /** Runs a command inside the namespace; never throws, returns the exit code. */
  exec(
    cmd: string,
    args: readonly string[] = [],
    opts: { timeoutMs?: number; input?: string } = {},
  ): Promise<ExecResult> {
    const resolved = cmd === process.execPath ? cmd : systemTool(cmd);
    return execRaw('ip', ['netns', 'exec', this.name, resolved, ...args], opts.timeoutMs, opts.input);
  }

  /** Runs a command inside the namespace and returns its stdout; throws on a non-zero exit. */
  async run(cmd: string, ...args: string[]): Promise<string> {
    const r = await this.exec(cmd, args);
    if (r.code !== 0) throw new Error(`[${this.name}] ${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /**
   * The namespace's nf_tables ruleset as `nft -j` sees it (an independent reader). `nft`: the
   * binary, Debian's by default (test/kernel/nft-binaries.ts lists the others).
   */
  async nftJson(nft = 'nft'): Promise<NftJsonObject[]> {
    const out = await this.run(nft, '-j', 'list', 'ruleset');
    // nft 1.0.6 prints nothing at all for an empty ruleset.
    if (out.trim() === '') return [];
    return (JSON.parse(out) as { nftables: NftJsonObject[] }).nftables.filter((o) => !('metainfo' in o));
  }

  /** Starts a Node process inside the namespace that runs exported functions on request. */
  async agent(nodeArgs: readonly string[] = []): Promise<NetnsAgent> {
    const a = await NetnsAgent.start(this.name, nodeArgs);
    this.agents.push(a);
    return a;
  }

  async destroy(): Promise<void> {
    for (const a of this.agents) a.kill();
    this.agents = [];
    await execRaw('ip', ['netns', 'del', this.name]);
  }
}

export type NftJsonObject = Record<string, Record<string, unknown>>;

/** A test-scoped namespace, removed when the test ends whatever its outcome. */
export async function netnsFor(t: { teardown(fn: () => Promise<void> | void): void }, label: string): Promise<Netns> {
  const ns = await Netns.create(label);
  t.teardown(() => ns.destroy());
  return ns;
}

interface AgentReply {
  id: number;
  ok: boolean;
  value?: unknown;
  error?: { name: string; message: string; code?: string; errno?: number; stack?: string };
}

/**
 * A child Node process inside a namespace. call(moduleUrl, fn, ...args) imports the module
 * there and awaits the export; arguments and results travel as JSON-compatible values
 * (structured clone via advanced serialization, so Uint8Array and Map work too).
 */
export class NetnsAgent {
  private readonly child: ChildProcess;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private exitError: Error | undefined;

  private constructor(child: ChildProcess) {
    this.child = child;
    child.on('message', (raw) => {
      const m = raw as AgentReply;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(Object.assign(new Error(m.error?.message ?? 'agent call failed'), m.error ?? {}));
    });
    child.on('exit', (code, signal) => {
      this.exitError = new Error(`netns agent exited (code ${code}, signal ${signal})`);
      for (const p of this.pending.values()) p.reject(this.exitError);
      this.pending.clear();
    });
  }

  /** `nodeArgs`: options for that Node (e.g. the daemon's V8 flags, for a measured process). */
  static async start(ns: string, nodeArgs: readonly string[] = []): Promise<NetnsAgent> {
    const script = fileURLToPath(new URL('./netns-agent.ts', import.meta.url));
    // fork() runs: execPath ...execArgv script; so this is `ip netns exec NS node script`
    // with the IPC channel inherited across the exec.
    const child = fork(script, [], {
      execPath: systemTool('ip'),
      execArgv: ['netns', 'exec', ns, process.execPath, ...nodeArgs],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const agent = new NetnsAgent(child);
    await agent.call(new URL('./netns-agent.ts', import.meta.url).href, 'ping');
    return agent;
  }

  call<T = unknown>(moduleUrl: string, fn: string, ...args: unknown[]): Promise<T> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ id, moduleUrl, fn, args });
    });
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}
