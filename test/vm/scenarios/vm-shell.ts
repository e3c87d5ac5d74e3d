// Tools run from a VM scenario (inside the QEMU guest): exit code and output of a program, the
// same that throws on failure, and `ipvsadm -Ln` as comparable lines.
import { execFile } from 'node:child_process';

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program; never throws: a failure is its exit code (1 when it has none) and message. */
export function run(
  cmd: string,
  args: readonly string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? 60_000, encoding: 'utf8', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr: stderr || (err ? err.message : '') });
      },
    );
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/** Runs a program and returns its output; throws naming the command when it fails. */
export async function must(cmd: string, ...args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

export const ip = (...a: string[]): Promise<string> => must('/usr/sbin/ip', ...a);

/**
 * `ipvsadm -Ln` output as lines, trimmed and squeezed, headers and blank lines dropped; with
 * `counters: false` a real server's line stops at its weight ("-> 10.0.0.2:8080 Masq 1").
 */
export function ipvsadmLines(out: string, o: { counters?: boolean } = {}): string[] {
  const lines = out
    .split('\n')
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .filter(
      (l) =>
        l &&
        !l.startsWith('IP Virtual Server') &&
        !l.startsWith('Prot LocalAddress') &&
        !l.startsWith('-> RemoteAddress'),
    );
  return o.counters === false ? lines.map((l) => (l.startsWith('->') ? l.split(' ').slice(0, 4).join(' ') : l)) : lines;
}
