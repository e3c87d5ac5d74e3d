// The operator's subcommands, `kube-proxy-ts explain` and `kube-proxy-ts trace`: they parse
// their own flags, ask the running daemon over its control socket and print the answer as
// text (default) or JSON. Exit codes: 0 answered, 1 the daemon refused the query, 2 bad
// usage, 3 no daemon to ask.

import { errorMessage } from '../base/errors.ts';
import { parseArgs } from 'node:util';
import { DEFAULT_CONTROL_SOCKET } from '../config/index.ts';
import { wrapText } from '../config/flags.ts';
import { askDaemon, NoDaemonError } from '../control/client.ts';
import { formatExplain, formatLive, formatTrace } from '../explain/format.ts';
import type { LiveAnswer } from '../explain/format.ts';
import type { ExplainAnswer } from '../explain/format.ts';
import type { TraceResult } from '../explain/trace.ts';
import { AddressError, parseFrom, parseTo } from './endpoints.ts';

export const SUBCOMMANDS: readonly string[] = ['explain', 'trace'];

export interface CliDeps {
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
}

const SOCKET_NOTE = `The daemon answers on its control socket (root only; default ${DEFAULT_CONTROL_SOCKET}).`;

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
      '                             [--control-socket PATH]',
    'A Service port (or every one, as a table): frontends, policies, the endpoints this node chose and why ' +
      'the others were not, what the kernel holds for it and whether that is what the last sync wrote ' +
      '(drift), and the last sync and change times.',
  ),
  trace: usage(
    'Usage: kube-proxy-ts trace --from IP[:PORT] --to IP:PORT[/PROTO]\n' +
      '                           [--in-interface IF] [--output table|json]\n' +
      '                           [--live [--live-timeout SECONDS]]\n' +
      '                           [--control-socket PATH]',
    'What a packet would meet: the frontend it hits, masqueraded or not and why, the endpoints it may ' +
      'reach and with which probability, or why it is dropped or rejected. --live also arms nf_tables ' +
      'tracing for such packets (sending nothing) and prints the real path of the next one, waiting at ' +
      'most --live-timeout seconds (default 10, max 60).',
  ),
};

class UsageError extends Error {}

/** The options of explain and trace (also what `completion` offers). */
export const CLI_OPTIONS = {
  output: { type: 'string', short: 'o', default: 'table' },
  'control-socket': { type: 'string', default: DEFAULT_CONTROL_SOCKET },
  from: { type: 'string' },
  to: { type: 'string' },
  'in-interface': { type: 'string' },
  live: { type: 'boolean' },
  'live-timeout': { type: 'string', default: '10' },
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
    if (command === 'explain') {
      if (positionals.length > 1)
        throw new UsageError(`explain takes one NAMESPACE/NAME[:PORT], not ${positionals.join(' ')}`);
      if (values.from !== undefined || values.to !== undefined || values['in-interface'] !== undefined)
        throw new UsageError('--from, --to and --in-interface belong to trace');
      const target = positionals[0];
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
    const result = (await askDaemon(
      socket,
      query,
      values.live === true ? liveSeconds * 1000 + 15_000 : undefined,
    )) as TraceResult & { live?: LiveAnswer };
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
    if (e instanceof NoDaemonError) {
      err(`kube-proxy-ts ${command}: ${e.message}\n`);
      return 3;
    }
    err(`kube-proxy-ts ${command}: ${errorMessage(e)}\n`);
    return 1;
  }
}

export { UsageError };
