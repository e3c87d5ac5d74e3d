export {
  createLogger,
  detectJournal,
  levelForVerbosity,
  SYSLOG_PRIORITY,
  type ClosableLogger,
  type LoggerOptions,
  type LogLevel,
} from './logger.ts';
