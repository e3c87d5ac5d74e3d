// `kube-proxy-ts profile cpu|heap`: asks a daemon started with --profiling for a CPU profile
// (sampled for --seconds) or a heap snapshot, written by the daemon to the file --output names
// (default: a new file in the current directory). Exit codes as explain and trace: 0 written,
// 1 the daemon refused (profiling off, file exists), 2 bad usage, 3 no daemon to ask.

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { errorMessage } from '../base/errors.ts';
import { DEFAULT_CONTROL_SOCKET } from '../config/index.ts';
import { askDaemon, NoDaemonError } from '../control/client.ts';

const USAGE = `Usage:
  kube-proxy-ts profile cpu [--seconds N] [--output FILE] [--control-socket PATH]
      Samples the daemon's CPU for N seconds (default 30, at most 300) and writes a
      .cpuprofile (Chrome DevTools, speedscope).
  kube-proxy-ts profile heap [--output FILE] [--control-socket PATH]
      Writes a V8 heap snapshot (.heapsnapshot, DevTools' Memory panel); the daemon pauses
      while it is written.
The daemon must run with --profiling (enableProfiling: true); it writes FILE itself (a new
file, mode 0600). The control socket is root only (default ${DEFAULT_CONTROL_SOCKET}).
`;

/** The options, as parseArgs takes them; the completion script offers the same. */
export const PROFILE_OPTIONS = {
  seconds: { type: 'string', default: '30' },
  output: { type: 'string', short: 'o' },
  'control-socket': { type: 'string', default: DEFAULT_CONTROL_SOCKET },
  help: { type: 'boolean', short: 'h' },
} as const;

class UsageError extends Error {}

function request(
  argv: readonly string[],
  now: Date,
): { query: Record<string, unknown>; socket: string; waitMs: number } | 'help' {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: PROFILE_OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(errorMessage(e));
  }
  const { values, positionals } = parsed;
  if (values.help === true) return 'help';
  const [kind, ...extra] = positionals;
  if ((kind !== 'cpu' && kind !== 'heap') || extra.length > 0) throw new UsageError('profile takes cpu or heap');
  const seconds = Number(values.seconds);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 300)
    throw new UsageError(`--seconds must be a whole number 1-300, not ${values.seconds}`);
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  const file = values.output ?? `kube-proxy-ts-${stamp}.${kind === 'cpu' ? 'cpuprofile' : 'heapsnapshot'}`;
  const query = { op: 'profile', kind, path: resolve(file), ...(kind === 'cpu' ? { seconds } : {}) };
  // The answer comes after the sampling; a snapshot of a large heap takes a while to write.
  return { query, socket: values['control-socket'], waitMs: (kind === 'cpu' ? seconds * 1000 : 0) + 120_000 };
}

export async function runProfile(
  argv: readonly string[],
  deps: { stdout?: (s: string) => void; stderr?: (s: string) => void; now?: () => Date } = {},
): Promise<number> {
  const out = deps.stdout ?? ((s: string) => void process.stdout.write(s));
  const err = deps.stderr ?? ((s: string) => void process.stderr.write(s));
  try {
    const r = request(argv, (deps.now ?? (() => new Date()))());
    if (r === 'help') {
      out(USAGE);
      return 0;
    }
    const a = (await askDaemon(r.socket, r.query, r.waitMs)) as { path: string; bytes: number };
    out(`wrote ${a.path} (${a.bytes} bytes)\n`);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`kube-proxy-ts profile: ${e.message}\n${USAGE}`);
      return 2;
    }
    err(`kube-proxy-ts profile: ${errorMessage(e)}\n`);
    return e instanceof NoDaemonError ? 3 : 1;
  }
}
