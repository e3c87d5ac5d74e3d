// --init-only: the start-up steps that need full root privileges, then exit 0, so that the
// daemon itself can then run with CAP_NET_ADMIN only (upstream's InitAndExit): the OOM
// score, the conntrack tunables, and the selected mode's kernel checks and sysctls.

import { cpus } from 'node:os';
import type { Clock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { ProxyConfig } from '../config/index.ts';
import { hostFacts } from './build.ts';
import { applyConntrackSettings, procConntrackIO } from './conntrack-settings.ts';
import { servedFamilies } from './families.ts';
import { applyOomScoreAdj } from './oom-score.ts';
import { buildProxiers } from './proxiers.ts';
import { ProcSysctl } from './sysctl.ts';

export async function initOnly(config: ProxyConfig, deps: { logger: Logger; clock: Clock }): Promise<number> {
  const { logger, clock } = deps;
  const sysctl = new ProcSysctl();
  await applyOomScoreAdj(config.oomScoreAdj, logger);
  await applyConntrackSettings(config.conntrack, cpus().length, procConntrackIO(), logger);
  const proxiers = buildProxiers(config, servedFamilies(config, hostFacts()).families, { logger, clock, sysctl });
  try {
    await proxiers.init();
  } finally {
    proxiers.close();
  }
  logger.info('Initialization done (--init-only); exiting', { mode: config.mode });
  return 0;
}
