// A logger writing into memory at a fixed time, for tests of what the log prints.
import { Writable } from 'node:stream';
import { createLogger, type LoggerOptions } from '../../src/log/logger.ts';

export function captureLog(opts: Omit<LoggerOptions, 'stream'>) {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger({ ...opts, stream, now: () => Date.UTC(2026, 10, 23, 3, 4, 5, 678) });
  return {
    logger,
    /** Everything written, once the logger is closed (flushed). */
    async text(): Promise<string> {
      await logger.close();
      return text;
    },
    /** The non-empty lines written, once the logger is closed. */
    async lines(): Promise<string[]> {
      await logger.close();
      return text.split('\n').filter((l) => l !== '');
    },
  };
}
