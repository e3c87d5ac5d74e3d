// Runs inside a network namespace (see netns.ts): imports a module, calls an export, replies.
// The process exits when its parent disconnects, so it can never outlive the test.

interface Call {
  id: number;
  moduleUrl: string;
  fn: string;
  args: unknown[];
}

export function ping(): string {
  return 'pong';
}

process.on('disconnect', () => process.exit(0));
process.on('message', (raw) => {
  const call = raw as Call;
  void (async () => {
    try {
      const mod = (await import(call.moduleUrl)) as Record<string, unknown>;
      const f = mod[call.fn];
      if (typeof f !== 'function') throw new Error(`${call.moduleUrl} has no exported function ${call.fn}`);
      const value: unknown = await (f as (...a: unknown[]) => unknown)(...call.args);
      process.send?.({ id: call.id, ok: true, value });
    } catch (err) {
      const e = err as Error & { code?: string; errno?: number };
      process.send?.({
        id: call.id,
        ok: false,
        error: { name: e.name, message: e.message, code: e.code, errno: e.errno, stack: e.stack },
      });
    }
  })();
});

/** The inode of this process's network namespace, to check where the agent runs. */
export async function netnsId(): Promise<string> {
  const { readlink } = await import('node:fs/promises');
  return readlink('/proc/self/ns/net');
}
