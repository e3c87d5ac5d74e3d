// A cleanup is a list of named steps (what it removes, and how), run one after another: a
// failed step is logged and counted, and the others still run.

import { errorMessage } from '../base/errors.ts';
import type { Logger } from '../base/logger.ts';

/** One named cleanup step: what it removes, and how. */
export interface CleanupStep {
  what: string;
  run(): Promise<void>;
}

/** Runs every step (a failed one does not stop the others); returns the failures. */
export async function runCleanupSteps(steps: readonly CleanupStep[], logger: Logger): Promise<string[]> {
  const failures: string[] = [];
  for (const s of steps) {
    try {
      await s.run();
      // At debug only: whether anything was there is for the caller's summary (or the step's own line).
      logger.debug('Cleanup step done', { what: s.what });
    } catch (e) {
      failures.push(`${s.what}: ${errorMessage(e)}`);
      logger.error('Cleanup failed', { op: 'cleanup', what: s.what, err: e });
    }
  }
  return failures;
}
