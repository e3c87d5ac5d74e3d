// The real daemon (bin/kube-proxy-ts.js) as a child process inside a test namespace, for
// kernel tests and the demo. `ip netns exec` enters the namespace and execs Node, so the
// child's pid is the daemon's own and signals reach it directly. Never the root namespace.

import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecResult, Netns } from './netns.ts';
import { systemTool } from './netns.ts';

export const BIN = fileURLToPath(new URL('../../bin/kube-proxy-ts.js', import.meta.url));

export interface DaemonProcess {
  readonly pid: number;
  /** Everything it logged so far (stderr). */
  log(): string;
  /** Resolves when it exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(sig: NodeJS.Signals): void;
  /** SIGKILL if still running, and wait for the exit. */
  kill(): Promise<void>;
}

let sockets = 0;

/** `command`: what runs the daemon instead of this Node on bin/kube-proxy-ts.js (the image's root). */
export function spawnDaemon(
  ns: Netns,
  args: readonly string[],
  opts: { onLog?: (line: string) => void; env?: NodeJS.ProcessEnv; command?: readonly string[] } = {},
): DaemonProcess {
  const command = opts.command ?? [process.execPath, BIN];
  // The control socket is a file (not of the namespace): each test daemon gets its own, never the host's /run one.
  const socketPath = args.includes('--control-socket')
    ? undefined
    : join(tmpdir(), `kpts-control-${process.pid}-${++sockets}.sock`);
  const control = socketPath === undefined ? [] : ['--control-socket', socketPath];
  const child = spawn(systemTool('ip'), ['netns', 'exec', ns.name, ...command, ...args, ...control], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}),
  });
  let text = '';
  let partial = '';
  const take = (d: Buffer): void => {
    const s = d.toString();
    text += s;
    if (!opts.onLog) return;
    partial += s;
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) opts.onLog(l);
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      // A daemon that was killed (SIGKILL) never removed its socket file; the helper made the path, so it removes it.
      if (socketPath !== undefined) rmSync(socketPath, { force: true });
      resolve({ code, signal });
    }),
  );
  return {
    pid: child.pid ?? -1,
    log: () => text,
    exited,
    signal: (sig) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs the daemon to completion (--cleanup, --version ...) inside the namespace. */
export function runDaemon(ns: Netns, args: readonly string[], timeoutMs = 30_000): Promise<ExecResult> {
  return ns.exec(process.execPath, [BIN, ...args], { timeoutMs });
}

/** Polls `f` until it returns a value that is not undefined, or fails after timeoutMs. */
export async function pollUntil<T>(
  what: string,
  f: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
