// --oom-score-adj / oomScoreAdj: written to /proc/self/oom_score_adj at start, as upstream's
// ProxyServer.Run does (oom.ApplyOOMScoreAdj(0, value)), so the kernel kills kube-proxy
// last. A failure (no CAP_SYS_RESOURCE for a negative value, a read-only /proc) is logged
// at --v=2 and is not fatal, as upstream.

import { writeFile } from 'node:fs/promises';
import type { Logger } from '../base/logger.ts';

export type WriteText = (path: string, text: string) => Promise<void>;

export const OOM_SCORE_ADJ_PATH = '/proc/self/oom_score_adj';

export async function applyOomScoreAdj(
  value: number,
  logger: Logger,
  write: WriteText = (p, t) => writeFile(p, t),
  path = OOM_SCORE_ADJ_PATH,
): Promise<void> {
  try {
    await write(path, `${value}\n`);
    logger.debug('Applied oom_score_adj', { value });
  } catch (err) {
    logger.debug('Failed to apply OOMScore', { value, path, err: (err as NodeJS.ErrnoException).code ?? String(err) });
  }
}
