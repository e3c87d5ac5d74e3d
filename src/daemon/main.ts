// kube-proxy-ts's entry point (bin/kube-proxy-ts.js calls main): the command line decides
// between serve, --cleanup and --write-config-to; build.ts makes the parts, daemon.ts runs
// them, signals.ts turns SIGTERM/SIGINT into a clean stop (exit 0, rules left in place).

import { errorMessage } from '../base/errors.ts';
import { readFileSync } from 'node:fs';
import { flushCompileCache } from 'node:module';
import { systemClock } from '../base/clock.ts';
import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import { DEFAULTED_MODE_WARNING, parseCommandLine, readConfigText, writeConfigFile } from '../config/index.ts';
import type { ProxyConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import type { ClosableLogger } from '../log/index.ts';
// Type only: build.ts itself is imported when serving (it loads the kernel side).
import type { BuildDeps } from './build.ts';
import { watchConfigFile } from './config-watch.ts';
import { HeapRelease } from './heap.ts';
import type { WatchFn } from './config-watch.ts';
import { installProcessHandlers } from './signals.ts';
import type { ProcessLike } from './signals.ts';

interface Startable {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves after the first successful full sync. */
  readonly ready?: Promise<void>;
  /** Whether a sync runs (the heap release waits for it). */
  readonly loop?: { isSyncing(): boolean };
}

/** What main needs from the outside world; tests replace parts of it. */
export interface MainDeps {
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** Where signals and fatal errors come from; default process. */
  proc?: ProcessLike;
  /** Ends the process once a serve run is over; default process.exit. */
  exit?: (code: number) => void;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  logger?: (config: ProxyConfig) => ClosableLogger;
  /** Makes the daemon for `serve`; default build.ts. */
  buildDaemon?: (config: ProxyConfig, deps: BuildDeps) => Startable | Promise<Startable>;
  /** How the --config file's directory is watched; default node:fs watch. */
  watchConfig?: WatchFn;
  /** --init-only; default init-only.ts. */
  initOnly?: (config: ProxyConfig, deps: { logger: Logger; clock: Clock }) => Promise<number>;
  /** --cleanup; default cleanup.ts against the kernel. */
  cleanup?: (deps: { logger: Logger; clock: Clock }) => Promise<number>;
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return `v${pkg.version ?? '0.0.0'}`;
  } catch {
    return 'v0.0.0-unknown';
  }
}

/** One readable line for the operator; the stack and causes at --v=2. */
function startFailed(logger: Logger, op: string, config: ProxyConfig, e: unknown): void {
  logger.error(`Cannot start: ${errorMessage(e)}`, { op, mode: config.mode });
  logger.debug('Start-up failure details', { op, err: e });
}

/** Flushes the logger, but never waits more than a second for it. */
async function closeLogger(logger: ClosableLogger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([logger.close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 1000)))]);
  clearTimeout(timer);
}

export async function main(argv: readonly string[], deps: MainDeps = {}): Promise<number> {
  const out = deps.stdout ?? ((s: string) => void process.stdout.write(s));
  const err = deps.stderr ?? ((s: string) => void process.stderr.write(s));
  // `explain` and `trace` ask the running daemon; they load none of its parts.
  if (argv[0] === 'explain' || argv[0] === 'trace')
    return (await import('../cli/main.ts')).runCli(argv, { stdout: out, stderr: err });
  if (argv[0] === 'completion') return (await import('../cli/completion.ts')).runCompletion(argv.slice(1), out, err);
  if (argv[0] === 'profile')
    return (await import('../cli/profile.ts')).runProfile(argv.slice(1), { stdout: out, stderr: err });
  const version = packageVersion();
  // The --config text as read, for the watcher (a change after this read must still count).
  const configTexts = new Map<string, string>();
  const r = parseCommandLine(argv, {
    version,
    readFile: (p) => {
      const text = readConfigText(p);
      configTexts.set(p, text);
      return text;
    },
  });
  if (r.kind === 'exit') {
    out(r.stdout);
    err(r.stderr);
    return r.code;
  }
  const { config } = r;
  const logger =
    deps.logger?.(config) ?? createLogger({ verbosity: config.logging.verbosity, format: config.logging.format });
  const clock = deps.clock ?? systemClock;
  // Upstream writes --write-config-to before it builds the proxy, so the warning about the mode
  // it would pick is not said there.
  for (const w of r.warnings) if (r.action !== 'write-config' || w !== DEFAULTED_MODE_WARNING) logger.warn(w);

  if (r.action === 'write-config') {
    try {
      writeConfigFile(r.writeConfigTo!, config);
      logger.info('Wrote the effective configuration', { path: r.writeConfigTo });
      await closeLogger(logger);
      return 0;
    } catch (e) {
      // A bad path is the operator's to fix: one line naming it and why, no stack.
      err(`kube-proxy-ts: --write-config-to: ${errorMessage(e)}\n`);
      await closeLogger(logger);
      return 1;
    }
  }

  if (r.action === 'init-only') {
    let code: number;
    try {
      const init = deps.initOnly ?? (await import('./init-only.ts')).initOnly;
      code = await init(config, { logger, clock });
    } catch (e) {
      logger.error(`Initialization failed: ${errorMessage(e)}`, { op: 'init-only', mode: config.mode });
      code = 1;
    }
    await closeLogger(logger);
    return code;
  }

  if (r.action === 'cleanup') {
    let code: number;
    try {
      // The daemon's parts load only for the action that needs them (--help stays fast).
      const cleanup = deps.cleanup ?? (await import('./cleanup.ts')).cleanupEverything;
      code = await cleanup({ logger, clock });
    } catch (e) {
      logger.error('Cleanup failed', { op: 'cleanup', err: e });
      code = 1;
    }
    await closeLogger(logger);
    return code;
  }

  const watched =
    r.configFile !== undefined ? { path: r.configFile, text: configTexts.get(r.configFile) ?? '' } : undefined;
  return serve(config, version, logger, clock, deps, watched);
}

async function serve(
  config: ProxyConfig,
  version: string,
  logger: ClosableLogger,
  clock: Clock,
  deps: MainDeps,
  configFile?: { path: string; text: string },
): Promise<number> {
  const exit = deps.exit ?? ((code: number) => process.exit(code));
  // After the first full sync, after later bursts once quiet, and after large inputs (heap.ts).
  // The addon is loaded here, as build.ts is, not for --help or --version.
  const { mallocTrim } = await import('netlink-socket');
  const heap = new HeapRelease({ clock, logger, trim: mallocTrim, busy: () => daemon?.loop?.isSyncing() ?? false });
  let daemon: Startable | undefined;
  try {
    const build = deps.buildDaemon ?? (await import('./build.ts')).buildDaemon;
    daemon = await build(config, {
      logger,
      clock,
      version,
      ...(deps.env ? { env: deps.env } : {}),
      ...(configFile ? { configFile: configFile.path } : {}),
      onSynced: (d) => heap.synced(d),
      onLargeInputSynced: () => heap.request(),
    });
  } catch (e) {
    startFailed(logger, 'build daemon', config, e);
    await closeLogger(logger);
    exit(1);
    return 1;
  }
  let finish!: (code: number) => void;
  const done = new Promise<number>((resolve) => (finish = resolve));
  const uninstall = installProcessHandlers({
    proc: deps.proc ?? process,
    logger,
    shutdown: () => daemon.stop(),
    exit: (code) => finish(code),
  });
  // A changed --config file: stop (rules stay) and exit 1, as upstream's watcher does.
  const watcher =
    configFile === undefined
      ? undefined
      : watchConfigFile({
          path: configFile.path,
          initialText: configFile.text,
          logger,
          ...(deps.watchConfig ? { watch: deps.watchConfig } : {}),
          onChanged: () =>
            void daemon.stop().then(
              () => finish(1),
              () => finish(1),
            ),
        });
  try {
    await daemon.start();
    void daemon.ready?.then(
      () => {
        // Every module the daemon runs is loaded by now: write Node's compile cache (the unit's
        // NODE_COMPILE_CACHE) at once, not only at exit, so a crash or SIGKILL does not lose it.
        flushCompileCache();
      },
      () => undefined,
    );
  } catch (e) {
    startFailed(logger, 'start daemon', config, e);
    finish(1);
  }
  const code = await done;
  heap.close();
  watcher?.close();
  uninstall();
  await closeLogger(logger);
  // Whatever is still open (a socket mid-close, a timer) must not keep a stopped daemon alive.
  exit(code);
  return code;
}
