// The operator's subcommands, `kube-proxy-ts explain` and `kube-proxy-ts trace`: they parse
// their own flags, ask the running daemon over its control socket and print the answer as
// text (default) or JSON. Exit codes: 0 answered, 1 the daemon refused the query, 2 bad
// usage, 3 no daemon to ask, 4 the daemon of another node answered (--node).

import { errorMessage } from '../base/errors.ts';
import { parseArgs } from 'node:util';
import { DEFAULT_CONTROL_SOCKET } from '../config/index.ts';
import { wrapText } from '../config/flags.ts';
import { askDaemon, NoDaemonError } from '../control/client.ts';
import { formatExplain, formatLive, formatTrace } from '../explain/format.ts';
import type { LiveAnswer } from '../explain/format.ts';
import type { DaemonIdentity, ExplainAnswer } from '../explain/format.ts';
import type { TraceResult } from '../explain/trace.ts';
import { AddressError, parseFrom, parseTo } from './endpoints.ts';

export const SUBCOMMANDS: readonly string[] = ['explain', 'trace'];

export interface CliDeps {
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
}

const SOCKET_NOTE =
  `The daemon answers on its control socket (root only; default ${DEFAULT_CONTROL_SOCKET}). ` +
  'The first line names the daemon that answered (node, mode, pid, socket). The socket is a file, so a ' +
  'network namespace does not scope it: --node NAME (or --hostname-override NAME) refuses the daemon of ' +
  'another node (exit 4).';

/** A usage text: the synopsis lines as written, the prose wrapped to 80 columns. */
const usage = (synopsis: string, prose: string): string =>
  `${synopsis}\n${wrapText(`${prose} ${SOCKET_NOTE}`, 78)
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n')}\n`;

/** Each command's usage: its --help, and what follows a usage error of that command. */
const USAGE: Readonly<Record<string, string>> = {
  explain: usage(
    'Usage: kube-proxy-ts explain [NAMESPACE/NAME[:PORT]] [--output table|json]\n' +
      '                             [--control-socket PATH] [--node NAME]',
    'A Service port (or every one, as a table): frontends, policies, the endpoints this node chose and why ' +
      'the others were not, what the kernel holds for it and whether that is what the last sync wrote ' +
      '(drift), and the last sync and change times.',
  ),
  trace: usage(
    'Usage: kube-proxy-ts trace --from IP[:PORT] --to IP:PORT[/PROTO]\n' +
      '                           [--in-interface IF] [--output table|json]\n' +
      '                           [--live [--live-timeout SECONDS]]\n' +
      '                           [--control-socket PATH] [--node NAME]',
    'What a packet would meet in the mode that runs: the frontend it hits, masqueraded or not and why, the ' +
      'endpoints it may reach and with which probability, or why it is dropped, rejected or left untouched. ' +
      '--live also arms nf_tables tracing for such packets (sending nothing) and prints the real path of the ' +
      'next one, waiting at most --live-timeout seconds (default 10, max 60).',
  ),
};

class UsageError extends Error {}

/** The daemon on the socket serves another node than --node / --hostname-override names. */
class WrongDaemonError extends Error {}

/** --node or --hostname-override (lower-cased and trimmed, as the daemon names its node); undefined: any daemon. */
function expectedNode(values: {
  node?: string | undefined;
  'hostname-override'?: string | undefined;
}): string | undefined {
  const a = values.node?.trim().toLowerCase();
  const b = values['hostname-override']?.trim().toLowerCase();
  if (a !== undefined && b !== undefined && a !== b)
    throw new UsageError(`--node ${values.node} and --hostname-override ${values['hostname-override']} differ`);
  const want = a ?? b;
  if (want === '') throw new UsageError('--node needs a node name');
  return want;
}

/** Asks the daemon who it is, and refuses one of another node before the query is sent. */
async function checkNode(socket: string, want: string | undefined): Promise<void> {
  if (want === undefined) return;
  const d = ((await askDaemon(socket, { op: 'ping' })) as { daemon?: DaemonIdentity }).daemon;
  if (!d)
    throw new WrongDaemonError(
      `the daemon on ${socket} does not say which node it serves (an older kube-proxy-ts); not asking it`,
    );
  if (d.nodeName !== want)
    throw new WrongDaemonError(
      `the daemon on ${socket} serves node ${d.nodeName} (mode ${d.mode}, pid ${d.pid}), not ${want}: is this the right --control-socket?`,
    );
}

/** The options of explain and trace (also what `completion` offers). */
export const CLI_OPTIONS = {
  output: { type: 'string', short: 'o', default: 'table' },
  'control-socket': { type: 'string', default: DEFAULT_CONTROL_SOCKET },
  from: { type: 'string' },
  to: { type: 'string' },
  'in-interface': { type: 'string' },
  live: { type: 'boolean' },
  'live-timeout': { type: 'string', default: '10' },
  'hostname-override': { type: 'string' },
  node: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: CLI_OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    // node:util's texts run on about escaping with '--'; the first sentence is the point.
    const unknown = /^Unknown option '([^']+)'/.exec(errorMessage(e));
    throw new UsageError(unknown ? `unknown flag ${unknown[1]}` : errorMessage(e).split('. ')[0]!);
  }
}

export async function runCli(argv: readonly string[], deps: CliDeps = {}): Promise<number> {
  const out = deps.stdout ?? ((s: string) => void process.stdout.write(s));
  const err = deps.stderr ?? ((s: string) => void process.stderr.write(s));
  const [command, ...rest] = argv;
  try {
    const { values, positionals } = parse(rest);
    if (values.help === true) {
      out(USAGE[command!]!);
      return 0;
    }
    const output = values.output;
    if (output !== 'table' && output !== 'json') throw new UsageError(`--output must be table or json, not ${output}`);
    const socket = values['control-socket'];
    const want = expectedNode(values);
    if (command === 'explain') {
      if (positionals.length > 1)
        throw new UsageError(`explain takes one NAMESPACE/NAME[:PORT], not ${positionals.join(' ')}`);
      if (values.from !== undefined || values.to !== undefined || values['in-interface'] !== undefined)
        throw new UsageError('--from, --to and --in-interface belong to trace');
      const target = positionals[0];
      await checkNode(socket, want);
      const answer = (await askDaemon(socket, {
        op: 'explain',
        ...(target !== undefined ? { target } : {}),
      })) as ExplainAnswer;
      out(output === 'json' ? `${JSON.stringify(answer, null, 2)}\n` : formatExplain(answer, target !== undefined));
      return 0;
    }
    if (positionals.length > 0) throw new UsageError(`trace takes flags only, not ${positionals.join(' ')}`);
    if (values.from === undefined || values.to === undefined)
      throw new UsageError('trace needs --from IP[:PORT] and --to IP:PORT[/PROTO]');
    const from = parseFrom(values.from);
    const to = parseTo(values.to);
    const iface = values['in-interface'];
    const liveSeconds = Number(values['live-timeout']);
    if (!(liveSeconds > 0 && liveSeconds <= 60))
      throw new UsageError(`--live-timeout must be 1-60 seconds, not ${values['live-timeout']}`);
    const live = values.live === true ? { live: { timeoutMs: Math.round(liveSeconds * 1000) } } : {};
    const query = {
      op: 'trace',
      ...live,
      from: from.ip,
      ...(from.port !== undefined ? { fromPort: from.port } : {}),
      to: to.ip,
      port: to.port,
      protocol: to.protocol,
      ...(iface !== undefined ? { inInterface: iface } : {}),
    };
    await checkNode(socket, want);
    const result = (await askDaemon(
      socket,
      query,
      values.live === true ? liveSeconds * 1000 + 15_000 : undefined,
    )) as TraceResult & { live?: LiveAnswer; daemon?: DaemonIdentity };
    out(
      output === 'json'
        ? `${JSON.stringify(result, null, 2)}\n`
        : formatTrace(result) + (result.live ? formatLive(result.live) : ''),
    );
    return 0;
  } catch (e) {
    if (e instanceof UsageError || e instanceof AddressError) {
      err(`kube-proxy-ts ${command}: ${e.message}\n${USAGE[command!]!}`);
      return 2;
    }
    if (e instanceof WrongDaemonError) {
      err(`kube-proxy-ts ${command}: ${e.message}\n`);
      return 4;
    }
    if (e instanceof NoDaemonError) {
      err(`kube-proxy-ts ${command}: ${e.message}\n`);
      return 3;
    }
    err(`kube-proxy-ts ${command}: ${errorMessage(e)}\n`);
    return 1;
  }
}

export { UsageError };
