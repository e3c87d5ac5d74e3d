// The logging interface every part receives. The daemon backs it with winston/journald
// (src/log); tests use memoryLogger. Fields are structured: name the object and operation.

export type LogFields = Record<string, unknown>;

export interface Logger {
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  /** Verbose detail, enabled by --v >= 2 as upstream's klog V(2). */
  debug(msg: string, fields?: LogFields): void;
  /** A logger that adds these fields to every line (component name, mode ...). */
  child(fields: LogFields): Logger;
}

export interface LogRecord {
  level: 'error' | 'warn' | 'info' | 'debug';
  msg: string;
  fields: LogFields;
}

/** Collects records in memory, for tests. */
export function memoryLogger(records: LogRecord[] = [], base: LogFields = {}): Logger & { records: LogRecord[] } {
  const put =
    (level: LogRecord['level']) =>
    (msg: string, fields: LogFields = {}) => {
      records.push({ level, msg, fields: { ...base, ...fields } });
    };
  return {
    records,
    error: put('error'),
    warn: put('warn'),
    info: put('info'),
    debug: put('debug'),
    child: (fields) => memoryLogger(records, { ...base, ...fields }),
  };
}

export const nullLogger: Logger = {
  error() {},
  warn() {},
  info() {},
  debug() {},
  child: () => nullLogger,
};
