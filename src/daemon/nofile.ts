// RLIMIT_NOFILE at start: the soft limit is raised to the hard one, as Go's runtime does for
// upstream kube-proxy (since Go 1.19), so that a unit's or a container runtime's low soft
// limit (often 1024) does not cap a proxy whose hard limit allows far more. The userspace
// proxy's descriptor budget is then the limit less a reserve for the rest of the daemon: its
// HTTP servers' connections at most (health/http-limits.ts) and OTHER_DESCRIPTORS_RESERVED.
// Node has no getrlimit/setrlimit: our addon (native/netlink-socket/src/rlimit.c) has them.

import { getrlimit, RLIMIT_NOFILE, setrlimit } from 'netlink-socket';
import { budgetSize, OTHER_DESCRIPTORS_RESERVED } from '../base/descriptor-budget.ts';
import type { BudgetSize } from '../base/descriptor-budget.ts';
import { errorMessage } from '../base/errors.ts';
import type { Logger } from '../base/logger.ts';
import { HTTP_CONNECTIONS_MAX } from '../health/http-limits.ts';

export interface NofileLimit {
  soft: number;
  hard: number;
}

export interface RlimitCalls {
  get(): NofileLimit;
  set(soft: number, hard: number): void;
}

const addon: RlimitCalls = {
  get: () => getrlimit(RLIMIT_NOFILE),
  set: (soft, hard) => setrlimit(RLIMIT_NOFILE, soft, hard),
};

/** Raises the soft limit to the hard one; returns the limits in force. A failure is logged, not fatal. */
export function raiseNofileLimit(logger: Logger, calls: RlimitCalls = addon): NofileLimit {
  const before = calls.get();
  if (before.soft >= before.hard) return before;
  try {
    calls.set(before.hard, before.hard);
  } catch (e) {
    logger.warn('Could not raise the open file limit to its hard limit', {
      soft: before.soft,
      hard: before.hard,
      err: errorMessage(e),
    });
    return before;
  }
  const after = calls.get();
  logger.info('Raised the open file limit (RLIMIT_NOFILE) to its hard limit', { from: before.soft, to: after.soft });
  return after;
}

/** The userspace proxy's descriptor budget under `soft`, logged (a warning when the reserve does not fit). */
export function proxyBudgetSize(soft: number, logger: Logger): BudgetSize {
  const size = budgetSize(soft, HTTP_CONNECTIONS_MAX + OTHER_DESCRIPTORS_RESERVED);
  const fields = { openFileLimit: soft, budget: size.limit, reserved: size.reserved };
  if (size.tight)
    logger.warn(
      'The open file limit is low: the userspace proxy gets half of it, less than the rest of the daemon may need',
      { ...fields, wanted: HTTP_CONNECTIONS_MAX + OTHER_DESCRIPTORS_RESERVED },
    );
  else logger.info('Userspace proxy descriptor budget', fields);
  return size;
}
