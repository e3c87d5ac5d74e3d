// The base Logger backed by winston, writing to stderr.
//
//   - Under systemd (JOURNAL_STREAM names our stderr), every line starts with its syslog
//     priority, "<3>" error, "<4>" warning, "<6>" info, "<7>" debug, which journald strips
//     and records as PRIORITY; no timestamp (journald has its own). Multi-line output (a
//     stack) carries the prefix on every line, so each journal entry keeps the level.
//   - Otherwise human-readable lines: "2026-11-23T03:46:04.123Z info  Synced rules mode=nftables".
//   - format 'json': one JSON object a line {"ts","level","msg",...fields} (prefixed under journald).
//   - Verbosity as klog's -v: 0 and 1 log error/warn/info, 2 and above add debug.

import { errorMessage } from '../base/errors.ts';
import { fstatSync } from 'node:fs';
import type { Writable } from 'node:stream';
import winston from 'winston';
import type { LogFields, Logger } from '../base/logger.ts';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';

/** syslog(3) priorities journald understands in a "<N>" line prefix. */
export const SYSLOG_PRIORITY: Readonly<Record<LogLevel, number>> = { error: 3, warn: 4, info: 6, debug: 7 };

const LEVELS: Readonly<Record<LogLevel, number>> = { error: 0, warn: 1, info: 2, debug: 3 };

export interface LoggerOptions {
  /** klog-style -v; default 0. */
  verbosity?: number;
  format?: 'text' | 'json';
  /** Prefix lines with syslog priorities; default: detected from JOURNAL_STREAM (see detectJournal). */
  journal?: boolean;
  /** Where lines go; default process.stderr. */
  stream?: Writable;
  /** Clock for text/JSON timestamps; default Date.now. */
  now?: () => number;
  /** Fields on every line. */
  fields?: LogFields;
}

export interface ClosableLogger extends Logger {
  /** Flushes and ends the underlying winston logger. */
  close(): Promise<void>;
}

/** klog -v -> the most verbose level logged. */
export function levelForVerbosity(v: number): LogLevel {
  return v >= 2 ? 'debug' : 'info';
}

/**
 * systemd sets JOURNAL_STREAM="<dev>:<inode>" of the stream it connected to stdout/stderr.
 * It only counts when stderr is still that stream (not redirected to a file by a wrapper).
 */
export function detectJournal(env: NodeJS.ProcessEnv = process.env, stderrFd = 2): boolean {
  const js = env.JOURNAL_STREAM;
  if (js === undefined || js === '') return false;
  const m = /^(\d+):(\d+)$/.exec(js);
  if (m === null) return false;
  try {
    const st = fstatSync(stderrFd, { bigint: true });
    return st.dev === BigInt(m[1]!) && st.ino === BigInt(m[2]!);
  } catch {
    return false;
  }
}

const MESSAGE = Symbol.for('message');
const FIELDS = Symbol.for('kube-proxy-ts.fields');

interface Entry {
  level: string;
  message: string;
  [FIELDS]?: LogFields;
  [MESSAGE]?: string;
}

export function createLogger(opts: LoggerOptions = {}): ClosableLogger {
  const journal = opts.journal ?? detectJournal();
  const format = opts.format ?? 'text';
  const now = opts.now ?? Date.now;
  const render = winston.format((info) => {
    const e = info as unknown as Entry;
    const level = e.level as LogLevel;
    const fields = e[FIELDS] ?? {};
    const text =
      format === 'json'
        ? renderJSON(now(), level, e.message, fields)
        : renderText(now(), level, e.message, fields, journal);
    e[MESSAGE] = journal ? prefixLines(text, SYSLOG_PRIORITY[level]) : text;
    return info;
  });
  const w = winston.createLogger({
    levels: LEVELS,
    level: levelForVerbosity(opts.verbosity ?? 0),
    format: render(),
    transports: [new winston.transports.Stream({ stream: opts.stream ?? process.stderr })],
    exitOnError: false,
  });

  const make = (base: LogFields): Logger => {
    const put =
      (level: LogLevel) =>
      (msg: string, fields: LogFields = {}) => {
        if (!w.isLevelEnabled(level)) return;
        w.log({ level, message: msg, [FIELDS]: { ...base, ...fields } } as unknown as winston.LogEntry);
      };
    return {
      error: put('error'),
      warn: put('warn'),
      info: put('info'),
      debug: put('debug'),
      child: (fields) => make({ ...base, ...fields }),
    };
  };
  const root = make(opts.fields ?? {});
  return {
    ...root,
    close: () =>
      new Promise<void>((resolve) => {
        w.once('finish', () => resolve());
        w.end();
      }),
  };
}

function prefixLines(text: string, priority: number): string {
  return text
    .split('\n')
    .map((line) => `<${priority}>${line}`)
    .join('\n');
}

const LEVEL_TEXT: Readonly<Record<LogLevel, string>> = { error: 'error', warn: 'warn ', info: 'info ', debug: 'debug' };

function renderText(ts: number, level: LogLevel, msg: string, fields: LogFields, journal: boolean): string {
  const stacks: string[] = [];
  const kv = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => {
      if (v instanceof Error) {
        if (level === 'error' && v.stack !== undefined) stacks.push(stackText(v));
        return `${k}=${quote(errorText(v))}`;
      }
      return `${k}=${quote(valueText(v))}`;
    })
    .join(' ');
  const text = escapeControls(msg);
  const head = journal ? text : `${new Date(ts).toISOString()} ${LEVEL_TEXT[level]} ${text}`;
  const line = kv === '' ? head : `${head} ${kv}`;
  return stacks.length === 0 ? line : `${line}\n${stacks.join('\n')}`;
}

function renderJSON(ts: number, level: LogLevel, msg: string, fields: LogFields): string {
  const out: Record<string, unknown> = { ts: ts / 1000, level, msg };
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined || k === 'ts' || k === 'level' || k === 'msg') continue;
    out[k] =
      v instanceof Error ? { message: errorText(v), ...(level === 'error' && v.stack ? { stack: v.stack } : {}) } : v;
  }
  // JSON.stringify escapes only C0 (and lone surrogates); the rest is escaped after, which
  // keeps the document valid: these characters can only stand inside its strings.
  return escapeControls(JSON.stringify(out, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

function errorText(e: Error): string {
  let text = e.message;
  let cause: unknown = e.cause;
  for (let depth = 0; cause !== undefined && depth < 5; depth++) {
    text += `: ${errorMessage(cause)}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

function valueText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * Characters a log line must not carry raw: controls (Unicode Cc: C0 with newline and the ESC of
 * ANSI sequences, DEL, C1), format characters (Cf: the bidi overrides and isolates such as
 * U+202E, zero-width characters, the BOM, invisible tags) and the line and paragraph
 * separators. Logged values come from Kubernetes objects and kernel replies; raw, a name
 * could end the line and forge the next one, recolour a terminal, or show a reader text in
 * another order than the bytes say.
 */
const CONTROL = /[\p{Cc}\p{Cf}\u2028\u2029]/u;
const CONTROLS = new RegExp(CONTROL.source, 'gu');
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One UTF-16 unit as JSON writes it: \u202e. */
const unitEscape = (unit: number): string => `\\u${unit.toString(16).padStart(4, '0')}`;

/**
 * The text with every such character written as an escape (\n, \u001b, \u202e; one above
 * U+FFFF as its JSON surrogate pair), so it stays on its line, inert. The escapes are JSON's,
 * so a JSON document stays valid and parses back to the same text.
 */
export function escapeControls(s: string): string {
  if (!CONTROL.test(s)) return s;
  return s.replace(
    CONTROLS,
    (c) => SHORT_ESCAPES[c] ?? Array.from({ length: c.length }, (_, i) => unitEscape(c.charCodeAt(i))).join(''),
  );
}

/** Quotes values with spaces, quotes, '=' or control characters, so a line stays one key=value list. */
function quote(s: string): string {
  // JSON.stringify escapes quotes, backslashes and C0; escapeControls the rest (DEL, C1, Cf, U+2028/9).
  return s === '' || /[\s"=\\]/.test(s) || CONTROL.test(s) ? escapeControls(JSON.stringify(s)) : s;
}

/**
 * A stack whose first line (the message, which may hold logged values) is escaped; the frames follow on their lines.
 */
function stackText(e: Error): string {
  const stack = e.stack!;
  const head = `${e.name}: ${e.message}`;
  return stack.startsWith(head) ? escapeControls(head) + stack.slice(head.length) : escapeControls(stack);
}
