// The subcommands, as `--help` lists them and as an unknown command names them. The daemon's
// main dispatches on these names before the flags are parsed.

export interface CommandInfo {
  name: string;
  /** The arguments, as the usage line shows them. */
  args: string;
  summary: string;
}

export const COMMANDS: readonly CommandInfo[] = [
  {
    name: 'explain',
    args: '[NAMESPACE/NAME[:PORT]]',
    summary:
      'a Service port as the running daemon programmed it, read back from the kernel, and why each endpoint was used or not',
  },
  {
    name: 'trace',
    args: '--from IP[:PORT] --to IP:PORT[/PROTO]',
    summary:
      'what a packet would meet: frontend, verdict, masquerade, endpoints (--live: the path the next one really takes)',
  },
  { name: 'completion', args: 'bash|zsh', summary: 'print a shell completion script' },
  {
    name: 'profile',
    args: 'cpu|heap [--seconds N] [--output FILE]',
    summary: 'a CPU profile or heap snapshot of a daemon started with --profiling, written by it to FILE',
  },
];

export const COMMAND_NAMES: readonly string[] = COMMANDS.map((c) => c.name);

/** "explain, trace, completion and profile" */
export function commandNamesText(): string {
  return `${COMMAND_NAMES.slice(0, -1).join(', ')} and ${COMMAND_NAMES.at(-1)!}`;
}
